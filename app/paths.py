"""Where DynaDraft keeps its data: platformdirs folders, all moved under one root by DYNADRAFT_HOME."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

HOME_ENV = "DYNADRAFT_HOME"


@dataclass(frozen=True)
class Paths:
    """The folders DynaDraft writes to; created on first use by `ensure()`."""

    models: Path
    cache: Path
    calibration: Path
    history: Path
    config: Path
    logs: Path

    def ensure(self) -> Paths:
        for p in (self.models, self.cache, self.calibration, self.history, self.config, self.logs):
            p.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def prompt_cache(self) -> Path:
        """The app's conversation cache on disk: a folder per model identity (app/engine/cache_disk.py)."""
        return self.cache / "prompt-cache"

    @property
    def history_db(self) -> Path:
        return self.history / "chats.sqlite3"


def get_paths() -> Paths:
    """Return the data folders; DYNADRAFT_HOME (if set) replaces every platform folder with one tree."""
    home = os.environ.get(HOME_ENV)
    if home:
        root = Path(home).expanduser()
        return Paths(
            models=root / "models",
            cache=root / "cache",
            calibration=root / "calibration",
            history=root / "history",
            config=root / "config",
            logs=root / "logs",
        )
    dirs = platformdirs.PlatformDirs("DynaDraft", appauthor=False)
    data = Path(dirs.user_data_dir)
    return Paths(
        models=data / "models",
        cache=Path(dirs.user_cache_dir),
        calibration=data / "calibration",
        history=data / "history",
        config=Path(dirs.user_config_dir),
        logs=Path(dirs.user_log_dir),
    )
