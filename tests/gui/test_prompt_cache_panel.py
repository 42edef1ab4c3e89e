"""The Models panel's prompt-cache row: what every model's saved conversations take on disk, a total cap that
removes the least recently used, and Clear."""

from __future__ import annotations

import os

from app.engine.cache import MIB, Entry
from app.engine.cache_disk import DiskStore
from app.paths import get_paths


def _save(name: str, mib: int, age_s: float) -> None:
    """A cache folder as a session writes it (DiskStore.save), `mib` of state, last used `age_s` seconds ago."""
    root = get_paths().prompt_cache
    store = DiskStore(root, {"model": name}, label=f"{name}.gguf")
    store.save([Entry("target", (1, 2, 3), os.urandom(mib * MIB))])
    index = store.folder / "index.json"
    os.utime(index, (index.stat().st_mtime - age_s,) * 2)


def test_the_row_shows_the_total_trims_to_the_cap_and_clears(qtbot) -> None:  # type: ignore[no-untyped-def]
    from app.gui.models_panel import ModelsPanel

    _save("old", 8, 3600)
    _save("new", 8, 0)
    panel = ModelsPanel()
    qtbot.addWidget(panel)
    panel.refresh()
    assert "2 model setups" in panel.cache_status.text() and panel.cache_clear_btn.isEnabled()

    with qtbot.waitSignal(panel.cache_cap_changed) as changed:
        panel.cache_cap.setValue(0.01)  # GiB: 10 MiB, where one of the two fits
        panel.cache_cap.editingFinished.emit()
    assert changed.args == [10]
    labels = [index.parent for index in get_paths().prompt_cache.glob("*/index.json")]
    assert len(labels) == 1 and "new.gguf" in (labels[0] / "index.json").read_text()  # the older one went
    assert "1 model setup," in panel.cache_status.text()

    panel.cache_clear_btn.click()
    assert not list(get_paths().prompt_cache.glob("*/index.json"))
    assert "0 model setups" in panel.cache_status.text() and not panel.cache_clear_btn.isEnabled()
