"""The content-class detector on labelled prompts, through the same templated text the engine classifies."""

from __future__ import annotations

from importlib import resources

import pytest

from app.policy.content_class import CONTENT_CLASSES, classify, content_class, last_user_text

_CORPUS = resources.files("app.calibration") / "corpus"
CODE_BLOCK = (_CORPUS / "code.txt").read_text(encoding="utf-8")[:1800]
PROSE_BLOCK = (_CORPUS / "prose.txt").read_text(encoding="utf-8")[:1800]
MINUTES = (_CORPUS / "structured.txt").read_text(encoding="utf-8")[:1500]
SHORT_FN = (
    "```python\ndef sum_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price * item.qty\n"
    "    return tmp\n```"
)


def _chat(user: str, system: str = "You are a helpful assistant.") -> str:
    """A ChatML-templated prompt, as Qwen's template renders one system + one user turn."""
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


# (user message, expected class, why it is here)
LABELLED: list[tuple[str, str, str]] = [
    ("Hi! How are you today?", "chat", "small talk"),
    ("Explain in a few paragraphs why the sky is blue.", "chat", "explanation"),
    ("What are the pros and cons of living in a big city?", "chat", "opinion"),
    ("Explain what JSON is and why web APIs use it.", "chat", "mentions JSON, asks for prose"),
    (PROSE_BLOCK + "\n\nSummarise the text above in three sentences.", "chat", "long block, summary is fresh prose"),
    ("Write a short story about a class trip to the seaside.", "chat", "'write' + 'class' but a story"),
    ("Let me know when you return from the trip; we can import the photos then.", "chat", "code-like words"),
    ("Write a Python function that merges two sorted lists.", "code", "code-writing instruction"),
    ("Implement a binary search tree with insert and search in Rust.", "code", "code-writing instruction"),
    ("How do I parse JSON in Python?", "code", "JSON mentioned, no JSON output; 'parse' question"),
    ("Why does this fail?\n```python\nprint(undefined_name)\n```", "code", "short fenced code, no edit"),
    (CODE_BLOCK + "\n\nWrite pytest unit tests for the code above.", "code", "fresh code about a block"),
    ("const x = () => { return 1; };\nconsole.log( x() );", "code", "bare code, no fence"),
    (CODE_BLOCK + "\n\nRename the class `Inventory` to `Warehouse` and return the full file.", "copy_edit", "rename"),
    (PROSE_BLOCK + "\n\nCorrect any typos in the text above and return it in full.", "copy_edit", "proofread"),
    ("Fix the bug in this function and give me the whole updated code:\n" + CODE_BLOCK, "copy_edit", "before"),
    (CODE_BLOCK + "\n\nAdd type hints to every function above.", "copy_edit", "add type hints"),
    (PROSE_BLOCK + "\n\nTranslate the text above into French.", "copy_edit", "translate a block"),
    (PROSE_BLOCK + "\n\nQuote the sentence that mentions the logbooks, word for word.", "copy_edit", "quote"),
    (
        '{"name": "demo", "version": "1.0.0", "dependencies": {"left-pad": "^1.3.0"}, "scripts": {"test": "jest"}, '
        '"license": "MIT", "author": "Ada Example <ada@example.org>", "repository": "https://example.org/demo.git", '
        '"keywords": ["demo", "manifest", "example"], "description": "A small demo package used to show how a manifest can be edited without '
        'losing any of its fields or their order; nothing here matters beyond the shape."}\n\nAdd a dependency on '
        "lodash to this package.json and return the whole file.",
        "copy_edit",
        "JSON block, but a reproduction",
    ),
    (
        MINUTES + "\n\nExtract every person mentioned above and return them as a JSON array of names.",
        "structured",
        "extract as JSON",
    ),
    ("List three fruits with their colours. Respond only with JSON.", "structured", "JSON-only answer"),
    ("Give me a JSON object with keys name, age and city for a fictional person.", "structured", "JSON object"),
    (
        "Describe the weather in Paris as an object matching the following schema: "
        '{"type": "object", "properties": {"temp": {"type": "number"}}}',
        "structured",
        "schema",
    ),
    ("Convert this list to valid JSON: apples 3, pears 5, plums 12", "structured", "valid JSON"),
    ("Fix this sentence: me and him goes to school.", "chat", "an edit, but no block worth reusing"),
    # Short requests (under MIN_BLOCK_CHARS): a set-apart block the answer hands back is a copy-edit ...
    ("Rename `tmp` to `total` and return the whole function.\n\n" + SHORT_FN, "copy_edit", "short rename, fenced"),
    (
        "Fix the bug in this function:\n```js\nfunction lastItem(arr) {\n  if (arr.length === 0) return null;\n"
        "  return arr[arr.length];\n}\n```",
        "copy_edit",
        "short bug fix, fenced",
    ),
    (
        "Add type hints to this function:\ndef scale(values, factor):\n    out = []\n    for v in values:\n"
        "        out.append(v * factor)\n    return out",
        "copy_edit",
        "short, unfenced lines after the instruction",
    ),
    (
        "Proofread this paragraph and return it corrected:\nThe meeting have been moved to thursday becuase the room "
        "was double-booked; please tell everyone on you're team and bring the updated agenda.",
        "copy_edit",
        "short prose paragraph",
    ),
    # ... but a short block beside a fresh-code ask is an example, and a one-line snippet is too small to matter.
    (
        "Write a function that does the same for dictionaries and return the complete code:\n" + SHORT_FN,
        "code",
        "short fresh code about a snippet, 'complete code'",
    ),
    ("Rename `x` to `count`:\n```python\nx = 0\nx += 1\n```", "code", "edit of a tiny snippet"),
    ("Write a recursive version of this:\n```python\ndef f(n): return n\n```", "code", "tiny snippet, fresh"),
    (
        CODE_BLOCK + "\n\nExplain what the code above does.",
        "code",
        "long block, explanation of code",
    ),  # Punctuation next to a trigger word ("Quote,", "Rename:", "(Extract") must not hide it.
    (PROSE_BLOCK + "\n\nQuote, word for word, the sentence about the logbooks.", "copy_edit", "'Quote,' word for word"),
    (PROSE_BLOCK + "\n\nGive me the sentence about the logbooks, word for word.", "copy_edit", "word for word alone"),
    (PROSE_BLOCK + "\n\n(Extract the sentence about the logbooks.)", "copy_edit", "'(Extract'"),
    (CODE_BLOCK + "\n\nRename: `Inventory` -> `Warehouse`, everywhere.", "copy_edit", "'Rename:'"),
    (CODE_BLOCK + '\n\n"Refactor" this so no line is longer than 80 characters.', "copy_edit", "quoted verb"),
    ("Write, in Python, a function that merges two sorted lists.", "code", "'Write,'"),
    ("Implement: a binary search tree with insert and search, in Rust.", "code", "'Implement:'"),
    (PROSE_BLOCK + "\n\nIn a word, what is the text above about?", "chat", "'word' without a quote ask"),
    # The app's own screenshot prompt (packaging/screenshots.py) was taken for fresh code.
    (
        "Here is a Python function. Repeat it with type hints added and a docstring, nothing else.\n\n"
        "```python\ndef moving_average(values, window):\n    out = []\n"
        "    for i in range(len(values) - window + 1):\n        out.append(sum(values[i:i + window]) / window)\n"
        "    return out\n```",
        "copy_edit",
        "'repeat it with ... added'",
    ),
    ("Repeat the word hello three times.", "chat", "'repeat' without a block"),
]


def test_the_class_strings_are_the_four_named_ones() -> None:
    assert CONTENT_CLASSES == ("chat", "code", "copy_edit", "structured")


@pytest.mark.parametrize(("user", "expected", "why"), LABELLED, ids=[w for _, _, w in LABELLED])
def test_labelled_prompt(user: str, expected: str, why: str) -> None:
    text = _chat(user)
    assert content_class(text, user) == expected, classify(text, user)
    # The raw (untemplated) prompt gives the same class: nothing depends on one template's tags.
    assert content_class(user) == expected, classify(user)


def test_the_table_covers_every_class_several_times() -> None:
    counts = {c: sum(1 for _, e, _ in LABELLED if e == c) for c in CONTENT_CLASSES}
    assert len(LABELLED) >= 24 and min(counts.values()) >= 4, counts


def test_a_constrained_request_is_structured_whatever_it_says() -> None:
    assert classify(_chat("Hi!"), "Hi!", structured_request=True) == ("structured", "request_constrained")


def test_an_edit_asked_in_a_later_turn_about_an_earlier_block() -> None:
    text = _chat(CODE_BLOCK) + "Sure.<|im_end|>\n<|im_start|>user\nNow rename `sku` to `code` everywhere.<|im_end|>"
    msgs = ({"role": "user", "content": CODE_BLOCK}, {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "Now rename `sku` to `code` everywhere."})  # fmt: skip
    assert content_class(text, last_user_text(msgs, None)) == "copy_edit"


def test_an_instruction_before_a_long_block_is_read() -> None:
    block = "\n".join(f"line {i}: the quick brown fox jumps over the lazy dog" for i in range(800))  # ~40k chars
    user = "Correct the spelling in the following and return it in full:\n" + block
    assert classify(_chat(user), user) == ("copy_edit", "edit_instruction")


def test_last_user_text() -> None:
    assert last_user_text(None, "raw") == "raw"
    msgs = ({"role": "user", "content": "a"}, {"role": "assistant", "content": "b"})
    assert last_user_text(msgs, None) == "a"
    assert last_user_text(({"role": "system", "content": "s"},), None) is None
