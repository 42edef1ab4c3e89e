"""Raw text prompts as llama-server reads them, on a real Session of a tiny Llama that adds a BOS: special tokens'
text parsed as those tokens, one BOS whether or not the text starts with it, so the chat template's text (what
/apply-template returns) gives the very tokens of the chat request."""

from __future__ import annotations

from pathlib import Path

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import GenerationRequest
from tests.engine.tiny_gguf import write_tiny_llama

BOS_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


def test_raw_prompts_get_one_bos_and_their_special_tokens(tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "tiny-llama.gguf", seed=5)
    s = Session(EngineConfig(model=str(path), n_ctx=256, n_threads=1, chat_template=BOS_TEMPLATE))
    try:
        vocab = s.model.vocab
        assert vocab.add_bos and vocab.bos == 1 and vocab.eos == 2
        plain = s.format_prompt(GenerationRequest(prompt="hello there"))
        assert plain[0] == vocab.bos and vocab.bos not in plain[1:]
        written = s.format_prompt(GenerationRequest(prompt="<s>hello there"))
        assert written == plain  # the text's own BOS, not a second one
        assert vocab.eos in s.format_prompt(GenerationRequest(prompt="hello</s>"))  # parsed, not spelled out
        chat = GenerationRequest(messages=({"role": "user", "content": "hello there"},))
        text = s.render_prompt(chat)
        assert text.startswith("<s>[user] hello there</s>")
        assert s.format_prompt(GenerationRequest(prompt=text)) == s.format_prompt(chat)
    finally:
        s.close()
