"""bench/gpu/shapegguf.py's qwen35moe shapes: a derived skeleton, synthesised, loads in llama.cpp with its MTP block."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.runtime.sampling import SamplingParams
from app.speculative.settings import SpecSettings
from bench.gpu import shapegguf as sg


def test_the_35b_shape_has_the_public_configs_layout() -> None:
    tensors = sg.qwen35moe_tensors(sg.QWEN35MOE_SHAPES["q36-35b-a3b"])
    names = {n for n, _, _ in tensors}
    assert sum(n.endswith("attn_qkv.weight") for n in names) == 30  # Gated DeltaNet blocks
    assert sum(n.endswith("attn_k.weight") for n in names) == 11  # 10 full attention + the NextN block
    assert "blk.40.nextn.eh_proj.weight" in names and "blk.41.attn_norm.weight" not in names
    dims = {n: d for n, d, _ in tensors}
    assert dims["blk.0.ffn_gate_exps.weight"] == (2048, 512, 256)
    assert dims["blk.3.attn_q.weight"] == (2048, 2 * 16 * 256)  # queries and their output gate
    assert dims["token_embd.weight"] == (2048, 248320)
    # all parameters at bf16 would be ~70 GB (the published BF16 GGUF with its MTP block: 71.1 GB)
    n_params = sum(int(__import__("numpy").prod(d)) for _, d, _ in tensors)
    assert 34.5e9 < n_params < 36.5e9


def test_a_derived_micro_shape_loads_and_drafts_with_its_mtp_block(
    tmp_path: Path, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    micro = dict(sg.QWEN35MOE_SHAPES["q36-tiny"], n_layer=4, n_expert=4, n_expert_used=2, n_vocab=49152)
    monkeypatch.setitem(sg.QWEN35MOE_SHAPES, "micro", micro)
    skel, model = tmp_path / "micro.skel", tmp_path / "micro.gguf"
    size = sg.derive_qwen35moe("micro", "Q4_K", str(skel), str(smollm2_path))
    assert sg.synth(str(skel), str(model)) == size == model.stat().st_size
    s = Session(EngineConfig(model=str(model), n_ctx=256, n_batch=64, n_threads=1, dynamic_draft=False))
    try:
        assert s.model.n_layer_nextn == 1 and s.model.meta("general.architecture") == "qwen35moe"
        req = GenerationRequest(
            prompt="hello", max_tokens=8, sampling=SamplingParams(temperature=0.0), speculative=SpecSettings("mtp", 2)
        )
        done = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
        assert done.timings.draft_n > 0  # the MTP head drafted (synthetic weights: acceptance means nothing)
    finally:
        s.close()
