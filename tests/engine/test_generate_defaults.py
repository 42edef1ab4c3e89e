"""`dynadraft generate` with llama-cli's defaults: no sampling flags and no token limit needed, a bad limit refused."""

from __future__ import annotations

from pathlib import Path

from tests.journeys.helpers import THREADS, dynadraft, generate_json

CTX = 256  # llama.cpp pads the context window to a multiple of 256: this one it keeps as asked


def test_a_bare_generate_samples_until_the_context_is_full(smollm2_path: Path) -> None:
    # No --max-tokens, --temperature or top-k/p: llama-cli's -n -1 and its samplers. A raw story opening (no chat
    # template, so no turn to end) does not stop within the ~240 tokens the window leaves: the run ends at the window's
    # end (the seed makes it repeatable).
    args = ("--model", str(smollm2_path), "--ctx-size", str(CTX), *THREADS, "--no-spec", "--seed", "1")
    out, _ = generate_json(*args, "--raw", "--prompt", "Chapter One\n\nThe dragon who collected teapots")
    t = out["timings"]
    assert out["finish_reason"] == "length"
    assert t["prompt_n"] + t["predicted_n"] == CTX


def test_a_token_limit_of_zero_is_refused_with_the_flags_meaning(smollm2_path: Path) -> None:
    p = dynadraft("generate", "--model", str(smollm2_path), "--prompt", "Hi", "--max-tokens", "0")
    assert p.returncode == 2
    assert "--max-tokens must be >= 1, or -1 for no limit; got 0" in p.stderr


def test_logit_bias_bans_a_token_and_bad_flags_are_refused_before_loading(smollm2_path: Path) -> None:
    # Greedy "The sea is" continues with " a" (token 253 in SmolLM2's vocabulary); llama-cli's 253-inf bans it.
    args = ("--model", str(smollm2_path), "--ctx-size", str(CTX), *THREADS, "--no-spec", "--temperature", "0")
    prompt = ("--raw", "--prompt", "The sea is", "--max-tokens", "4")
    plain, _ = generate_json(*args, *prompt)
    banned, _ = generate_json(*args, *prompt, "--logit-bias", "253-inf")
    assert plain["tokens"][0] == 253
    assert 253 not in banned["tokens"]
    past_vocab = dynadraft("generate", *args, *prompt, "--logit-bias", "49152+1")
    assert past_vocab.returncode != 0
    assert "logit_bias" in past_vocab.stderr and "Traceback" not in past_vocab.stderr
    for flags, says in ((("--logit-bias", "253+inf"), "+inf is not a bias"), (("--stop", ""), "stop")):
        p = dynadraft("generate", *args, *prompt, *flags)
        assert p.returncode == 2, p.stderr
        assert says in p.stderr and "Traceback" not in p.stderr


def test_dry_xtc_and_mirostat_flags_as_llama_clis(smollm2_path: Path) -> None:
    # The raw list SmolLM2 copies greedily; --dry-multiplier stops the copy (no breaker in it), and XTC at threshold 0
    # with --top-k 2 takes the second choice each time, so the reply differs from the greedy one at its first token.
    args = ("--model", str(smollm2_path), "--ctx-size", str(CTX), *THREADS, "--no-spec", "--temperature", "0")
    prompt = ("--raw", "--prompt", "apple, pear, plum, fig, apple, pear, plum, fig, apple,", "--max-tokens", "16")
    plain, _ = generate_json(*args, *prompt)
    dry, _ = generate_json(*args, *prompt, "--dry-multiplier", "3", "--dry-sequence-breaker", "none")
    assert plain["text"].count(" pear,") >= 2 and dry["text"].count(" pear,") < plain["text"].count(" pear,")
    xtc, _ = generate_json(*args[:-1], "1", *prompt, "--top-k", "2", "--xtc-probability", "1", "--xtc-threshold", "0")
    assert xtc["tokens"][0] != plain["tokens"][0]
    miro, _ = generate_json(*args[:-1], "1", *prompt, "--mirostat", "2", "--mirostat-ent", "0")
    assert miro["tokens"] == plain["tokens"]  # mirostat 2 at tau 0 keeps only the likeliest token
    bad = (
        (("--typical", "2"), "typical_p"),
        (("--dry-base", "0.5"), "dry_base"),
        (("--mirostat", "3"), "mirostat"),
        (("--min-keep", "-1"), "min_keep"),
    )
    for flags, says in bad:
        p = dynadraft("generate", *args, *prompt, *flags)
        assert p.returncode == 2, p.stderr
        assert says in p.stderr and "Traceback" not in p.stderr


def test_model_by_name_from_the_models_folder_as_lms_load_and_ollama_take_it(
    smollm2_path: Path, tmp_path: Path
) -> None:
    """--model takes a path, or the name of a GGUF in the models folder (or the packaged models' cache): its file
    name, case aside, or a part of it that only one model has. Two matches, none, or a missing path are refused
    before anything loads, saying what is there."""
    models = tmp_path / "home" / "models"
    models.mkdir(parents=True)
    for name in ("demo-chat.gguf", "demo-code.gguf"):
        (models / name).symlink_to(smollm2_path)
    env = {"DYNADRAFT_HOME": str(tmp_path / "home")}
    args = ("--ctx-size", str(CTX), *THREADS, "--no-spec", "--temperature", "0", "--prompt", "Hi", "--max-tokens", "2")
    by_path, _ = generate_json("--model", str(smollm2_path), *args, env=env)
    for name in ("demo-chat", "DEMO-CODE.gguf", smollm2_path.stem.upper()):
        by_name, _ = generate_json("--model", name, *args, env=env)
        assert by_name["tokens"] == by_path["tokens"], name
    refused = {
        "demo": "matches 2 models (demo-chat.gguf, demo-code.gguf)",
        "no-such-model": "no model here has it in its name; models here: ",
        str(tmp_path / "missing.gguf"): "model not found: ",
    }
    for name, says in refused.items():
        p = dynadraft("generate", "--model", name, *args, env=env)
        assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_source_names_any_registered_draft_source_and_the_aliases_agree(smollm2_path: Path) -> None:
    # --source takes a registry name (a newly registered source needs no flag of its own); --lookup is its alias.
    args = ("--model", str(smollm2_path), "--ctx-size", str(CTX), *THREADS, "--temperature", "0")
    prompt = ("--raw", "--prompt", "apple, pear, plum, fig, apple, pear, plum, fig, apple,", "--max-tokens", "12")
    named, _ = generate_json(*args, *prompt, "--source", "lookup")
    alias, _ = generate_json(*args, *prompt, "--lookup")
    assert named["speculative"] == alias["speculative"] and named["speculative"]["source"] == "lookup"
    assert named["tokens"] == alias["tokens"]
    none, _ = generate_json(*args, *prompt, "--source", "none")
    assert none["speculative"]["source"] == "none"
    for flags, says in (
        (("--source", "bogus"), "must be one of draft, lookup, mtp, none, pool"),
        (("--source", "lookup", "--pool"), "name two draft sources"),
    ):
        p = dynadraft("generate", *args, *prompt, *flags)
        assert p.returncode == 2, p.stderr
        assert says in p.stderr and "Traceback" not in p.stderr
