"""Fixtures for the Dynamic Draft policy tests."""

from __future__ import annotations

import pytest

from app.policy import FrontierTable
from tests.policy.helpers import SEED_POINTS, SEED_TPS, make_table


@pytest.fixture
def seed_table() -> FrontierTable:
    """A table shaped like the seed note's Qwen proof set (n2,p0.0 is the best static setting)."""
    return make_table(SEED_TPS, SEED_POINTS, upper=262145)
