"""pytest plugin for J1's child run: end the process right after pytest has reported, skipping interpreter
finalization, where PySide6 6.12 aborts ("bool_dealloc: deallocating True or False") once the window's own engine
has answered a chat (also on main before these changes; the test's verdict is what pytest reported)."""

from __future__ import annotations

import os
import sys

_status = [0]


def pytest_sessionfinish(session, exitstatus) -> None:  # type: ignore[no-untyped-def]
    _status[0] = int(exitstatus)


def pytest_unconfigure(config) -> None:  # type: ignore[no-untyped-def]
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_status[0])
