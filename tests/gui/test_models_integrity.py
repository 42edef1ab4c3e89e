"""The Models panel says plainly which local files are verified, unverified or truncated."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from app.models.integrity import sha256_file, write_marker
from app.paths import get_paths


def test_local_list_marks_unverified_and_truncated(qtbot, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    from app.gui.models_panel import ModelsPanel

    folder = get_paths().models / "me" / "smol"
    folder.mkdir(parents=True)
    verified, unverified = folder / "smol-verified.gguf", folder / "smol-unverified.gguf"
    for path, ok in ((verified, True), (unverified, False)):
        shutil.copyfile(smollm2_path, path)
        write_marker(path, sha256_file(path), verified=ok)
    with open(smollm2_path, "rb") as f:
        (folder / "smol-truncated.gguf").write_bytes(f.read(smollm2_path.stat().st_size - 4096))

    panel = ModelsPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    panel.show()
    panel.refresh()
    rows = {}
    for i in range(panel.local.topLevelItemCount()):
        it = panel.local.topLevelItem(i)
        rows[it.text(0)] = (it.text(3), it.foreground(3).color().name())
    assert rows["smol-verified.gguf"][0].startswith("✔ sha256 verified")
    assert rows["smol-unverified.gguf"][0].startswith("⚠ NOT VERIFIED") and rows["smol-unverified.gguf"][1] != "#000000"
    assert "is truncated" in rows["smol-truncated.gguf"][0]
    assert all(panel.local.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) for i in range(3))
    shots = os.environ.get("DYNADRAFT_SHOTS")
    if shots:
        panel.grab().save(str(Path(shots) / "harden-models-integrity.png"))
