"""Downloads through the real huggingface_hub client against a local Hub: progress, cancel, resume, checks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.models.download import download_model
from app.models.download_errors import ChecksumMismatch, DownloadCancelled, DownloadError, HubOffline, NotEnoughSpace
from app.models.download_progress import Progress
from tests.models.models_testlib import TOKEN, FakeHub

REPO = "org/model-GGUF"
MB = 1024 * 1024


def _payload(n: int, seed: int = 0) -> bytes:
    # Deterministic and incompressible enough; avoids os.urandom so failures reproduce.
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block * 64
    return bytes(out[:n])


def test_download_reports_progress_and_verifies(hub: FakeHub, tmp_path: Path) -> None:
    data = _payload(4 * MB)
    hub.add(REPO, "model-Q4_K_M.gguf", data)
    hub.chunk_delay = 0.005  # ~0.3 s, long enough for speed and ETA to be measured
    events: list[Progress] = []
    res = download_model(REPO, "model-Q4_K_M.gguf", tmp_path / "dl", endpoint=hub.base, progress=events.append)
    assert res.path == tmp_path / "dl" / "model-Q4_K_M.gguf"
    assert res.path.read_bytes() == data
    f = res.files[0]
    assert f.verified and f.sha256 == hashlib.sha256(data).hexdigest() and "hub-lfs" in f.verify_note
    assert events[-1].phase == "done" and events[-1].overall_downloaded == len(data)
    assert all(e.overall_total == len(data) and e.total == len(data) for e in events)
    downloaded = [e.downloaded for e in events if e.phase == "download"]
    assert downloaded == sorted(downloaded)
    assert any(e.speed > 0 and e.eta is not None for e in events)
    assert any(e.phase == "verify" for e in events)
    # HEAD on the Hub, then the bytes from the CDN host in one plain GET.
    assert [r["method"] for r in hub.requests if "/resolve/" in r["path"]] == ["HEAD"]
    gets = hub.gets(f"/cdn/{f.sha256}")
    assert len(gets) == 1 and gets[0]["range"] is None
    assert not list((tmp_path / "dl").glob("*.part*"))


def test_cancel_then_resume_in_a_new_process_uses_range(hub: FakeHub, tmp_path: Path) -> None:
    # huggingface_hub hands over 10 MiB chunks, so progress and cancel act at that granularity.
    data = _payload(24 * MB, seed=1)
    hf = hub.add(REPO, "big.gguf", data)
    dest = tmp_path / "dl"
    from app.models.download_progress import CancelToken

    token = CancelToken()

    def on_progress(p: Progress) -> None:
        if p.downloaded >= 10 * MB:
            token.cancel()

    with pytest.raises(DownloadCancelled):
        download_model(REPO, "big.gguf", dest, endpoint=hub.base, progress=on_progress, cancel=token)
    part = dest / "big.gguf.part"
    kept = part.stat().st_size
    assert 10 * MB <= kept < len(data)
    assert json.loads((dest / "big.gguf.part.json").read_text())["etag"] == hf.sha256
    assert not (dest / "big.gguf").exists()

    # An app restart: a fresh interpreter picks the partial file up and asks only for the rest.
    code = (
        "import sys, json; from pathlib import Path; from app.models.download import download_model; "
        f"r = download_model({REPO!r}, 'big.gguf', Path({str(dest)!r}), endpoint={hub.base!r}); "
        "f = r.files[0]; print(json.dumps([str(r.path), f.sha256, f.verified, f.resumed_from]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    path, sha, verified, resumed_from = json.loads(out.stdout.strip().splitlines()[-1])
    assert resumed_from == kept
    assert sha == hf.sha256 and verified
    assert Path(path).read_bytes() == data
    assert hub.gets(f"/cdn/{hf.sha256}")[-1]["range"] == f"bytes={kept}-"
    assert not part.exists()


def test_dropped_connection_is_resumed_with_range(hub: FakeHub, tmp_path: Path) -> None:
    data = _payload(12 * MB, seed=2)
    hf = hub.add(REPO, "drop.gguf", data)
    hub.drop_after["drop.gguf"] = 10 * MB + 123  # the server hangs up mid-body once
    res = download_model(REPO, "drop.gguf", tmp_path, endpoint=hub.base)
    assert res.files[0].verified and res.path.read_bytes() == data
    ranges = [r["range"] for r in hub.gets(f"/cdn/{hf.sha256}")]
    # huggingface_hub writes whole 10 MiB chunks, so it resumes from the last complete chunk on disk.
    assert ranges == [None, f"bytes={10 * MB}-"]


def test_corrupted_file_is_refused_and_deleted(hub: FakeHub, tmp_path: Path) -> None:
    data = _payload(MB, seed=3)
    bad = bytearray(data)
    bad[1000] ^= 0xFF
    hf = hub.add(REPO, "bad.gguf", data, served=bytes(bad))
    with pytest.raises(ChecksumMismatch) as e:
        download_model(REPO, "bad.gguf", tmp_path, endpoint=hub.base)
    assert hf.sha256 in str(e.value) and "deleted" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_catalog_hash_mismatch_is_refused(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(REPO, "x.gguf", _payload(100_000, seed=4))
    with pytest.raises(ChecksumMismatch, match="from catalog"):
        download_model(REPO, "x.gguf", tmp_path, endpoint=hub.base, expected_sha256={"x.gguf": "0" * 64})
    assert not (tmp_path / "x.gguf").exists() and not (tmp_path / "x.gguf.part").exists()


def test_not_enough_space_is_refused_before_any_byte(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(REPO, "m-00001-of-00002.gguf", _payload(MB, seed=5))
    hub.add(REPO, "m-00002-of-00002.gguf", _payload(MB, seed=6))
    dest = tmp_path / "models"
    asked: list[Path] = []

    def disk_free(p: Path) -> int:
        asked.append(p)
        return 1_500_000  # room for one shard, not two (and no reserve)

    with pytest.raises(NotEnoughSpace, match="nothing was written"):
        download_model(REPO, "m-00001-of-00002.gguf", dest, endpoint=hub.base, disk_free=disk_free, reserve=0)
    assert asked == [dest]
    assert not dest.exists()
    assert not [r for r in hub.requests if r["path"].startswith("/cdn/") and r["method"] == "GET"]


def test_split_shards_all_downloaded_first_returned(hub: FakeHub, tmp_path: Path) -> None:
    shards = {f"sub/q-0000{i}-of-00003.gguf": _payload(200_000 + i, seed=10 + i) for i in (1, 2, 3)}
    for name, data in shards.items():
        hub.add(REPO, name, data)
    events: list[Progress] = []
    res = download_model(REPO, "sub/q-00002-of-00003.gguf", tmp_path, endpoint=hub.base, progress=events.append)
    assert res.path == tmp_path / "sub" / "q-00001-of-00003.gguf"
    assert [f.path.name for f in res.files] == [n.split("/")[1] for n in shards]
    assert all(f.verified for f in res.files)
    for name, data in shards.items():
        assert (tmp_path / name).read_bytes() == data
    assert events[-1].overall_downloaded == sum(map(len, shards.values())) == events[-1].overall_total
    # A second pull finds everything in place and transfers nothing.
    before = len(hub.gets(".gguf")) + len([r for r in hub.requests if r["path"].startswith("/cdn/")])
    again = download_model(REPO, "sub/q-00001-of-00003.gguf", tmp_path, endpoint=hub.base)
    assert all(f.skipped and f.verified for f in again.files)
    assert len([r for r in hub.requests if r["path"].startswith("/cdn/")]) + len(hub.gets(".gguf")) == before


def test_gated_repo_needs_hf_token(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf = hub.add("gated/model", "g.gguf", _payload(50_000, seed=7))
    hub.gated.add("gated/model")
    with pytest.raises(DownloadError, match="HF_TOKEN"):
        download_model("gated/model", "g.gguf", tmp_path, endpoint=hub.base)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    res = download_model("gated/model", "g.gguf", tmp_path, endpoint=hub.base)
    assert res.files[0].verified
    head = [r for r in hub.requests if r["method"] == "HEAD"][-1]
    assert head["authorization"] == f"Bearer {TOKEN}"
    assert hub.gets(f"/cdn/{hf.sha256}")[-1]["authorization"] is None  # the token never goes to the CDN host


def test_offline_mode(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add(REPO, "o.gguf", _payload(10_000, seed=8))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOffline, match="HF_HUB_OFFLINE"):
        download_model(REPO, "o.gguf", tmp_path, endpoint=hub.base)
    assert hub.requests == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    download_model(REPO, "o.gguf", tmp_path, endpoint=hub.base)
    n = len(hub.requests)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = download_model(REPO, "o.gguf", tmp_path, endpoint=hub.base)
    assert res.files[0].skipped and len(hub.requests) == n


def test_unreachable_hub_says_so(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(HubOffline, match="cannot reach"):
        download_model(REPO, "x.gguf", tmp_path, endpoint=f"http://127.0.0.1:{port}")


def test_missing_file_and_repo(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(REPO, "a.gguf", b"GGUF")
    with pytest.raises(DownloadError, match="not found"):
        download_model(REPO, "nope.gguf", tmp_path, endpoint=hub.base)
    with pytest.raises(DownloadError, match="repository not found"):
        download_model("org/nothing", "a.gguf", tmp_path, endpoint=hub.base)


def test_file_without_sha256_is_kept_but_marked_unverified(hub: FakeHub, tmp_path: Path) -> None:
    hub.add(REPO, "small.gguf", _payload(5000, seed=9), lfs=False)  # plain git file: ETag is a blob id
    res = download_model(REPO, "small.gguf", tmp_path, endpoint=hub.base)
    f = res.files[0]
    assert not f.verified and "could not be verified" in f.verify_note
    assert res.path.is_file()
