"""Chat templating with the model's own Jinja template, and streaming text output (UTF-8 safe, stop strings)."""

from __future__ import annotations

import codecs
import datetime as _dt
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.chat_format import render_call, tojson, tools_instruction

# Used only when a GGUF carries no template at all (rare for instruct models).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class TemplateError(ValueError):
    """The chat template failed to render these messages (its own `raise_exception`, or a syntax error)."""


def _raise(message: str) -> None:
    raise TemplateError(message)


@lru_cache(maxsize=8)
def _compile(source: str) -> jinja2.Template:
    # HF templates are written for a sandboxed Jinja with these helpers and trimmed blocks.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, loader=jinja2.BaseLoader())
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: _dt.datetime.now().strftime(fmt)
    env.filters["tojson"] = tojson  # plain JSON, as transformers and llama.cpp print it
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"chat template does not parse: {e}") from e


def _with_tools(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the tools described in the system message (added first when there is none)."""
    out = [dict(m) for m in messages]
    for m in out:  # calls in the history, written as the model was asked to write them
        for call in m.pop("tool_calls", None) or ():
            fn = call.get("function") or call
            m["content"] = f"{m.get('content') or ''}\n{render_call(fn.get('name'), fn.get('arguments'))}".lstrip()
    text = tools_instruction(tools)
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{text}".lstrip()
    else:
        out.insert(0, {"role": "system", "content": text})
    return out


def render_chat(
    template: str | None,
    messages: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    tools: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Render OpenAI-style messages with the model's template, as llama.cpp's server does with --jinja.

    `tools` (OpenAI tool definitions) and `extra` (chat_template_kwargs, e.g. enable_thinking) are template
    variables; `extra` cannot replace the messages or the special tokens.
    """
    source = template or CHATML
    tmpl = _compile(source)
    if tools and "tools" not in source:
        messages = _with_tools(messages, tools)  # llama.cpp's server does the same for templates without tools
    try:
        variables = dict(extra or {})
        variables.update(
            messages=[dict(m) for m in messages],
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            tools=[dict(t) for t in tools] if tools else None,
        )
        return tmpl.render(variables)
    except TemplateError:
        raise
    except jinja2.TemplateError as e:
        raise TemplateError(f"chat template failed: {e}") from e


class TextStream:
    """Turns token bytes into text pieces: never splits a UTF-8 character, and holds back a possible stop string.

    `push` returns the text that is safe to show now; `stopped` turns true when a stop string appeared (the text
    before it is all that is ever shown).
    """

    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = tuple(stop)
        self._pending = ""  # decoded but not yet released (could start a stop string)
        self.text = ""  # everything released so far
        self.stopped = False
        self.stopped_by = ""  # the stop string that appeared

    def push(self, data: bytes) -> str:
        if self.stopped:
            return ""
        self._pending += self._decoder.decode(data)
        return self._release(final=False)

    def flush(self) -> str:
        """Release what is held at the end. An incomplete trailing character (cut by max_tokens) is dropped."""
        if self.stopped:
            return ""
        self._decoder.reset()
        return self._release(final=True)

    def _release(self, final: bool) -> str:
        buf = self._pending
        cut = -1
        for s in self._stop:
            i = buf.find(s)
            if i != -1 and (cut == -1 or i < cut):
                cut, self.stopped_by = i, s
        if cut != -1:
            self.stopped = True
            out, self._pending = buf[:cut], ""
            self.text += out
            return out
        hold = 0 if final else self._partial_stop_len(buf)
        out = buf[: len(buf) - hold]
        self._pending = buf[len(buf) - hold :]
        self.text += out
        return out

    def _partial_stop_len(self, buf: str) -> int:
        """Length of the longest suffix of `buf` that is a proper prefix of some stop string."""
        best = 0
        for s in self._stop:
            for k in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:k]):
                    best = k
                    break
        return best


def adds_bos(text: str, add_bos: bool, bos_text: str) -> bool:
    """Whether tokenizing a rendered chat needs the BOS added: not when the template already wrote it."""
    return add_bos and not (bos_text and text.startswith(bos_text))
