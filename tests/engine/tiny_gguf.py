"""Write tiny random-weight GGUF models for engine tests (no download, a few hundred KB).

`write_tiny_mamba` writes a 2-layer Mamba (architecture "mamba": pure recurrent memory, so llama.cpp's
llama_model_is_recurrent is true and a partial sequence removal fails). `write_tiny_qwen35` writes a Qwen3.5
(architecture "qwen35"): the hybrid that users run, gated delta-net (linear attention, recurrent state) layers
interleaved with gated full-attention layers (KV cache), so llama_model_is_hybrid is true and a partial removal
fails too. Both use a small SentencePiece-style vocabulary (<unk>, <s>, </s>, 256 byte-fallback tokens, and a
few hundred character/word pieces). The weights are seeded random numbers: the outputs are gibberish, but
deterministic, which is all the token-identity tests need.
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


def _spm_vocab(extra_tokens: int = 0) -> tuple[list[str], list[float], list[int]]:
    """Tokens, scores and types of a small SentencePiece ("llama") vocabulary with byte fallback.

    `extra_tokens` appends that many ordinary pieces at the end (as Qwen2.5's larger models pad their vocabulary),
    so two models can share every id they both have yet differ in size, which llama.cpp's pairing rule allows."""
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
    for i in range(extra_tokens):
        tokens.append(f"\u2581x{i}q")
        types.append(tt.NORMAL)
        scores.append(-100.0 - i)
    return tokens, scores, [int(t) for t in types]


class _Tiny:
    """What every tiny model shares: a GGUF writer with the common keys and the vocabulary, seeded random tensors,
    the token embedding and the output head. Numpy shapes are reversed ggml ne: a ggml {n_embd, n_vocab} tensor is
    a (n_vocab, n_embd) array."""

    def __init__(
        self,
        path: Path,
        arch: gguf.MODEL_ARCH,
        *,
        seed: int,
        n_embd: int,
        n_layer: int,
        out_std: float,
        extra_tokens: int = 0,
    ) -> None:
        self.path = path
        self.rng = np.random.default_rng(seed)
        tokens, scores, types = _spm_vocab(extra_tokens)
        self.n_vocab = len(tokens)
        w = self.w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
        w.add_name(f"tiny-random-{gguf.MODEL_ARCH_NAMES[arch]}")
        w.add_context_length(4096)
        w.add_embedding_length(n_embd)
        w.add_block_count(n_layer)
        w.add_layer_norm_rms_eps(1e-5)
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
        self.normal("token_embd.weight", (self.n_vocab, n_embd), 1.0)
        self.ones("output_norm.weight", n_embd)
        # Logits of a few units: clear greedy choices, so an exactness check is not excused by near-ties everywhere.
        self.output = (self.rng.standard_normal((self.n_vocab, n_embd)) * out_std).astype(np.float32)
        w.add_tensor("output.weight", self.output)

    def normal(self, name: str, shape: tuple[int, ...], std: float) -> None:
        self.w.add_tensor(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def ones(self, name: str, n: int) -> None:
        self.w.add_tensor(name, np.ones(n, dtype=np.float32))

    def finish(self) -> Path:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()
        return self.path


def write_tiny_mamba(
    path: str | Path, *, seed: int = 0, n_embd: int = 64, n_layer: int = 2, mix: float = 1.0, out_std: float = 0.5
) -> Path:
    """A tiny Mamba GGUF with F32 random weights; returns the path.

    `mix` scales the SSM blocks' output projection (how much the recurrent state moves the residual stream;
    smaller makes greedy decoding loop sooner, larger makes the tokens depend more on the state). `out_std` scales
    the output head, i.e. the logit gaps (the argmax does not depend on it).
    """
    m = _Tiny(Path(path), gguf.MODEL_ARCH.MAMBA, seed=seed, n_embd=n_embd, n_layer=n_layer, out_std=out_std)
    rng, w = m.rng, m.w
    d_inner = 2 * n_embd  # llama.cpp supports only an expansion factor of 2
    d_conv, d_state = 4, 16
    dt_rank = -(n_embd // -16)
    w.add_feed_forward_length(0)
    w.add_head_count(0)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(dt_rank)
    w.add_ssm_dt_b_c_rms(False)

    for i in range(n_layer):
        m.ones(f"blk.{i}.attn_norm.weight", n_embd)
        m.normal(f"blk.{i}.ssm_in.weight", (2 * d_inner, n_embd), n_embd**-0.5)
        m.normal(f"blk.{i}.ssm_conv1d.weight", (d_inner, d_conv), d_conv**-0.5)
        w.add_tensor(f"blk.{i}.ssm_conv1d.bias", np.zeros(d_inner, dtype=np.float32))
        m.normal(f"blk.{i}.ssm_x.weight", (dt_rank + 2 * d_state, d_inner), d_inner**-0.5)
        m.normal(f"blk.{i}.ssm_dt.weight", (d_inner, dt_rank), dt_rank**-0.5)
        # softplus(dt_bias) = dt in [0.3, 3]: larger than Mamba's own init, so the state forgets quickly and
        # greedy decoding of the random model settles into loops (which prompt lookup can draft).
        dt = np.exp(rng.uniform(np.log(3e-1), np.log(3.0), d_inner))
        w.add_tensor(f"blk.{i}.ssm_dt.bias", np.log(np.expm1(dt)).astype(np.float32))
        # llama.cpp stores A = -exp(A_log); Mamba's A_log init is log(1..d_state) per channel.
        a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))
        w.add_tensor(f"blk.{i}.ssm_a", a)
        m.ones(f"blk.{i}.ssm_d", d_inner)
        m.normal(f"blk.{i}.ssm_out.weight", (n_embd, d_inner), mix * d_inner**-0.5)
    return m.finish()


def write_tiny_qwen35(
    path: str | Path,
    *,
    seed: int = 0,
    n_embd: int = 64,
    n_layer: int = 4,
    full_attention_interval: int = 2,
    mix: float = 1.0,
    out_std: float = 0.5,
    mtp: bool = False,
    mtp_std: float = 1.0,
    mtp_next: dict[int, int] | None = None,
    mtp_next_scale: float = 1.0,
) -> Path:
    """A tiny Qwen3.5 GGUF (hybrid memory) with F32 random weights; returns the path.

    Layer i is full attention when (i + 1) % full_attention_interval == 0 and a gated delta-net layer otherwise
    (Qwen3.5's own rule, with interval 4 in the released models); the default gives recurrent, attention,
    recurrent, attention. Attention layers: 4 query heads (the projection also carries a per-head output gate),
    2 KV heads of 16, Q/K RMS norms, interleaved M-RoPE on half of each head. Delta-net layers: 2 key and 2 value
    heads of 16 (llama.cpp requires the value head size to equal ssm.state_size), a 4-tap causal convolution.
    Every layer ends in a SwiGLU FFN. `mix` scales the attention and delta-net output projections (how much
    the memory moves the residual stream); `out_std` scales the output head, i.e. the logit gaps.

    `mtp` appends one multi-token-prediction (NextN) block after the trunk, as the released Qwen3.5/3.6 GGUFs carry
    it: block_count counts it, `nextn_predict_layers` = 1, and the block is a full-attention decoder layer fed by
    `nextn.eh_proj` over [RMSNorm(token embedding) | RMSNorm(target hidden state)], sharing the output head.
    `mtp_std` scales the hidden-state half of eh_proj (how much the draft follows the target's state).
    `mtp_next` gives the head a bigram bias: the block's own token embedding (nextn.embed_tokens) of token x points
    along the output row of mtp_next[x], so after the token x the head tends to draft mtp_next[x] (a random head
    would almost never agree with the target; with a map read off the target's own greedy output, drafts are
    partly accepted and partly rejected, which is what the rollback tests need). `mtp_next_scale` weakens that bias
    (at 1 the head is nearly certain of its bigram; smaller spreads its distribution).
    """
    if not 1 < full_attention_interval <= n_layer:
        raise ValueError("need at least one attention and one recurrent layer")
    n_blocks = n_layer + (1 if mtp else 0)
    m = _Tiny(Path(path), gguf.MODEL_ARCH.QWEN35, seed=seed, n_embd=n_embd, n_layer=n_blocks, out_std=out_std)
    rng, w = m.rng, m.w
    n_ff = 2 * n_embd
    n_head, n_head_kv, head_dim = 4, 2, 16
    n_rot = head_dim // 2  # Qwen3.5 rotates part of each head (a quarter in the released models)
    d_conv, d_state, n_k_heads, n_v_heads = 4, 16, 2, 2
    key_dim, value_dim = d_state * n_k_heads, d_state * n_v_heads
    conv_dim = 2 * key_dim + value_dim  # q, k and v all go through the convolution
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(n_rot)
    w.add_rope_dimension_sections([2, 1, 1, 0])  # rotary pairs per M-RoPE section: sums to n_rot / 2
    w.add_rope_freq_base(10000.0)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(value_dim)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(n_v_heads)
    w.add_ssm_group_count(n_k_heads)
    w.add_full_attention_interval(full_attention_interval)
    if mtp:
        w.add_nextn_predict_layers(1)

    for i in range(n_blocks):
        blk = f"blk.{i}"
        m.ones(f"{blk}.attn_norm.weight", n_embd)
        m.ones(f"{blk}.post_attention_norm.weight", n_embd)
        if i == n_layer:  # the MTP block: eh_proj maps [embedding | hidden] (2 * n_embd) back to n_embd
            eh = rng.standard_normal((n_embd, 2 * n_embd)) * (2 * n_embd) ** -0.5
            eh[:, n_embd:] *= mtp_std
            if mtp_next is not None:
                eh[:, :n_embd] = np.eye(n_embd)  # the bigram direction passes through unchanged
            w.add_tensor(f"{blk}.nextn.eh_proj.weight", eh.astype(np.float32))
            m.ones(f"{blk}.nextn.enorm.weight", n_embd)
            m.ones(f"{blk}.nextn.hnorm.weight", n_embd)
            if mtp_next is not None:
                emb = rng.standard_normal((m.n_vocab, n_embd)) * 0.3
                for x, y in mtp_next.items():
                    emb[x] += m.output[y] / np.linalg.norm(m.output[y]) * np.sqrt(n_embd) * mtp_next_scale
                w.add_tensor(f"{blk}.nextn.embed_tokens.weight", emb.astype(np.float32))
        if (i + 1) % full_attention_interval == 0 or i == n_layer:
            m.normal(f"{blk}.attn_q.weight", (2 * n_head * head_dim, n_embd), n_embd**-0.5)  # [q | gate] per head
            m.normal(f"{blk}.attn_k.weight", (n_head_kv * head_dim, n_embd), n_embd**-0.5)
            m.normal(f"{blk}.attn_v.weight", (n_head_kv * head_dim, n_embd), n_embd**-0.5)
            m.ones(f"{blk}.attn_q_norm.weight", head_dim)
            m.ones(f"{blk}.attn_k_norm.weight", head_dim)
            m.normal(f"{blk}.attn_output.weight", (n_embd, n_head * head_dim), mix * (n_head * head_dim) ** -0.5)
        else:
            m.normal(f"{blk}.attn_qkv.weight", (conv_dim, n_embd), n_embd**-0.5)
            m.normal(f"{blk}.attn_gate.weight", (value_dim, n_embd), n_embd**-0.5)  # z, the output gate
            m.normal(f"{blk}.ssm_conv1d.weight", (conv_dim, d_conv), d_conv**-0.5)
            m.normal(f"{blk}.ssm_beta.weight", (n_v_heads, n_embd), n_embd**-0.5)  # write strength
            m.normal(f"{blk}.ssm_alpha.weight", (n_v_heads, n_embd), n_embd**-0.5)  # decay, with dt and a
            # Per-token decay exp(a * softplus(alpha + dt)) around exp(-1): the state forgets quickly, so greedy
            # decoding of the random model settles into loops (which prompt lookup can draft).
            w.add_tensor(f"{blk}.ssm_dt.bias", np.full(n_v_heads, np.log(np.expm1(1.0)), dtype=np.float32))
            w.add_tensor(f"{blk}.ssm_a", -rng.uniform(0.5, 2.0, n_v_heads).astype(np.float32))  # -exp(A_log)
            m.ones(f"{blk}.ssm_norm.weight", d_state)
            m.normal(f"{blk}.ssm_out.weight", (n_embd, value_dim), mix * value_dim**-0.5)
        m.normal(f"{blk}.ffn_gate.weight", (n_ff, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.ffn_up.weight", (n_ff, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.ffn_down.weight", (n_embd, n_ff), n_ff**-0.5)
    return m.finish()


def write_tiny_llama(
    path: str | Path, *, seed: int = 0, n_embd: int = 64, n_layer: int = 2, out_std: float = 0.5, extra_tokens: int = 0
) -> Path:
    """A tiny Llama GGUF (attention only, like Qwen2.5's dense models) with F32 random weights; returns the path.

    `extra_tokens` grows the vocabulary at its end (see _spm_vocab): two files written with different values pair
    as target and draft by llama.cpp's rules while their vocab sizes differ. 4 query heads, 2 KV heads of 16.
    """
    m = _Tiny(
        Path(path),
        gguf.MODEL_ARCH.LLAMA,
        seed=seed,
        n_embd=n_embd,
        n_layer=n_layer,
        out_std=out_std,
        extra_tokens=extra_tokens,
    )
    w = m.w
    n_ff = 2 * n_embd
    n_head, n_head_kv, head_dim = 4, 2, n_embd // 4
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    for i in range(n_layer):
        blk = f"blk.{i}"
        m.ones(f"{blk}.attn_norm.weight", n_embd)
        m.normal(f"{blk}.attn_q.weight", (n_head * head_dim, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.attn_k.weight", (n_head_kv * head_dim, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.attn_v.weight", (n_head_kv * head_dim, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.attn_output.weight", (n_embd, n_head * head_dim), (n_head * head_dim) ** -0.5)
        m.ones(f"{blk}.ffn_norm.weight", n_embd)
        m.normal(f"{blk}.ffn_gate.weight", (n_ff, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.ffn_up.weight", (n_ff, n_embd), n_embd**-0.5)
        m.normal(f"{blk}.ffn_down.weight", (n_embd, n_ff), n_ff**-0.5)
    return m.finish()
