"""GGUF inspection without loading: real SmolLM2 and IQ3_S builds, fork type ids, unknown ids, corrupt files."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.models.catalog import load_catalog
from app.models.compat import INCOMPLETE, LOADS, NEEDS_FORK, UNKNOWN_TYPES, check_loadable, check_pair
from app.models.gguf_reader import GGUFError, read_gguf
from app.models.inspection import inspect_gguf, shard_names
from app.models.quant_types import FORK, MAINLINE, UNKNOWN, runtime_type_names
from tests.models.models_testlib import write_gguf

STRIX_NAME = "Qwen3.6-35B-A3B-MTP-ROCmFP4-STRIX-embF16-headQ6.gguf"  # a catalog file name, to find the family


def test_reader_agrees_with_gguf_package(smollm2: Path) -> None:
    from gguf import GGUFReader

    ours = read_gguf(smollm2)
    theirs = GGUFReader(str(smollm2))
    assert [(t.name, t.type_id, t.offset) for t in ours.tensors] == [
        (t.name, int(t.tensor_type), int(t.data_offset) - ours.data_offset) for t in theirs.tensors
    ]
    assert [t.n_elements for t in ours.tensors] == [int(t.n_elements) for t in theirs.tensors]
    assert set(ours.metadata) == {k for k in theirs.fields if not k.startswith("GGUF.")}
    assert ours.get("general.architecture") == "llama"
    assert ours.get("tokenizer.ggml.tokens")[:3] == [
        bytes(theirs.fields["tokenizer.ggml.tokens"].parts[i]).decode()
        for i in theirs.fields["tokenizer.ggml.tokens"].data[:3]
    ]


def test_smollm2_report(smollm2: Path) -> None:
    r = inspect_gguf(smollm2)
    assert (r.architecture, r.context_length, r.chat_template, r.format) == ("llama", 8192, True, "Q4_1")
    assert r.parameter_count == 134_515_008
    assert {q.name for q in r.quant_mix} == {"Q4_1", "Q8_0", "F32"}
    assert sum(q.nbytes for q in r.quant_mix) == r.file_size - read_gguf(smollm2, max_array=0).data_offset
    assert r.tokenizer.vocab_size == 49152 and r.tokenizer.model == "gpt2"
    assert check_loadable(r).status == LOADS


def test_iq3s_build_is_reported_as_iq3s_and_loads(smollm2_iq3s: Path) -> None:
    import llama_cpp

    r = inspect_gguf(smollm2_iq3s)
    assert r.format == "IQ3_S" and r.file_type == llama_cpp.LLAMA_FTYPE_MOSTLY_IQ3_S
    names = {q.name for q in r.quant_mix}
    assert "IQ3_S" in names  # rows of 576 columns fall back to other types; the 1536-wide ones are IQ3_S
    assert all(q.origin == MAINLINE for q in r.quant_mix)
    compat = check_loadable(r, load_catalog())
    assert compat.status == LOADS and compat.loads
    llm = llama_cpp.Llama(str(smollm2_iq3s), n_ctx=64, n_threads=2, verbose=False)
    try:
        assert llm.n_vocab() == r.tokenizer.vocab_size
        assert len(llm.tokenize(b"hello world")) > 0
    finally:
        llm.close()


def test_rocmfpx_file_needs_fork_and_never_crashes(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / STRIX_NAME,
        file_type=105,  # LLAMA_FTYPE_MOSTLY_Q4_0_ROCMFP4_STRIX in the fork
        tensor_types={
            "token_embd.weight": 1,
            "blk.0.attn_q.weight": 100,
            "blk.0.ffn_down.weight": 101,
            "blk.0.ffn_up.weight": 102,
            "output.weight": 14,
        },
    )
    from gguf import GGUFReader

    with pytest.raises((ValueError, KeyError)):
        GGUFReader(str(path))  # mainline's reader can't even open it, which is why we have our own

    r = inspect_gguf(path)
    by_id = {q.type_id: q for q in r.quant_mix}
    assert by_id[100].name == "Q4_0_ROCMFP4" and by_id[100].origin == FORK and by_id[100].fork == "ROCmFPx"
    assert by_id[101].name == "Q4_0_ROCMFP4_FAST"
    assert by_id[102].name == "Q6_0_ROCMFPX"
    assert by_id[1].name == "F16" and by_id[14].name == "Q6_K"  # mainline ids inside a fork file stay mainline
    assert r.format == "ROCmFP4_STRIX" and r.file_type_name == "ROCmFP4_STRIX"
    assert r.parameter_count == 5 * 4 * 32 and r.chat_template and r.context_length == 2048

    compat = check_loadable(r, load_catalog())
    assert compat.status == NEEDS_FORK and not compat.loads
    assert compat.message.startswith("needs the fork runtime (ROCmFPx)")
    assert compat.alternative is not None and compat.alternative.format == "IQ3_S"
    assert compat.alternative.id == "qwen3.6-35b-a3b-iq3_s" and "IQ3_S" in compat.message
    assert any("Q4_0_ROCMFP4 (type id 100)" in reason for reason in compat.reasons)


def test_unknown_fork_type_is_not_guessed(tmp_path: Path) -> None:
    # 47 was a ROCmFP4 id in another fork; with a mainline file type (Q4_K_M) there is no table to name it from.
    path = write_gguf(
        tmp_path / "other-fork.gguf", file_type=15, tensor_types={"a.weight": 0, "b.weight": 47, "c.weight": 100}
    )
    r = inspect_gguf(path)
    by_id = {q.type_id: q for q in r.quant_mix}
    assert by_id[47].name == "unknown fork type 47" and by_id[47].origin == UNKNOWN
    assert by_id[100].name == "unknown fork type 100"  # a ROCmFPx id, but this file isn't a ROCmFPx recipe
    compat = check_loadable(r, load_catalog())
    assert compat.status == UNKNOWN_TYPES
    assert "unknown fork type 47" in compat.message and "no IQ3_S build" in compat.message
    assert 47 not in runtime_type_names() and 21 in runtime_type_names()


def test_no_file_type_names_format_after_dominant_type(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "plain.gguf", file_type=None, tensor_types={"a.weight": 0, "b.weight": 0})
    r = inspect_gguf(path)
    assert r.file_type is None and r.format == "F32"


@pytest.mark.parametrize("cut", [3, 10, 30, 200, 600])
def test_truncated_files_raise_ggufError(tmp_path: Path, cut: int) -> None:
    full = write_gguf(tmp_path / "full.gguf", file_type=105, tensor_types={"a.weight": 100, "b.weight": 47})
    bad = tmp_path / "cut.gguf"
    bad.write_bytes(full.read_bytes()[:cut])
    with pytest.raises(GGUFError):
        inspect_gguf(bad)


def test_not_gguf_and_bad_versions(tmp_path: Path) -> None:
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04" + b"\0" * 64)
    with pytest.raises(GGUFError, match="not a GGUF"):
        read_gguf(p)
    p.write_bytes(b"GGUF" + (1).to_bytes(4, "little") + b"\0" * 64)
    with pytest.raises(GGUFError, match="v1"):
        read_gguf(p)
    p.write_bytes(b"GGUF" + (3 << 24).to_bytes(4, "little") + b"\0" * 64)
    with pytest.raises(GGUFError, match="big-endian"):
        read_gguf(p)
    p.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (2**60).to_bytes(8, "little") + b"\0" * 16)
    with pytest.raises(GGUFError, match="implausible"):
        read_gguf(p)


def test_split_model_inspection(tmp_path: Path) -> None:
    types = {"a.weight": 0, "b.weight": 0}
    write_gguf(tmp_path / "m-00001-of-00002.gguf", file_type=0, tensor_types=types)
    write_gguf(tmp_path / "m-00002-of-00002.gguf", file_type=0, tensor_types=types)
    r = inspect_gguf(tmp_path / "m-00002-of-00002.gguf")
    assert r.path.endswith("m-00001-of-00002.gguf") and r.split_count == 2
    assert r.parameter_count == 4 * 4 * 32 and check_loadable(r).status == LOADS
    (tmp_path / "m-00002-of-00002.gguf").unlink()
    r2 = inspect_gguf(tmp_path / "m-00001-of-00002.gguf")
    assert r2.missing_shards == ["m-00002-of-00002.gguf"] and check_loadable(r2).status == INCOMPLETE
    assert shard_names("d/x-00003-of-00003.gguf") == [f"d/x-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    assert shard_names("single.gguf") == ["single.gguf"]


def test_vocab_pairing_real_models(smollm2: Path) -> None:
    from app.models.packaged import ensure_model

    target, draft = ensure_model("qwen2.5-coder-1.5b"), ensure_model("qwen2.5-coder-0.5b")
    ok = check_pair(draft, target)
    assert ok.compatible and ok.reasons == [] and ok.draft_vocab == ok.target_vocab == 151936
    bad = check_pair(smollm2, target)
    assert not bad.compatible
    text = "\n".join(bad.reasons)
    assert "bos token id differs" in text and "vocab sizes differ by 102784" in text and "token 5 differs" in text


def test_vocab_pairing_small_differences(tmp_path: Path) -> None:
    base = [f"t{i}" for i in range(300)]
    t = write_gguf(tmp_path / "t.gguf", file_type=0, tensor_types={"a": 0}, vocab=base)
    near = write_gguf(tmp_path / "near.gguf", file_type=0, tensor_types={"a": 0}, vocab=base[:200])
    assert check_pair(near, t).compatible  # 100 fewer tokens is within llama.cpp's 128
    far = write_gguf(tmp_path / "far.gguf", file_type=0, tensor_types={"a": 0}, vocab=base[:100])
    assert "differ by 200" in check_pair(far, t).reasons[0]
    changed = base.copy()
    changed[7] = "other"
    diff = write_gguf(tmp_path / "diff.gguf", file_type=0, tensor_types={"a": 0}, vocab=changed)
    assert check_pair(diff, t).reasons == ["token 7 differs: draft 'other', target 't7'"]
