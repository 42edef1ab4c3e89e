"""Write tiny random-weight GGUF models for engine tests (no download, a few hundred KB).

`write_tiny_mamba` writes a 2-layer Mamba (architecture "mamba": pure recurrent memory, so llama.cpp's
llama_model_is_recurrent is true and a partial sequence removal fails) with a small SentencePiece-style
vocabulary (<unk>, <s>, </s>, 256 byte-fallback tokens, and a few hundred character/word pieces).
The weights are seeded random numbers: the outputs are gibberish, but deterministic, which is all the
token-identity tests need.
"""

from __future__ import annotations

import string
from pathlib import Path

import gguf
import numpy as np

_WORD_TEXT = (
    "the cat sat on mat dog ran to a red blue green one two three four five and or is it of in at by for with "
    "from this that we you they he she up down left right yes no hello world copy paste data list"
)
_WORDS = _WORD_TEXT.split()


def _spm_vocab() -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types of a small SentencePiece ("llama") vocabulary with byte fallback."""
    tt = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>"]
    types = [tt.UNKNOWN, tt.CONTROL, tt.CONTROL]
    scores = [0.0, 0.0, 0.0]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(tt.BYTE)
        scores.append(0.0)
    pieces: list[str] = ["\u2581"]
    pieces += list(string.ascii_letters + string.digits + string.punctuation)
    pieces += ["\u2581" + c for c in string.ascii_lowercase]
    pieces += ["\u2581" + w for w in _WORDS] + [w for w in _WORDS if len(w) > 1]
    seen: set[str] = set()
    for p in pieces:
        if p in seen:
            continue
        seen.add(p)
        tokens.append(p)
        types.append(tt.NORMAL)
        scores.append(float(len(p)) - 0.001 * len(tokens))  # longer pieces win merges; ties broken by order
    return tokens, scores, [int(t) for t in types]


def write_tiny_mamba(
    path: str | Path, *, seed: int = 0, n_embd: int = 64, n_layer: int = 2, mix: float = 1.0, out_std: float = 0.5
) -> Path:
    """A tiny Mamba GGUF with F32 random weights; returns the path.

    `mix` scales the SSM blocks' output projection (how much the recurrent state moves the residual stream;
    smaller makes greedy decoding loop sooner, larger makes the tokens depend more on the state). `out_std` scales
    the output head, i.e. the logit gaps (the argmax does not depend on it).
    """
    path = Path(path)
    rng = np.random.default_rng(seed)
    d_inner = 2 * n_embd  # llama.cpp supports only an expansion factor of 2
    d_conv, d_state = 4, 16
    dt_rank = -(n_embd // -16)
    tokens, scores, types = _spm_vocab()
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.MAMBA])
    w.add_name("tiny-random-mamba")
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_block_count(n_layer)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_dt_b_c_rms(False)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def normal(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    # numpy shape = reversed ggml ne: a ggml {n_embd, n_vocab} tensor is a (n_vocab, n_embd) array.
    w.add_tensor("token_embd.weight", normal((n_vocab, n_embd), 1.0))
    w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    # Logits of a few units: clear greedy choices, so the exactness check is not excused by near-ties everywhere.
    w.add_tensor("output.weight", normal((n_vocab, n_embd), out_std))
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ssm_in.weight", normal((2 * d_inner, n_embd), n_embd**-0.5))
        w.add_tensor(f"blk.{i}.ssm_conv1d.weight", normal((d_inner, d_conv), d_conv**-0.5))
        w.add_tensor(f"blk.{i}.ssm_conv1d.bias", np.zeros(d_inner, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ssm_x.weight", normal((dt_rank + 2 * d_state, d_inner), d_inner**-0.5))
        w.add_tensor(f"blk.{i}.ssm_dt.weight", normal((d_inner, dt_rank), dt_rank**-0.5))
        # softplus(dt_bias) = dt in [0.3, 3]: larger than Mamba's own init, so the state forgets quickly and
        # greedy decoding of the random model settles into loops (which prompt lookup can draft).
        dt = np.exp(rng.uniform(np.log(3e-1), np.log(3.0), d_inner))
        w.add_tensor(f"blk.{i}.ssm_dt.bias", np.log(np.expm1(dt)).astype(np.float32))
        # llama.cpp stores A = -exp(A_log); Mamba's A_log init is log(1..d_state) per channel.
        a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))
        w.add_tensor(f"blk.{i}.ssm_a", a)
        w.add_tensor(f"blk.{i}.ssm_d", np.ones(d_inner, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ssm_out.weight", normal((n_embd, d_inner), mix * d_inner**-0.5))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
