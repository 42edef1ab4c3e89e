"""Hub file names that would escape the models folder are refused before any request (real huggingface_hub client)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.models.cli import add_pull_arguments, run_pull
from app.models.download import download_model
from app.models.download_errors import DownloadError
from app.models.hub_files import list_repo_files
from app.models.names import contained, unsafe_reason
from app.paths import get_paths
from tests.models.models_testlib import FakeHub

REPO = "org/evil-GGUF"
HOSTILE = [
    "../../escape.gguf",
    "sub/../../escape.gguf",
    "..\\..\\escape.gguf",
    "sub\\escape.gguf",
    "/tmp/escape.gguf",
    "//server/share/escape.gguf",
    "C:escape.gguf",
    "C:/Users/escape.gguf",
    "model.gguf:stream",
    "./model.gguf",
    "a//model.gguf",
    "",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_name_refused_before_any_request(hub: FakeHub, tmp_path: Path, name: str) -> None:
    if name:
        hub.add(REPO, name, b"GGUF" + b"\0" * 64)
    dest = tmp_path / "models" / "org" / "evil-GGUF"
    with pytest.raises(DownloadError, match="refusing the file name"):
        download_model(REPO, name, dest, endpoint=hub.base)
    assert hub.requests == []  # nothing was asked of the Hub
    assert not any(p.is_file() for p in tmp_path.rglob("*"))  # and nothing written anywhere


def test_listing_drops_hostile_names_so_tag_lookup_picks_the_real_file(
    hub: FakeHub, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("../../aaa-Q4_K_M.gguf", "..\\aab-Q4_K_M.gguf", "C:aac-Q4_K_M.gguf"):
        hub.add(REPO, name, b"GGUF" + b"\0" * 64)
    hub.add(REPO, "zzz-Q4_K_M.gguf", b"GGUF" + b"\0" * 64)
    assert list_repo_files(REPO, endpoint=hub.base) == ["zzz-Q4_K_M.gguf"]
    p = argparse.ArgumentParser()
    add_pull_arguments(p)
    assert run_pull(p.parse_args([f"{REPO}:Q4_K_M", "--endpoint", hub.base, "--json"])) == 0
    out = json.loads(capsys.readouterr().out)
    models = get_paths().models
    assert out["path"] == str(models / "org" / "evil-GGUF" / "zzz-Q4_K_M.gguf")
    assert sorted(p.name for p in models.parent.rglob("*.gguf")) == ["zzz-Q4_K_M.gguf"]


def test_name_rules() -> None:
    assert all(unsafe_reason(n) for n in HOSTILE)
    for ok in ("model.gguf", "sub/dir/model-00001-of-00003.gguf", "Q4_K_M/x.gguf", "a..b.gguf"):
        assert unsafe_reason(ok) is None, ok


def test_contained_refuses_a_symlinked_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="leads outside"):
        contained(root, "link/x.gguf")
    assert contained(root, "sub/x.gguf") == root / "sub" / "x.gguf"
