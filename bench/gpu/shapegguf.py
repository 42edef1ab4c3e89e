"""Shape-equivalent GGUF models: the real file's metadata and tensor layout, synthetic weights (valid for speed only).

A real GGUF is too large to send to the GPU machine (64 MiB per run), but everything that decides its speed (the
architecture metadata, every tensor's shape and quantisation type, the tokenizer) sits in the first few MB: the
header, key/values and tensor infos. `skeleton` cuts that prefix off a real file (or derives a larger model's from
it); `synth` writes the full file on the other side with the same layout and synthetic quantised blocks (random
quants, small valid f16 scales), so no re-quantisation is needed and the per-tensor types are exactly the real ones.

  python bench/gpu/shapegguf.py skeleton REAL.gguf OUT.skel
  python bench/gpu/shapegguf.py derive 7b|14b|32b REAL_1.5B.gguf OUT.skel   # Qwen2.5 shapes (needs gguf-py)
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
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        if key in new:
            val = new[key]
        elif vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]).decode("utf-8", "replace") for i in field.data]
            else:
                val = [field.parts[i][0].item() for i in field.data]
            w.add_key_value(key, val, vtype, sub_type=sub)
            continue
        elif vtype == gguf.GGUFValueType.STRING:
            val = bytes(field.parts[field.data[0]]).decode("utf-8", "replace")
        else:
            val = field.parts[field.data[0]][0].item()
        w.add_key_value(key, val, vtype)
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
    for name, shp, t in tensors:
        _, bs, be, _ = GGML_TYPES[t]
        n = int(np.prod(shp)) // be * bs
        # gguf-py takes the numpy shape (outermost first); for quantised data the last dim counts bytes
        np_shape = tuple(reversed(shp))
        if t == 0:
            w.add_tensor_info(name, np_shape, np.dtype(np.float32), n)
        else:
            byte_shape = (*np_shape[:-1], np_shape[-1] // be * bs)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), n, raw_dtype=gguf.GGMLQuantizationType(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    info = parse(Path(out).read_bytes())
    total = info["data_offset"] + max(t["offset"] + nbytes(t) for t in info["tensors"])
    print(f"{out}: {len(info['tensors'])} tensors, full size {total}")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "derive":
        derive(*sys.argv[2:5])
    else:
        {"skeleton": skeleton, "synth": synth}[cmd](*sys.argv[2:4])
