"""Shape-equivalent GGUF models: the real file's metadata and tensor layout, synthetic weights (valid for speed only).

A real GGUF is too large to send to the GPU machine (64 MiB per run), but everything that decides its speed (the
architecture metadata, every tensor's shape and quantisation type, the tokenizer) sits in the first few MB: the
header, key/values and tensor infos. `skeleton` cuts that prefix off a real file (or derives a larger model's from
it); `synth` writes the full file on the other side with the same layout and synthetic quantised blocks (random
quants, small valid f16 scales), so no re-quantisation is needed and the per-tensor types are exactly the real ones.

  python bench/gpu/shapegguf.py skeleton REAL.gguf OUT.skel
  python bench/gpu/shapegguf.py derive 7b|14b|32b REAL_1.5B.gguf OUT.skel   # Qwen2.5 shapes (needs gguf-py)
  python bench/gpu/shapegguf.py reference REF.gguf TOKENIZER.gguf   # Q4_K_M types for qwen35moe (llama.cpp quantizer)
  python bench/gpu/shapegguf.py derive q36-35b-a3b|q36-tiny REF.gguf OUT.skel   # Qwen3.6-35B-A3B shape + MTP
  python bench/gpu/shapegguf.py synth OUT.skel MODEL.gguf

Only the standard library and numpy are used by `skeleton` and `synth` (the GPU machine has no gguf package).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

# ggml type id -> (name, bytes per block, elements per block, byte offsets of f16 scale fields in a block)
GGML_TYPES = {
    0: ("F32", 4, 1, ()),
    1: ("F16", 2, 1, ()),
    2: ("Q4_0", 18, 32, (0,)),
    3: ("Q4_1", 20, 32, (0, 2)),
    6: ("Q5_0", 22, 32, (0,)),
    7: ("Q5_1", 24, 32, (0, 2)),
    8: ("Q8_0", 34, 32, (0,)),
    10: ("Q2_K", 84, 256, (80, 82)),
    11: ("Q3_K", 110, 256, (108,)),
    12: ("Q4_K", 144, 256, (0, 2)),
    13: ("Q5_K", 176, 256, (0, 2)),
    14: ("Q6_K", 210, 256, (208,)),
    30: ("BF16", 2, 1, ()),
}
# K-quant block bytes that make a block's weights zero-mean and small: with random sub-block scales and mins (and
# the 0.002 super-block scales above) every weight had the same sign bias, activations grew through the layers and
# past ~1k tokens of context every logit came out equal (greedy then picks token 0, which the MTP head "predicts").
# Q4_K/Q5_K: sub-scales and mins all 1 (6-bit packed), dmin = d x the quant midpoint, so w = d (q - mid);
# Q6_K: the int8 sub-scales 1 (its quants are already centred: w = d scale (q - 32)).
_K_SUBSCALES = bytes([1] * 8 + [0x11] * 4)
_K_FIXUPS: dict[int, tuple[tuple[int, bytes], ...]] = {
    12: ((2, np.float16(0.002 * 7.5).tobytes()), (4, _K_SUBSCALES)),
    13: ((2, np.float16(0.002 * 15.5).tobytes()), (4, _K_SUBSCALES)),
    14: ((192, bytes([1] * 16)),),
}
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class _R:
    def __init__(self, buf: bytes) -> None:
        self.b, self.p = buf, 0

    def take(self, fmt: str):  # type: ignore[no-untyped-def]
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("<Q")
        s = self.b[self.p : self.p + n].decode("utf-8", "replace")
        self.p += n
        return s

    def value(self, t: int):  # type: ignore[no-untyped-def]
        if t == 8:
            return self.string()
        if t == 9:
            it, n = self.take("<I"), self.take("<Q")
            if it in _SCALAR and n > 64:  # skip big scalar arrays without decoding
                self.p += n * struct.calcsize(_SCALAR[it])
                return f"<array {n}>"
            return [self.value(it) for _ in range(n)]
        return self.take(_SCALAR[t])


def parse(buf: bytes) -> dict:
    """Header, small key/values, tensor infos and the data offset of a GGUF (prefix) in `buf`."""
    r = _R(buf)
    assert buf[:4] == b"GGUF", "not a GGUF file"
    r.p = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        tensors.append({"name": name, "dims": dims, "type": r.take("<I"), "offset": r.take("<Q")})
    align = int(kv.get("general.alignment", 32))
    data_offset = (r.p + align - 1) // align * align
    return {"version": version, "kv": kv, "tensors": tensors, "alignment": align, "data_offset": data_offset}


def nbytes(t: dict) -> int:
    _, bs, be, _ = GGML_TYPES[t["type"]]
    n = int(np.prod(t["dims"]))
    assert n % be == 0, (t["name"], t["dims"])
    return n // be * bs


def skeleton(real: str, out: str) -> None:
    with open(real, "rb") as f:
        head = f.read(64 << 20)
    info = parse(head)
    with open(out, "wb") as f:
        f.write(head[: info["data_offset"]])
    total = info["data_offset"] + max(t["offset"] + nbytes(t) for t in info["tensors"])
    print(f"{out}: {info['data_offset']} bytes of header for {len(info['tensors'])} tensors; full size {total}")


def synth(skel: str, out: str, seed: int = 0) -> int:
    """Write MODEL.gguf: the skeleton, then synthetic data for every tensor at its recorded offset."""
    head = Path(skel).read_bytes()
    info = parse(head)
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 256, size=32 << 20, dtype=np.uint8)  # random quants, re-used (speed is what matters)
    small = np.frombuffer(np.float16(0.002).tobytes(), dtype=np.uint8)
    f32 = (rng.standard_normal(1 << 20) * 0.02).astype(np.float32)
    with open(out, "wb") as f:
        f.write(head)
        base = info["data_offset"]
        for t in sorted(info["tensors"], key=lambda t: t["offset"]):
            f.seek(base + t["offset"])
            name, bs, be, scales = GGML_TYPES[t["type"]]
            n = nbytes(t)
            if name == "F32":
                count = n // 4
                if t["name"].endswith("norm.weight"):
                    arr = np.ones(count, np.float32)
                elif t["name"].endswith("ssm_a"):  # the Gated DeltaNet's decay exp(softplus(.) * a) must be < 1
                    arr = -np.ones(count, np.float32)
                elif t["name"].endswith(".bias"):
                    arr = np.zeros(count, np.float32)
                else:
                    arr = np.resize(f32, count)
                f.write(arr.tobytes())
                continue
            if name in ("F16", "BF16"):
                f.write(np.resize(f32, n // 2).astype(np.float16).tobytes())
                continue
            nblk = n // bs
            per_chunk = max(1, (len(pool) // bs))
            tmpl = pool[: per_chunk * bs].reshape(per_chunk, bs).copy()
            for off in scales:
                tmpl[:, off : off + 2] = small
            for off, raw in _K_FIXUPS.get(t["type"], ()):
                tmpl[:, off : off + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            done = 0
            while done < nblk:
                k = min(per_chunk, nblk - done)
                f.write(tmpl[:k].tobytes())
                done += k
        size = f.tell()
    print(f"{out}: {size} bytes")
    return size


# Qwen2.5 dense shapes (config.json of each size): hidden, layers, attention heads, KV heads, FFN width.
# All share the 0.5B/1.5B tokenizer, so the real 0.5B stays a valid draft for every one of them.
QWEN25_SHAPES = {
    "7b": (3584, 28, 28, 4, 18944),
    "14b": (5120, 48, 40, 8, 13824),
    "32b": (5120, 64, 40, 8, 27648),
}


def derive(size: str, real_15b: str, out: str) -> None:
    """A Qwen2.5-SIZE-shaped skeleton from the 1.5B's header: that size's dimensions, the 1.5B's tokenizer and
    metadata, and the 1.5B Q4_K_M's per-tensor quantisation types (layer i takes the types of the 1.5B layer at the
    same relative depth, so Q6_K lands on the same share of attn_v/ffn_down as in a real Q4_K_M)."""
    import gguf  # gguf-py, here only

    h, n_layer, n_head, n_kv, ff = QWEN25_SHAPES[size]
    r = gguf.GGUFReader(real_15b)
    arch = "qwen2"
    w = gguf.GGUFWriter(out, arch, use_temp_file=False)
    new = {
        f"{arch}.embedding_length": h,
        f"{arch}.feed_forward_length": ff,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_kv,
        f"{arch}.block_count": n_layer,
        "general.name": f"Qwen2.5-{size.upper()} shape-equivalent (synthetic weights)",
        "general.size_label": size.upper(),
    }
    _copy_kv(w, r, skip=(), override=new)
    kvd, vocab = n_kv * (h // n_head), 151936
    shapes = {
        "attn_q.weight": (h, h),
        "attn_q.bias": (h,),
        "attn_k.weight": (h, kvd),
        "attn_k.bias": (kvd,),
        "attn_v.weight": (h, kvd),
        "attn_v.bias": (kvd,),
        "attn_output.weight": (h, h),
        "ffn_gate.weight": (h, ff),
        "ffn_up.weight": (h, ff),
        "ffn_down.weight": (ff, h),
        "attn_norm.weight": (h,),
        "ffn_norm.weight": (h,),
    }
    types = {t.name: int(t.tensor_type) for t in r.tensors}
    real_layers = 1 + max(int(n.split(".")[1]) for n in types if n.startswith("blk."))
    tensors = [("token_embd.weight", (h, vocab), types["token_embd.weight"])]
    for i in range(n_layer):
        src = min(real_layers - 1, i * real_layers // n_layer)
        for role, shp in shapes.items():
            tensors.append((f"blk.{i}.{role}", shp, types[f"blk.{src}.{role}"]))
    tensors += [("output_norm.weight", (h,), 0), ("output.weight", (h, vocab), types["output.weight"])]
    info, total = _finish_skeleton(w, tensors, out)
    print(f"{out}: {len(info['tensors'])} tensors, full size {total}")


# Qwen3.6-35B-A3B as llama.cpp's qwen35moe reads it (src/models/qwen35moe.cpp): 40 trunk blocks, every 4th full
# attention (16 query heads with an output gate, 2 KV heads of 256, 64 rotary dims in IMRoPE sections 11/11/10), the
# rest Gated DeltaNet (16 QK heads, 32 V heads of 128, 4-tap conv); every block MoE with 256 routed experts (8 used)
# of width 512 plus one gated shared expert of 512; one NextN (MTP) block after the trunk, a full-attention MoE block
# with eh_proj/enorm/hnorm and shared_head_norm, sharing the trunk's embeddings and output head. Sources of each number:
# bench/results/2026-12-01-h200-mtp.md. "q36-tiny" has the same layout (41 blocks, same attention interval, MoE +
# shared expert, one NextN block) at widths a CPU runs in milliseconds, all multiples of 256 so K-quants apply.
QWEN35MOE_SHAPES: dict[str, dict[str, float | int | list[int]]] = {
    "q36-35b-a3b": {
        "n_embd": 2048, "n_layer": 40, "full_attention_interval": 4, "n_head": 16, "n_head_kv": 2, "head_dim": 256,
        "n_rot": 64, "rope_sections": [11, 11, 10, 0], "rope_freq_base": 10_000_000.0, "n_expert": 256,
        "n_expert_used": 8, "n_ff_exp": 512, "n_ff_shexp": 512, "ssm_conv": 4, "ssm_state": 128, "ssm_k_heads": 16,
        "ssm_v_heads": 32, "n_vocab": 248320, "n_ctx_train": 262144, "rms_eps": 1e-6,
    },
    "q36-tiny": {
        "n_embd": 256, "n_layer": 40, "full_attention_interval": 4, "n_head": 4, "n_head_kv": 1, "head_dim": 64,
        "n_rot": 16, "rope_sections": [3, 3, 2, 0], "rope_freq_base": 10_000_000.0, "n_expert": 16,
        "n_expert_used": 4, "n_ff_exp": 256, "n_ff_shexp": 256, "ssm_conv": 4, "ssm_state": 128, "ssm_k_heads": 1,
        "ssm_v_heads": 2, "n_vocab": 151936, "n_ctx_train": 262144, "rms_eps": 1e-6,
    },
}  # fmt: skip


def qwen35moe_tensors(shape: dict) -> list[tuple[str, tuple[int, ...], bool]]:  # type: ignore[type-arg]
    """(name, ggml dims (innermost first), quantisable) of every tensor llama.cpp's qwen35moe loader reads.

    Not quantisable: 1-D tensors and what convert_hf_to_gguf keeps in F32 (expert routers, the shared expert's
    gate, the DeltaNet convolution)."""
    h, v = int(shape["n_embd"]), int(shape["n_vocab"])
    hd, nh, nkv = int(shape["head_dim"]), int(shape["n_head"]), int(shape["n_head_kv"])
    ne, ff, fs = int(shape["n_expert"]), int(shape["n_ff_exp"]), int(shape["n_ff_shexp"])
    st, nk, nv = int(shape["ssm_state"]), int(shape["ssm_k_heads"]), int(shape["ssm_v_heads"])
    key_dim, value_dim = st * nk, st * nv
    conv_dim = 2 * key_dim + value_dim
    n_layer, interval = int(shape["n_layer"]), int(shape["full_attention_interval"])
    out: list[tuple[str, tuple[int, ...], bool]] = [("token_embd.weight", (h, v), True)]

    def attention(b: str) -> None:
        out.extend([
            (f"{b}.attn_q.weight", (h, 2 * nh * hd), True),  # queries and the per-head output gate
            (f"{b}.attn_k.weight", (h, nkv * hd), True),
            (f"{b}.attn_v.weight", (h, nkv * hd), True),
            (f"{b}.attn_output.weight", (nh * hd, h), True),
            (f"{b}.attn_q_norm.weight", (hd,), False),
            (f"{b}.attn_k_norm.weight", (hd,), False),
        ])  # fmt: skip

    def moe(b: str) -> None:
        out.extend([
            (f"{b}.ffn_gate_inp.weight", (h, ne), False),
            (f"{b}.ffn_gate_exps.weight", (h, ff, ne), True),
            (f"{b}.ffn_up_exps.weight", (h, ff, ne), True),
            (f"{b}.ffn_down_exps.weight", (ff, h, ne), True),
            (f"{b}.ffn_gate_inp_shexp.weight", (h,), False),
            (f"{b}.ffn_gate_shexp.weight", (h, fs), True),
            (f"{b}.ffn_up_shexp.weight", (h, fs), True),
            (f"{b}.ffn_down_shexp.weight", (fs, h), True),
        ])  # fmt: skip

    for i in range(n_layer + 1):
        b = f"blk.{i}"
        out += [(f"{b}.attn_norm.weight", (h,), False), (f"{b}.post_attention_norm.weight", (h,), False)]
        if i == n_layer:  # the NextN block
            attention(b)
            moe(b)
            out += [
                (f"{b}.nextn.eh_proj.weight", (2 * h, h), True),
                (f"{b}.nextn.enorm.weight", (h,), False),
                (f"{b}.nextn.hnorm.weight", (h,), False),
                (f"{b}.nextn.shared_head_norm.weight", (h,), False),
            ]
        elif (i + 1) % interval == 0:
            attention(b)
            moe(b)
        else:
            out += [
                (f"{b}.attn_qkv.weight", (h, conv_dim), True),
                (f"{b}.attn_gate.weight", (h, value_dim), True),
                (f"{b}.ssm_conv1d.weight", (int(shape["ssm_conv"]), conv_dim), False),
                (f"{b}.ssm_dt.bias", (nv,), False),
                (f"{b}.ssm_a", (nv,), False),
                (f"{b}.ssm_beta.weight", (h, nv), True),
                (f"{b}.ssm_alpha.weight", (h, nv), True),
                (f"{b}.ssm_norm.weight", (st,), False),
                (f"{b}.ssm_out.weight", (value_dim, h), True),
            ]
            moe(b)
    out += [("output_norm.weight", (h,), False), ("output.weight", (h, v), True)]
    return out


def _copy_kv(w, r, skip: tuple[str, ...], pad_vocab: int = 0, override: dict | None = None) -> None:  # type: ignore[no-untyped-def,type-arg]
    """Copy the GGUFReader `r`'s key/values into the writer `w`, except GGUF.*, general.architecture and keys
    starting with one of `skip`; `override` replaces scalar values by key; the token list is padded to `pad_vocab`
    with unused tokens."""
    import gguf

    override = override or {}
    for key, field in r.fields.items():
        if key.startswith(("GGUF.", "general.architecture", *skip)):
            continue
        vtype = field.types[0]
        if key in override:
            w.add_key_value(key, override[key], vtype)
        elif vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
            else:
                val = [field.parts[i][0].item() for i in field.data]
            if key == "tokenizer.ggml.tokens" and pad_vocab > len(val):
                val += [f"[PAD{i}]" for i in range(len(val), pad_vocab)]  # as convert_hf_to_gguf pads a vocab
            elif key == "tokenizer.ggml.token_type" and pad_vocab > len(val):
                val += [int(gguf.TokenType.UNUSED)] * (pad_vocab - len(val))
            w.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8", "replace"), vtype)
        else:
            w.add_key_value(key, field.parts[field.data[0]][0].item(), vtype)


def _qwen35moe_writer(out: str, name: str, tokenizer_src: str):  # type: ignore[no-untyped-def]
    """A GGUFWriter for the qwen35moe shape `name` with its hyperparameters and `tokenizer_src`'s tokenizer."""
    import gguf

    s = QWEN35MOE_SHAPES[name]
    r = gguf.GGUFReader(tokenizer_src)
    w = gguf.GGUFWriter(out, "qwen35moe", use_temp_file=False)
    src_arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    _copy_kv(w, r, skip=("general.name", f"{src_arch}."), pad_vocab=int(s["n_vocab"]))
    w.add_name(f"Qwen3.6-35B-A3B shape-equivalent ({name}, synthetic weights)")
    w.add_context_length(int(s["n_ctx_train"]))
    w.add_embedding_length(int(s["n_embd"]))
    w.add_block_count(int(s["n_layer"]) + 1)  # the trunk and the NextN block
    w.add_nextn_predict_layers(1)
    w.add_head_count(int(s["n_head"]))
    w.add_head_count_kv(int(s["n_head_kv"]))
    w.add_key_length(int(s["head_dim"]))
    w.add_value_length(int(s["head_dim"]))
    w.add_rope_dimension_count(int(s["n_rot"]))
    w.add_rope_dimension_sections(list(s["rope_sections"]))  # type: ignore[arg-type]
    w.add_rope_freq_base(float(s["rope_freq_base"]))
    w.add_layer_norm_rms_eps(float(s["rms_eps"]))
    w.add_expert_count(int(s["n_expert"]))
    w.add_expert_used_count(int(s["n_expert_used"]))
    w.add_expert_feed_forward_length(int(s["n_ff_exp"]))
    w.add_expert_shared_feed_forward_length(int(s["n_ff_shexp"]))
    w.add_ssm_conv_kernel(int(s["ssm_conv"]))
    w.add_ssm_state_size(int(s["ssm_state"]))
    w.add_ssm_group_count(int(s["ssm_k_heads"]))
    w.add_ssm_time_step_rank(int(s["ssm_v_heads"]))
    w.add_ssm_inner_size(int(s["ssm_state"]) * int(s["ssm_v_heads"]))
    w.add_full_attention_interval(int(s["full_attention_interval"]))
    return w


def reference(out: str, tokenizer_src: str, threads: int = 1) -> None:
    """A Q4_K_M reference file of the q36-tiny shape, quantised by llama.cpp's own quantizer from random F16
    weights: the per-tensor types llama.cpp gives qwen35moe at Q4_K_M (same block layout, n_expert >= 4 and not 8,
    GQA >= 4, every row width a multiple of 256, so every rule that picks a type sees what it sees for the 35B)."""
    import llama_cpp

    f16 = out + ".f16.gguf"
    w = _qwen35moe_writer(f16, "q36-tiny", tokenizer_src)
    rng = np.random.default_rng(0)
    for name, dims, quant in qwen35moe_tensors(QWEN35MOE_SHAPES["q36-tiny"]):
        shape = tuple(reversed(dims))
        if name.endswith("norm.weight"):
            w.add_tensor(name, np.ones(shape, np.float32))
        elif name.endswith("ssm_a"):
            w.add_tensor(name, -np.ones(shape, np.float32))
        else:
            arr = (rng.standard_normal(shape) * 0.02).astype(np.float16 if quant else np.float32)
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(f16.encode(), out.encode(), params)
    Path(f16).unlink()
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed ({rc})")
    print(f"{out}: {Path(out).stat().st_size} bytes (Q4_K_M of the q36-tiny shape)")


def derive_qwen35moe(name: str, ref: str, out: str, tokenizer_src: str | None = None) -> int:
    """A skeleton of the qwen35moe shape `name`: a tokenizer (`tokenizer_src`, default `ref`'s; padded to the shape's
    vocabulary) and, tensor by tensor, the quantisation type llama.cpp gave the same tensor of the reference
    (`reference`; same layout). `ref` may also be "Q4_K": every quantisable tensor Q4_K, the rest F32 (tests).
    Returns the full file size."""
    import gguf

    if ref == "Q4_K":
        types = {t: (12 if q else 0) for t, _, q in qwen35moe_tensors(QWEN35MOE_SHAPES[name])}
    else:
        types = {t.name: int(t.tensor_type) for t in gguf.GGUFReader(ref).tensors}
    w = _qwen35moe_writer(out, name, tokenizer_src or ref)
    tensors = [(t, dims, types[t]) for t, dims, _ in qwen35moe_tensors(QWEN35MOE_SHAPES[name])]
    info, total = _finish_skeleton(w, tensors, out)
    counts: dict[str, int] = {}
    for t in info["tensors"]:
        counts[GGML_TYPES[t["type"]][0]] = counts.get(GGML_TYPES[t["type"]][0], 0) + nbytes(t)
    print(f"{out}: {len(info['tensors'])} tensors, full size {total} bytes; by type {counts}")
    return int(total)


def _finish_skeleton(w, tensors: list, out: str) -> tuple[dict, int]:  # type: ignore[no-untyped-def,type-arg]
    """Write the tensor infos (name, ggml dims, type) and the header; the parsed skeleton and its full file size."""
    for name, dims, t in tensors:
        _add_info(w, name, dims, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    info = parse(Path(out).read_bytes())
    return info, info["data_offset"] + max(t["offset"] + nbytes(t) for t in info["tensors"])


def _add_info(w, name: str, dims: tuple[int, ...], t: int) -> None:  # type: ignore[no-untyped-def]
    """Tensor info only (no data) for a tensor of ggml dims `dims` and type `t`."""
    import gguf

    _, bs, be, _ = GGML_TYPES[t]
    n = int(np.prod(dims)) // be * bs
    # gguf-py takes the numpy shape (outermost first); for quantised data the last dim counts bytes
    np_shape = tuple(reversed(dims))
    if t == 0:
        w.add_tensor_info(name, np_shape, np.dtype(np.float32), n)
    else:
        byte_shape = (*np_shape[:-1], np_shape[-1] // be * bs)
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), n, raw_dtype=gguf.GGMLQuantizationType(t))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "derive" and sys.argv[2] in QWEN35MOE_SHAPES:
        derive_qwen35moe(*sys.argv[2:6])
    elif cmd == "derive":
        derive(*sys.argv[2:5])
    elif cmd == "reference":
        reference(*sys.argv[2:4])
    else:
        {"skeleton": skeleton, "synth": synth}[cmd](*sys.argv[2:4])
