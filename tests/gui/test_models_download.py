"""The Models panel downloads a catalog build from a local Hub server (real huggingface_hub client, real HTTP)."""

from __future__ import annotations

import json
from pathlib import Path

from app.paths import get_paths
from tests.models.models_testlib import serve_fake_hub


def test_download_from_the_local_hub_shows_progress_and_completes(qtbot, monkeypatch, smollm2_path: Path) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    from app.gui.models_panel import ModelsPanel

    with serve_fake_hub() as hub:
        hub.add("me/smol", "smol-q4_1.gguf", smollm2_path.read_bytes())
        monkeypatch.setenv("HF_ENDPOINT", hub.base)
        cfg = get_paths().config
        cfg.mkdir(parents=True, exist_ok=True)
        (cfg / "catalog.json").write_text(
            json.dumps(
                {
                    "schema": 1,
                    "families": [
                        {
                            "id": "smol-test",
                            "name": "Smol (test)",
                            "builds": [
                                {"id": "smol-test-q4", "format": "Q4_1", "repo": "me/smol", "files": ["smol-q4_1.gguf"]}
                            ],
                        }
                    ],
                }
            )
        )
        panel = ModelsPanel()
        qtbot.addWidget(panel)
        panel.show()
        panel.refresh()
        items = [it for it in _walk(panel.tree) if it.data(0, Qt.ItemDataRole.UserRole) == "smol-test-q4"]
        assert items, "the user's catalog entry is listed"
        panel.tree.setCurrentItem(items[0])
        formats: list[str] = []
        panel.progress.valueChanged.connect(lambda _v: formats.append(panel.progress.format()))
        panel.download_btn.click()
        qtbot.waitUntil(lambda: panel.dl_status.text().startswith(("Downloaded", "Download failed")), timeout=120_000)
        assert panel.dl_status.text().startswith("Downloaded"), panel.dl_status.text()
        assert any("MB/s" in f for f in formats)  # progress (speed) was shown on the way
        out = get_paths().models / "me" / "smol" / "smol-q4_1.gguf"
        assert out.is_file() and out.stat().st_size == smollm2_path.stat().st_size


def _walk(tree):  # type: ignore[no-untyped-def]
    stack = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    while stack:
        it = stack.pop()
        yield it
        stack.extend(it.child(i) for i in range(it.childCount()))
