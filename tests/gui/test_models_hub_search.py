"""The Models tab's Hub box: search, list a repo's GGUFs and download REPO:FILE from a local Hub (real
huggingface_hub client over real HTTP), with the catalog downloads' progress, cancel, resume and name checks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.paths import get_paths
from tests.engine.tiny_gguf import write_tiny_llama
from tests.models.models_testlib import FakeHub, serve_fake_hub

MB = 1024 * 1024


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A Hub on 127.0.0.1 (LFS redirects to 'localhost', another host like a CDN), named by HF_ENDPOINT."""
    for var in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    with serve_fake_hub() as state:
        monkeypatch.setenv("HF_ENDPOINT", state.base)
        yield state


@pytest.fixture
def panel(qtbot):  # type: ignore[no-untyped-def]
    from app.gui.models_panel import ModelsPanel

    p = ModelsPanel()
    qtbot.addWidget(p)
    p.resize(960, 760)
    p.show()
    p.sources.setCurrentWidget(p.hub)
    return p


def _settled(panel) -> bool:  # type: ignore[no-untyped-def]
    return panel.dl_status.text().startswith(("Downloaded", "Download failed", "Download cancelled", "Cannot"))


def _one_line(text: str) -> None:
    assert text and "\n" not in text and "Traceback" not in text, text


def test_search_lists_repos_and_files_and_a_picked_file_downloads(  # type: ignore[no-untyped-def]
    qtbot, hub: FakeHub, panel, tmp_path: Path
) -> None:
    from PySide6.QtCore import Qt

    tiny = write_tiny_llama(tmp_path / "tiny.gguf").read_bytes()
    hub.add("me/tiny-GGUF", "tiny-Q8_0.gguf", tiny)
    hub.add("me/tiny-GGUF", "tiny-F32-00001-of-00002.gguf", tiny[:1000])
    hub.add("me/tiny-GGUF", "tiny-F32-00002-of-00002.gguf", tiny[1000:])
    hub.add("me/tiny-GGUF", "README.md", b"# tiny\n", lfs=False)
    hub.add("someone/unrelated", "x.gguf", b"GGUF")
    box = panel.hub
    qtbot.keyClicks(box.query, "tiny")
    qtbot.keyClick(box.query, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: box.results.topLevelItemCount() == 1, timeout=30_000)
    repo = box.results.topLevelItem(0)
    assert repo.text(0) == "me/tiny-GGUF"
    assert [r for r in hub.requests if r["path"] == "/api/models"]  # the real client asked the Hub's search API
    repo.setExpanded(True)
    qtbot.waitUntil(lambda: repo.childCount() == 2, timeout=30_000)
    names = [repo.child(i).text(0) for i in range(repo.childCount())]
    # Only GGUF models, a split one once (through its first shard); sizes from the Hub's LFS metadata.
    assert sorted(names) == ["tiny-F32-00001-of-00002.gguf (2 shards)", "tiny-Q8_0.gguf"]
    assert all(repo.child(i).text(1) != "?" for i in range(2))
    q8 = next(repo.child(i) for i in range(2) if repo.child(i).text(0) == "tiny-Q8_0.gguf")
    box.results.setCurrentItem(q8)
    assert box.spec.text() == "me/tiny-GGUF:tiny-Q8_0.gguf"
    shots = os.environ.get("DYNADRAFT_SHOT_DIR")  # set by hand to keep a screenshot of the Hub box
    if shots:
        panel.grab().save(str(Path(shots) / "models-search.png"))
    formats: list[str] = []
    panel.progress.valueChanged.connect(lambda _v: formats.append(panel.progress.format()))
    box.pull_btn.click()
    qtbot.waitUntil(lambda: _settled(panel), timeout=60_000)
    out = get_paths().models / "me" / "tiny-GGUF" / "tiny-Q8_0.gguf"
    assert panel.dl_status.text() == f"Downloaded: {out}", panel.dl_status.text()  # verified: no warning
    assert out.read_bytes() == tiny
    assert any("tiny-Q8_0.gguf (1/1)" in f for f in formats)  # the catalog downloads' progress bar
    listed = [panel.local.topLevelItem(i).text(0) for i in range(panel.local.topLevelItemCount())]
    assert "tiny-Q8_0.gguf" in listed  # and the models on disk list it at once
    assert box.pull_btn.isEnabled() and not panel.cancel_btn.isVisible()


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("me/tiny-GGUF:../escape.gguf", "refusing the file name '../escape.gguf': it climbs out of the folder"),
        ("me/tiny-GGUF:sub\\evil.gguf", "contains a backslash"),
        ("me/tiny-GGUF:README.md", "no .gguf file matching 'README.md'"),
        ("nobody/missing:m.gguf", "nobody/missing: repository not found"),
        ("not a repo:m.gguf", "Cannot download 'not a repo:m.gguf': 'not a repo' is not a Hugging Face repo id"),
    ],
)
def test_bad_specs_are_refused_in_one_line(qtbot, hub: FakeHub, panel, spec: str, said: str) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import Qt

    hub.add("me/tiny-GGUF", "tiny.gguf", b"GGUF" + bytes(100))
    hub.add("me/tiny-GGUF", "README.md", b"# tiny\n", lfs=False)
    panel.hub.spec.setText(spec)
    qtbot.keyClick(panel.hub.spec, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _settled(panel), timeout=30_000)
    _one_line(panel.dl_status.text())
    assert said in panel.dl_status.text()
    assert not any(p.is_file() for p in get_paths().models.rglob("*"))  # nothing written
    # A name that escapes the models folder never reached the network either.
    assert not [r for r in hub.requests if "escape" in r["path"] or "evil" in r["path"]]


def test_search_errors_are_one_line(qtbot, hub: FakeHub, panel, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    box = panel.hub
    box.search_btn.click()
    assert box.status.text() == "Type what to search for (part of a repository name)."
    hub.add("me/gone-GGUF", "gone.gguf", b"GGUF")
    box.query.setText("gone")
    box.search_btn.click()
    qtbot.waitUntil(lambda: box.results.topLevelItemCount() == 1, timeout=30_000)
    del hub.repos["me/gone-GGUF"]  # deleted on the Hub between the search and the listing
    box.results.topLevelItem(0).setExpanded(True)
    qtbot.waitUntil(lambda: box.status.text().startswith("Could not list"), timeout=30_000)
    _one_line(box.status.text())
    assert "me/gone-GGUF: repository not found" in box.status.text()
    assert not box.results.topLevelItem(0).isExpanded()  # expanding it again asks again
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: no network
    box.query.setText("tiny")
    box.search_btn.click()
    qtbot.waitUntil(lambda: box.status.text().startswith("Search failed"), timeout=60_000)
    _one_line(box.status.text())
    assert "cannot reach the Hub" in box.status.text()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    box.search_btn.click()
    qtbot.waitUntil(lambda: "offline mode" in box.status.text(), timeout=30_000)
    _one_line(box.status.text())


def test_a_cancelled_hub_download_resumes_where_it_stopped(qtbot, hub: FakeHub, panel) -> None:  # type: ignore[no-untyped-def]
    data = os.urandom(25 * MB)
    hf = hub.add("me/big-GGUF", "big.gguf", data)
    hub.chunk_delay = 0.01  # ~4 s in all: time to cancel after the first 10 MiB block reached the disk
    panel.hub.spec.setText("me/big-GGUF:big.gguf")
    panel.hub.pull_btn.click()
    assert not panel.hub.pull_btn.isEnabled() and panel.cancel_btn.isVisible()  # one download at a time
    part = get_paths().models / "me" / "big-GGUF" / "big.gguf.part"
    qtbot.waitUntil(lambda: part.is_file() and part.stat().st_size >= 10 * MB, timeout=60_000)
    panel.cancel_btn.click()
    qtbot.waitUntil(lambda: _settled(panel), timeout=60_000)
    assert panel.dl_status.text().startswith("Download cancelled"), panel.dl_status.text()
    kept = part.stat().st_size
    assert 0 < kept < len(data)
    hub.chunk_delay = 0.0
    panel.hub.pull_btn.click()
    qtbot.waitUntil(lambda: _settled(panel), timeout=60_000)
    assert panel.dl_status.text().startswith("Downloaded"), panel.dl_status.text()
    assert hub.gets(f"/cdn/{hf.sha256}")[-1]["range"] == f"bytes={kept}-"
    assert (get_paths().models / "me" / "big-GGUF" / "big.gguf").read_bytes() == data and not part.exists()
