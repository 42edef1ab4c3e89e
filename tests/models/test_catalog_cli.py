"""Catalog data, pull specs, Hub search, runtime info and the `pull` / `models` CLI runners."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.models.catalog import CatalogError, load_catalog, parse_pull_spec, resolve_tag
from app.models.cli import add_models_arguments, add_pull_arguments, run_models, run_pull
from app.models.download_errors import HubOffline
from app.models.hub import search_hub
from app.paths import get_paths
from tests.models.models_testlib import FakeHub, write_gguf


def _models(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_models_arguments(p)
    return p.parse_args(argv)


def _pull(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_pull_arguments(p)
    return p.parse_args(argv)


def test_bundled_catalog_is_honest() -> None:
    cat = load_catalog(include_user=False)
    builds = cat.builds
    assert len(builds) == sum(len(f.builds) for f in cat.families.values())  # ids are unique
    for b in builds.values():
        assert b.files, b.id  # every shipped build can be pulled by its id
        if b.verified:
            assert b.sha256 and b.size, b.id
        else:
            assert b.sha256 is None and b.note, b.id  # nothing unchecked is presented as a fact
        draft = cat.draft_for(b)
        if draft is not None and draft.kind == "model":
            assert draft.build in builds
    strix = builds["qwen3.6-35b-a3b-rocmfp4-strix"]
    assert strix.needs_fork and cat.fallback_for(strix.family) == builds["qwen3.6-35b-a3b-iq3_s"]
    assert cat.draft_for(strix).kind == "mtp"  # type: ignore[union-attr]
    assert cat.find("qwen2.5-coder-1.5b") == builds["qwen2.5-coder-1.5b-q4_k_m"]


def test_pull_specs() -> None:
    cat = load_catalog(include_user=False)
    s = parse_pull_spec("smollm2-135m", cat)
    assert s.build is not None and s.build.packaged == "smollm2-135m"
    s = parse_pull_spec("org/repo:sub/model-00001-of-00002.gguf", cat)
    assert (s.repo, s.filename, s.revision) == ("org/repo", "sub/model-00001-of-00002.gguf", "main")
    s = parse_pull_spec("org/repo@v2:m.gguf", cat)
    assert (s.repo, s.filename, s.revision) == ("org/repo", "m.gguf", "v2")
    s = parse_pull_spec("org/repo:Q4_K_M", cat)
    assert s.filename is None and s.tag == "Q4_K_M"
    for bad in ("nonsense", "notarepo:x.gguf", "org/repo:"):
        with pytest.raises(CatalogError):
            parse_pull_spec(bad, cat)
    files = [
        "README.md",
        "mmproj-Q4_K_M.gguf",
        "m-Q4_K_M-00002-of-00002.gguf",
        "m-Q4_K_M-00001-of-00002.gguf",
        "m-Q8_0.gguf",
    ]
    assert resolve_tag("Q4_K_M", files) == "m-Q4_K_M-00001-of-00002.gguf"
    assert resolve_tag("q8_0", files) == "m-Q8_0.gguf"
    with pytest.raises(CatalogError):
        resolve_tag("IQ2_XXS", files)


def test_user_catalog_entries_are_merged() -> None:
    cfg = get_paths().config
    cfg.mkdir(parents=True)
    (cfg / "catalog.json").write_text(
        json.dumps(
            {
                "schema": 1,
                "families": [
                    {
                        "id": "mine",
                        "name": "Mine",
                        "builds": [
                            {
                                "id": "mine-q8",
                                "format": "Q8_0",
                                "repo": "me/mine",
                                "files": ["mine.gguf"],
                                "sha256": None,
                                "verified": True,
                            }
                        ],
                    }
                ],
            }
        )
    )
    cat = load_catalog()
    assert "mine" in cat.families and "smollm2-135m" in cat.families
    assert cat.builds["mine-q8"].verified is False  # "verified" without a hash is not believed


def test_pull_cli_real_gguf_from_hub(hub: FakeHub, smollm2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hub.add("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", "smollm2-135m-instruct-q4_1.gguf", smollm2.read_bytes())
    rc = run_pull(_pull(["HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_1", "--endpoint", hub.base, "--json"]))
    out = capsys.readouterr()
    assert rc == 0, out.err
    res = json.loads(out.out)
    assert res["path"] == str(
        get_paths().models / "HuggingFaceTB" / "SmolLM2-135M-Instruct-GGUF" / "smollm2-135m-instruct-q4_1.gguf"
    )
    assert res["verified"] and res["format"] == "Q4_1" and res["compatibility"]["status"] == "loads"
    assert res["files"][0]["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

    rc = run_models(_models(["--json"]))
    listed = json.loads(capsys.readouterr().out)
    assert rc == 0 and [m["format"] for m in listed] == ["Q4_1"]
    assert listed[0]["sha256"] == res["files"][0]["sha256"] and listed[0]["parameters"] == 134_515_008


def test_pull_cli_progress_bar_and_errors(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    hub.add("org/r", "tiny.gguf", b"GGUF" + b"\0" * 100)
    assert run_pull(_pull(["org/r:tiny.gguf", "--endpoint", hub.base])) == 0
    out = capsys.readouterr()
    assert "[1/1] tiny.gguf" in out.err and "100.0%" in out.err and "model path:" in out.out
    assert "not a readable GGUF" in out.err  # a truncated GGUF is reported, not crashed on
    assert run_pull(_pull(["org/r:missing.gguf", "--endpoint", hub.base])) == 1
    assert "not found" in capsys.readouterr().err
    assert run_pull(_pull(["no-such-id"])) == 2


def test_a_catalog_build_without_files_is_refused_with_the_way_out() -> None:
    family = {"id": "x", "name": "X", "builds": [{"id": "x-q4", "format": "Q4_0", "repo": "me/x", "files": []}]}
    path = get_paths().config / "bad-catalog.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": 1, "families": [family]}))
    with pytest.raises(CatalogError, match="x-q4: lists no files .*REPO:FILE"):
        load_catalog(path, include_user=False)


def test_models_cli_inspect_fork_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_gguf(tmp_path / "f.gguf", file_type=110, tensor_types={"a.weight": 102, "b.weight": 0})
    assert run_models(_models(["--inspect", str(path), "--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "ROCmFPx_Q6_0"
    assert data["compatibility"]["status"] == "needs-fork" and not data["compatibility"]["loads"]
    assert {q["name"] for q in data["quant_mix"]} == {"Q6_0_ROCMFPX", "F32"}
    assert run_models(_models(["--inspect", str(path)])) == 0
    text = capsys.readouterr().out
    assert "needs the fork runtime (ROCmFPx)" in text and "Q6_0_ROCMFPX" in text and "F16" not in text
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope")
    assert run_models(_models(["--inspect", str(bad)])) == 1


def test_models_cli_listing_catalog_runtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_models(_models([])) == 0
    assert "no local models" in capsys.readouterr().out
    models = get_paths().models
    models.mkdir(parents=True)
    write_gguf(models / "fork.gguf", file_type=103, tensor_types={"a.weight": 101})
    (models / "junk.gguf").write_bytes(b"junk")
    (models / "half.gguf.part").write_bytes(b"GGUF")
    assert run_models(_models([])) == 0
    out = capsys.readouterr().out
    assert "ROCmFP4_FAST" in out and "needs the fork runtime" in out and "unreadable" in out and ".part" not in out
    assert run_models(_models(["--catalog", "--json"])) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rows} >= {"smollm2-135m-q4_1", "qwen3.6-35b-a3b-iq3_s"}
    assert run_models(_models(["--runtime", "--json"])) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == "0.3.36" and any(d["type"] == "CPU" for d in info["devices"])
    assert all(d["memory_total"] > 0 for d in info["devices"])
    assert "IQ3_S" in info["loadable_types"].values()


def test_models_cli_pair(smollm2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_models(_models(["--pair", str(smollm2), str(smollm2)])) == 0
    assert capsys.readouterr().out.strip() == "compatible"


def test_hub_search(hub: FakeHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    hub.add("org/Qwen-GGUF", "a.gguf", b"x")
    hub.add("org/Other-GGUF", "b.gguf", b"y")
    hits = search_hub("qwen", endpoint=hub.base)
    assert [h.id for h in hits] == ["org/Qwen-GGUF"]
    search = [r for r in hub.requests if r["path"] == "/api/models"]
    assert search
    monkeypatch.setenv("HF_ENDPOINT", hub.base)  # the env var is honoured at call time too
    assert run_models(_models(["--search", "other"])) == 0
    assert "org/Other-GGUF" in capsys.readouterr().out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOffline, match="offline"):
        search_hub("qwen", endpoint=hub.base)
    assert run_models(_models(["--search", "qwen"])) == 1
    assert "offline mode" in capsys.readouterr().err


def test_pull_packaged_catalog_build(smollm2: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_pull(_pull(["smollm2-135m", "--json"])) == 0
    res = json.loads(capsys.readouterr().out)
    placed = get_paths().models / "packaged" / smollm2.name
    assert res["path"] == str(placed) and res["verified"] and placed.resolve().stat().st_size == 98_362_432
    assert res["compatibility"]["status"] == "loads"
