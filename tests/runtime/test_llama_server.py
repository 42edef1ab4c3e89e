"""External llama-server runtime, end to end: a real llama-server built from the pinned sdist's llama.cpp, real models.

The binary comes from DYNADRAFT_LLAMA_SERVER or scripts/build-llama-server.sh's cache. Without either the tests
skip, unless DYNADRAFT_REQUIRE_LLAMA_SERVER is set (scripts/test.sh sets it), where they fail instead.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.external import ExternalSession, engine_error, speculative_fields
from app.engine.session import Session
from app.engine.types import (
    ContextLengthExceeded,
    DoneEvent,
    EngineError,
    GenerationRequest,
    InvalidToken,
    TextEvent,
)
from app.engine.worker import Engine
from app.runtime.llama_server import (
    SAMPLING_FIELDS,
    SPECULATIVE_FIELDS,
    ExternalServer,
    ExternalServerError,
    ServerFeatures,
    ServerHTTPError,
    ServerSpec,
)
from app.runtime.sampling import SamplingParams
from app.speculative.settings import PLAIN, SpecSettings

MESSAGES = ({"role": "user", "content": "Name three colours of the rainbow."},)


@pytest.fixture(scope="module")
def server_binary(llama_server_binary: str) -> str:
    return llama_server_binary


@pytest.fixture(scope="module")
def target() -> str:
    from app.models.packaged import ensure_model

    return str(ensure_model("smollm2-135m"))


@pytest.fixture(scope="module")
def draft(target: str) -> str:
    from app.models.packaged import ensure_quantized

    return str(ensure_quantized("smollm2-135m", "Q2_K"))


def _config(target: str, binary: str | None, **kw: object) -> EngineConfig:
    return EngineConfig(model=target, n_ctx=512, n_batch=256, n_threads=1, server_binary=binary, **kw)  # type: ignore[arg-type]


def _gone(pid: int) -> bool:
    """True when no process (not even a zombie) has this id."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _run(session: ExternalSession | Session, request: GenerationRequest) -> tuple[list[str], DoneEvent]:
    texts, done = [], None
    for ev in session.generate(request):
        if isinstance(ev, TextEvent):
            texts.append(ev.text)
        elif isinstance(ev, DoneEvent):
            done = ev
    assert done is not None
    return texts, done


@pytest.fixture(scope="module")
def plain_external(target: str, server_binary: str) -> Iterator[ExternalSession]:
    s = ExternalSession(_config(target, server_binary))
    yield s
    s.close()


def test_start_health_props_logs_and_stop(target: str, server_binary: str) -> None:
    with ExternalServer(ServerSpec(binary=server_binary, model=target, n_ctx=512, n_threads=1)) as srv:
        assert srv.running and srv.request("GET", "/health")[0] == 200
        props = srv.props()
        features = srv.features
        assert features is not None and features.n_ctx == 512
        params = props["default_generation_settings"]["params"]
        # What this build honours is exactly what its /props lists among DynaDraft's per-request fields.
        assert features.honoured == tuple(f for f in SPECULATIVE_FIELDS + SAMPLING_FIELDS if f in params)
        assert srv.honoured_fields() == features.honoured
        assert set(SAMPLING_FIELDS) <= set(features.honoured)
        # The pinned llama.cpp compiles its per-request speculative.* parsing out (#if 0 in server-schema.cpp)
        # and its /props does not list them: only the start-time draft flags apply.
        assert features.speculative == ()
        assert "honours none of speculative" in features.describe()
        log = srv.logs()
        assert "--port" in log.splitlines()[0] and "127.0.0.1" in log.splitlines()[0]
        assert "listening" in log
        pid = srv.pid
    assert pid is not None and not srv.running and _gone(pid)


def test_greedy_output_and_prompt_tokens_match_the_in_process_session(
    target: str, plain_external: ExternalSession
) -> None:
    # This greedy path passes a near-tie (top-2 logit margin 0.001 at the 6th token): a llama-server built with
    # other CPU flags (AVX2 kernels instead of the wheel's AVX-512) picks the other token there. Same flags, same
    # tokens, so this checks that the server computes exactly what the bundled runtime computes.
    request = GenerationRequest(messages=MESSAGES, max_tokens=24, cache_prompt=False)
    local = Session(_config(target, None))
    try:
        local_prompt = local.format_prompt(request)
        _, local_done = _run(local, request)
    finally:
        local.close()
    ext_prompt = plain_external.format_prompt(request)
    texts, done = _run(plain_external, request)
    s = done.summary
    assert ext_prompt == local_prompt  # the server's template + tokenizer give the very same ids
    assert s.prompt_tokens == len(local_prompt)
    assert s.dynamic_draft is not None and s.dynamic_draft["prompt_tokens"] == len(local_prompt)
    assert s.dynamic_draft["reason"] == "no_table" and s.settings == PLAIN
    assert s.tokens == local_done.summary.tokens and len(s.tokens) > 0
    assert s.text == local_done.summary.text == "".join(texts)
    assert s.finish_reason == local_done.summary.finish_reason
    assert s.timings.prompt_n == len(local_prompt) and s.timings.predicted_n >= len(s.tokens)
    assert s.timings.draft_n == 0


@pytest.mark.parametrize(
    "knobs",
    [
        {"dry_multiplier": 3.0, "dry_allowed_length": 2},
        {"temperature": 1.0, "top_k": 2, "xtc_probability": 1.0, "xtc_threshold": 0.0},
        {"temperature": 1.0, "top_k": 5, "typical_p": 0.0},
        # Mirostat 2 at tau 0 keeps only the likeliest token, and its chain has no penalty (llama.cpp's): the reply
        # is the biased greedy one, repeat_penalty or not.
        {"temperature": 1.0, "mirostat": 2, "mirostat_tau": 0.0, "repeat_penalty": 1.5},
    ],
    ids=["dry", "xtc", "typical", "mirostat"],
)
def test_samplers_and_logit_bias_reach_the_server_and_match_the_bundled_runtime(
    target: str, plain_external: ExternalSession, knobs: dict[str, float]
) -> None:
    # Deterministic settings (greedy; XTC and typical narrowed to one candidate): llama-server's own samplers give the
    # very tokens the bundled runtime's give, DRY's breakers and the bias included, so the fields were sent and read.
    sampling = SamplingParams(**knobs)  # type: ignore[arg-type]
    request = GenerationRequest(
        prompt="apple, pear, plum, fig, apple, pear, plum, fig, apple,",
        max_tokens=16,
        cache_prompt=False,
        sampling=sampling,
        logit_bias=((" plum", -5.0), (11, 1.0)),
        dry_sequence_breakers=("\n", " fig"),
    )
    local = Session(_config(target, None))
    try:
        _, local_done = _run(local, request)
        _, plain_done = _run(local, replace(request, sampling=SamplingParams(), logit_bias=()))
        _, biased_done = _run(local, replace(request, sampling=SamplingParams()))
    finally:
        local.close()
    _, done = _run(plain_external, request)
    assert done.summary.tokens == local_done.summary.tokens
    if "mirostat" in knobs:
        assert done.summary.tokens == biased_done.summary.tokens
        assert (
            done.summary.tokens
            != _run(plain_external, replace(request, sampling=SamplingParams(repeat_penalty=1.5)))[1].summary.tokens
        )
    else:
        assert done.summary.tokens != plain_done.summary.tokens  # the knobs changed the reply


def test_a_logit_bias_id_past_the_vocabulary_is_refused_as_by_the_bundled_runtime(
    plain_external: ExternalSession,
) -> None:
    request = GenerationRequest(prompt="Hi", max_tokens=2, logit_bias=((49152, 1.0),))
    with pytest.raises(InvalidToken, match="49152"):
        _run(plain_external, request)


def test_raw_prompt_and_stop_string(plain_external: ExternalSession) -> None:
    request = GenerationRequest(prompt="One, two, three, four,", max_tokens=24, stop=(" six",), cache_prompt=False)
    _, done = _run(plain_external, request)
    s = done.summary
    assert s.finish_reason == "stop" and " six" not in s.text and "five" in s.text


def test_draft_settings_reach_the_server(target: str, draft: str, server_binary: str) -> None:
    request = GenerationRequest(messages=MESSAGES, max_tokens=24, cache_prompt=False)
    with_draft = ExternalSession(_config(target, server_binary, draft=draft, draft_n_max_cap=4))
    try:
        _, done = _run(with_draft, request)
        s = done.summary
        runtime = s.dynamic_draft["runtime"]  # type: ignore[index]
        assert s.timings.draft_n > 0 and s.timings.draft_n_accepted <= s.timings.draft_n
        assert s.settings == SpecSettings(source="draft", n_max=4, p_min=0.75) == with_draft.start_settings
        assert runtime["ignored"] == list(SPECULATIVE_FIELDS) and runtime["sent"] == {}
        assert s.steps == s.timings.predicted_n - s.timings.draft_n_accepted
        log = with_draft.server.logs(None)
        assert "--spec-draft-n-max 4" in log.splitlines()[0]
        # The request asks for plain decoding; /props said this build ignores speculative.n_max, and it does.
        _, done = _run(with_draft, GenerationRequest(messages=MESSAGES, max_tokens=24, speculative=PLAIN))
        d = done.summary.dynamic_draft
        assert d is not None and d["reason"] == "override" and d["selected"]["n_max"] == 0
        assert done.summary.timings.draft_n > 0 and done.summary.settings.n_max == 4
    finally:
        with_draft.close()
    # A plain default starts the server without the draft: nothing is drafted.
    plain = ExternalSession(_config(target, server_binary, draft=draft, default_spec=PLAIN))
    try:
        _, done = _run(plain, request)
        assert done.summary.timings.draft_n == 0 and done.summary.settings == PLAIN
        assert "-md" not in plain.server.logs(None).splitlines()[0].split()
    finally:
        plain.close()


def test_chosen_settings_are_sent_only_where_honoured() -> None:
    start = SpecSettings(source="draft", n_max=8, p_min=0.75)
    chosen = SpecSettings(source="draft", n_max=3, n_min=1, p_min=0.5)
    base = dict(build_info="b", n_ctx=512, bos_token="", eos_token="", chat_template="", ignored=())
    fork = ServerFeatures(honoured=SPECULATIVE_FIELDS + SAMPLING_FIELDS, **base)  # type: ignore[arg-type]
    sent, ignored, ran = speculative_fields(chosen, start, fork)
    assert sent == {"speculative.n_max": 3, "speculative.n_min": 1, "speculative.p_min": 0.5} and ignored == ()
    assert ran == chosen
    assert speculative_fields(PLAIN, start, fork)[2] == PLAIN
    mainline = ServerFeatures(honoured=SAMPLING_FIELDS, **base)  # type: ignore[arg-type]
    assert speculative_fields(chosen, start, mainline) == ({}, SPECULATIVE_FIELDS, start)


def test_start_errors_are_clear_and_leave_no_process(tmp_path: Path, target: str, server_binary: str) -> None:
    missing = tmp_path / "nope" / "llama-server"
    with pytest.raises(ExternalServerError, match="binary not found: .*nope"):
        ExternalServer(ServerSpec(binary=str(missing), model=target)).start()
    not_exec = tmp_path / "llama-server"
    not_exec.write_text("#!/bin/sh\n")
    with pytest.raises(ExternalServerError, match="not executable"):
        ExternalServer(ServerSpec(binary=str(not_exec), model=target)).start()
    not_exec.chmod(not_exec.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ExternalServerError, match="does not look like a llama-server"):
        ExternalServer(ServerSpec(binary=str(not_exec), model=target)).start()
    with pytest.raises(EngineError, match="model not found: .*missing.gguf"):
        ExternalSession(_config(str(tmp_path / "missing.gguf"), server_binary))
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    srv = ExternalServer(ServerSpec(binary=server_binary, model=str(broken), n_threads=1))
    with pytest.raises(ExternalServerError, match="exited with code") as info:
        srv.start()
    assert "log" in str(info.value) and srv.log_path is not None and srv.log_path.exists()
    assert srv.pid is not None and _gone(srv.pid)
    # Through the engine, the same message comes back from wait_ready.
    with pytest.raises(EngineError, match="binary not found"):
        Engine(_config(target, str(missing))).wait_ready(30)


def test_cancel_mid_stream_then_serve_again(plain_external: ExternalSession) -> None:
    cancel = threading.Event()
    request = GenerationRequest(prompt="Once upon a time", max_tokens=200, cache_prompt=False)
    n_text = 0
    done = None
    for ev in plain_external.generate(request, cancel):
        if isinstance(ev, TextEvent):
            n_text += 1
            if n_text == 3:
                cancel.set()
        elif isinstance(ev, DoneEvent):
            done = ev
    assert done is not None and done.summary.finish_reason == "cancelled"
    assert 3 <= len(done.summary.tokens) < 20
    _, again = _run(plain_external, GenerationRequest(prompt="Once upon a time", max_tokens=4))
    assert again.summary.finish_reason == "length" and len(again.summary.tokens) == 4


def test_context_overflow_is_refused_and_the_server_stays_up(plain_external: ExternalSession) -> None:
    long = GenerationRequest(prompt="word " * 600, max_tokens=8)
    with pytest.raises(ContextLengthExceeded, match="context window of 512"):
        list(plain_external.generate(long))
    # The server's own refusal (a prompt past its slot) maps to the same error, with its message.
    with pytest.raises(ServerHTTPError) as info:
        plain_external.server.request("POST", "/completion", {"prompt": [1] * 700, "n_predict": 1})
    assert isinstance(engine_error(info.value), ContextLengthExceeded)
    assert plain_external.server.running and plain_external.server.request("GET", "/health")[0] == 200
    _, done = _run(plain_external, GenerationRequest(prompt="Hello", max_tokens=2))
    assert len(done.summary.tokens) == 2


def test_engine_and_cli_run_on_the_external_server(target: str, server_binary: str, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from app.calibration.runner import default_plan, run_calibration
    from app.cli import main

    with Engine(_config(target, server_binary)) as engine:
        summary = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=4))
        assert len(summary.tokens) == 4 and summary.dynamic_draft["runtime"]["kind"] == "llama-server"  # type: ignore[index]
        assert engine.call(lambda s: s.n_ctx) == 512
        # The in-process sweep (the pool, the cost stop, settings per request) refuses a server's start flags.
        with pytest.raises(EngineError, match="takes draft settings as start flags"):
            engine.call(lambda s: run_calibration(s, default_plan(s)))
    argv = ["generate", "--model", target, "--server-binary", server_binary, "--prompt", "Hi", "--max-tokens", "3"]
    argv += ["--temperature", "0", "--ctx-size", "512", "--threads", "1", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["tokens"]) == 3 and out["dynamic_draft"]["runtime"]["build"]


# A template unlike SmolLM2's own, so whichever one was applied shows in the prompt.
MARKED_TEMPLATE = (
    "{% for m in messages %}[[{{ m['role'] }}]] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[[assistant]] {% endif %}"
)


def test_a_chat_template_file_reaches_the_server(target: str, server_binary: str) -> None:
    """--chat-template-file with --server-binary: the server applies the given template (not the GGUF's), its
    /props names it, and the prompt is the very one the bundled runtime makes with the same template."""
    request = GenerationRequest(messages=MESSAGES, max_tokens=4, cache_prompt=False)
    local = Session(_config(target, None, chat_template=MARKED_TEMPLATE))
    try:
        local_prompt = local.format_prompt(request)
    finally:
        local.close()
    s = ExternalSession(_config(target, server_binary, chat_template=MARKED_TEMPLATE))
    try:
        tokens, text = s.templated(request)
        assert text.startswith("[[user]] Name three colours") and text.endswith("[[assistant]] ")
        assert tokens == local_prompt
        assert s.model_meta().chat_template == MARKED_TEMPLATE  # what the server reports, not what was asked
        assert "--chat-template-file" in s.server.logs().splitlines()[0]
        template = s.server.template_file()
        assert template is not None and template.read_text() == MARKED_TEMPLATE
    finally:
        s.close()


def test_a_build_without_chat_template_file_refuses_a_template(tmp_path: Path, target: str) -> None:
    """An old build cannot take the template: said before anything starts, not silently served with the GGUF's."""
    old = tmp_path / "llama-server"
    old.write_text("#!/bin/sh\necho 'usage: llama-server --model FNAME --port PORT --chat-template JINJA'\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(ExternalServerError, match="no --chat-template-file option"):
        ExternalServer(ServerSpec(binary=str(old), model=target, chat_template=MARKED_TEMPLATE)).start()


def test_the_external_runtime_tokenizes_and_describes_its_model_as_the_bundled_one(
    target: str, plain_external: ExternalSession
) -> None:
    """Its Tokenizer (the server's /tokenize and /detokenize) and its model_meta (the GGUF's header) agree with the
    bundled runtime's on the same file."""
    local = Session(_config(target, None))
    try:
        text = "Hello, llamas: naïve café, 🦙 and <|im_start|> too."  # the emoji is split across tokens
        want = local.tokenizer().tokenize(text, False, True)
        pieces = local.tokenizer().pieces(text, False, True)
        meta = local.model_meta()
    finally:
        local.close()
    tok = plain_external.tokenizer()
    assert tok.tokenize(text, False, True) == want
    assert tok.pieces(text, False, True) == pieces  # exact bytes, halves of the emoji too
    assert tok.detokenize(want, special=True) == text
    ext = plain_external.model_meta()
    assert (ext.n_vocab, ext.n_ctx_train, ext.n_params) == (meta.n_vocab, meta.n_ctx_train, meta.n_params)
    with pytest.raises(ValueError):
        tok.detokenize([-1])


def test_token_id_and_raw_prompts_and_the_template_match_the_bundled_runtime(
    target: str, plain_external: ExternalSession
) -> None:
    """A raw prompt's special tokens parsed, token-id prompts used as they are, an id outside the vocabulary refused
    before the server sees it, and render_prompt (the server's /apply-template) as the bundled runtime renders."""
    raw = GenerationRequest(prompt="<|im_start|>user\nHi<|im_end|>\n", max_tokens=6, cache_prompt=False)
    chat = GenerationRequest(messages=MESSAGES, max_tokens=6, cache_prompt=False)
    local = Session(_config(target, None))
    try:
        want_raw, want_text = local.format_prompt(raw), local.render_prompt(chat)
        n_vocab = local.model.vocab.n_vocab
    finally:
        local.close()
    assert plain_external.format_prompt(raw) == want_raw and len(want_raw) == 6  # two of them control tokens
    assert plain_external.render_prompt(chat) == want_text
    _, by_text = _run(plain_external, raw)
    _, by_ids = _run(plain_external, replace(raw, prompt=tuple(want_raw)))
    assert by_ids.summary.text == by_text.summary.text and by_ids.summary.prompt_tokens == len(want_raw)
    with pytest.raises(InvalidToken, match=f"prompt.1: {n_vocab} is not a token of this model"):
        _run(plain_external, replace(raw, prompt=(1, n_vocab)))
    assert plain_external.server.running


def test_a_chat_longer_than_the_window_leaves_out_its_oldest_turns_there_too(plain_external: ExternalSession) -> None:
    turn = "The quick brown fox jumps over the lazy dog near the river bank. " * 12
    msgs: list[dict[str, str]] = [{"role": "system", "content": "You are terse."}]
    for i in range(4):
        msgs += [{"role": "user", "content": f"{i}: {turn}"}, {"role": "assistant", "content": "Noted."}]
    msgs.append({"role": "user", "content": "Which was last?"})
    request = GenerationRequest(messages=tuple(msgs), max_tokens=8, cache_prompt=False)
    with pytest.raises(ContextLengthExceeded):  # the default, as llama-server itself
        _run(plain_external, request)
    _, done = _run(plain_external, replace(request, context_overflow="drop_oldest"))
    assert done.summary.dropped_messages > 0 and done.summary.prompt_tokens + 8 <= 512
