"""The request's content class (chat, code, copy_edit, structured) from its templated prompt: cheap rules, no model.

Why classes: which draft setting wins depends on what the output will look like. Reproducing a block the prompt
already holds (rename a variable, fix typos, "return the full file") makes prompt lookup accept long runs; fresh
code is where a draft model of the same family earns its keep and lookup mostly wastes verify rows; JSON has
boilerplate (keys, quotes, brackets) that both drafters predict well; free prose is the hardest to draft. So Dynamic
Draft keeps a frontier per (context range, class) and this module decides the class of each request.

How each class is detected, in this order (the first that fires wins):

1. ``structured``: the request itself constrains the output (tools, a grammar, ``response_format``): the caller
   says so with ``structured_request``. Such output is shaped by the constraint whatever the prompt says.
2. ``copy_edit``: the prompt carries a block (at least ``MIN_BLOCK_CHARS``) and the instruction asks to hand it
   back changed: rename, refactor, fix typos/bugs, proofread, rewrite/translate/edit "this", add docstrings or type
   hints, "return the full/updated file", "in full". The output then repeats long stretches of the prompt (high
   n-gram overlap), which is what prompt lookup needs. Checked before JSON: "add a key to this package.json and
   return the whole file" is a reproduction, not fresh JSON. A short request counts too when its block is set
   apart (a code fence, or lines after/before a one-line instruction) and holds at least ``MIN_SHORT_BLOCK_CHARS``:
   "Rename `tmp` to `total` and return the whole function" with a 5-line snippet reproduces that snippet just the
   same, only for fewer tokens. A short block beside a fresh-code instruction ("write a function like this one")
   stays ``code``: there the block is an example, not what the answer hands back.
3. ``structured``: the instruction demands JSON output ("return ... as JSON", "respond with a JSON object", "valid
   JSON", "matching this schema"). Mentioning JSON is not enough ("how do I parse JSON?" is code).
4. ``copy_edit`` again, for retrieval: a block plus "quote", "extract", "verbatim", "word for word", "copy the
   lines": the answer is cut out of the prompt.
5. ``code``: a code fence, a code-writing instruction ("write a function/script/query/tests ..."), at least two
   lines that start like code (``def``, ``import``, ``#include``, ``const`` ...), or a high density of code
   punctuation in the last part of the request.
6. ``chat``: everything else.

Cost: the rules read bounded windows only (the start and end of the last user turn, ``WINDOW_CHARS`` each, and the
end of the whole prompt), so a 32k-token prompt costs what a short one does; bench/dynamic_draft/bench_policy.py
prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

ContentClass = Literal["chat", "code", "copy_edit", "structured"]
CONTENT_CLASSES: Final[tuple[str, ...]] = ("chat", "code", "copy_edit", "structured")
"""Every class, in a fixed order; other modules key per-class data by these strings."""
CHAT, CODE, COPY_EDIT, STRUCTURED = CONTENT_CLASSES
SUBCLASSES: Final[dict[str, str]] = {"near_copy": COPY_EDIT, "additive": COPY_EDIT}
"""Sub-class -> its class. copy_edit splits by how much of the answer the prompt holds (app.policy.edit_kind):
``near_copy`` hands the block back retouched (rename, typos, reorder), ``additive`` writes new text into it (add a
parameter, docstrings, fix a bug). A sub-class has rows of its own; without them its class's rows decide."""
NEAR_COPY, ADDITIVE = SUBCLASSES
TABLE_CLASSES: Final[tuple[str, ...]] = (*CONTENT_CLASSES, *SUBCLASSES)
"""Every name a frontier table's rows may carry: the classes, then the sub-classes."""

WINDOW_CHARS = 500
"""Characters read at the start and at the end of the instruction text; instructions sit before or after a block."""
MIN_BLOCK_CHARS = 400
"""A request this long holds a block worth reproducing (~100 tokens) wherever its instruction sits."""
MIN_SHORT_BLOCK_CHARS = 80
"""A set-apart block this long (~20-25 tokens, three or four lines of code) is still worth reproducing by lookup;
below it ("fix this sentence", a one-line snippet) the copy is a handful of tokens and no setting changes much."""
LONG_PROMPT_CHARS = 1500
"""A prompt this long holds a block somewhere (an earlier turn) even when the last message is short."""
CODE_DENSITY = 0.04
"""Share of code punctuation above which text reads as code (prose has ~0.5-1%, Python 5-10%)."""
_NOT_CODE_PUNCT = str.maketrans("", "", "{}();=<>[]_#")


def code_density(text: str) -> float:
    """Share of `text`'s characters that are code punctuation (compared with CODE_DENSITY); 0 for empty text."""
    return (len(text) - len(text.translate(_NOT_CODE_PUNCT))) / len(text) if text else 0.0


# Punctuation to spaces before the text is split into trigger words, so that "Quote, word for word", "Rename:",
# "(extract ...)" and "`fix`" still show their word; the hyphen is kept ("copy-edit", "word-for-word", "off-by-one").
_WORD_PUNCT = str.maketrans({c: " " for c in "`'\",.:;!?()[]{}<>*/\\|=+#"})


def words_of(text: str) -> set[str]:
    """The words of (lower-cased) `text` that the trigger sets are matched against: split on whitespace and
    punctuation. (The code-token rule reads whitespace-split tokens instead: there the punctuation is the signal.)"""
    return set(text.translate(_WORD_PUNCT).split())


# Cue names: what fired, for the decision record (why this class).
Cue = Literal[
    "request_constrained",
    "edit_instruction",
    "json_instruction",
    "quote_instruction",
    "code_fence",
    "code_instruction",
    "code_tokens",
    "code_density",
    "default",
]

# Speed: CPython's regex engine tries an alternation at every position (~40 us for 1,000 characters without a
# match), so no pattern scans a window. A set of the window's words says which trigger words occur; only then
# is a phrase pattern tried, on a few dozen characters around each occurrence of its trigger.
_EDIT_VERBS = frozenset(
    [
        "rename",
        "renaming",
        "refactor",
        "reformat",
        "proofread",
        "copy-edit",
        "copyedit",
        "rewrite",
        "repeat",
        "reproduce",
        "translate",
        "revise",
        "paraphrase",
        "reword",
        "polish",
        "shorten",
        "edit",
        "fix",
        "correct",
        "convert",
        "port",
        "add",
        "apply",
        "replace",
        "change",
        "swap",
    ]
)
_EDIT_VERB = re.compile(
    r"(?:rename|renaming|refactor|reformat|proofread|copy-?edit)\b"
    r"|(?:fix|correct) (?:the |any |all |every |these |those |its |my )?(?:typo|spelling|grammar|bug|mistake|error"
    r"|indentation|punctuation)"
    r"|(?:rewrite|translate|edit|revise|paraphrase|polish|shorten|reword|convert|port) (?:this|these|it|that|my"
    r"|above|below|following|the (?:above|following|code|text|file|function|paragraph|document|script|email|letter"
    r"|class|module|snippet|passage))\b"
    r"|add (?:type hints|type annotations|docstrings?|comments|logging|error handling) to\b"
    # "Repeat it with type hints added": the block comes back, changed
    r"|(?:repeat|reproduce|rewrite) (?:it|this|that|the (?:code|function|text|file|class|snippet|script)) with\b"
    r"|apply (?:the|these|this|my) (?:change|patch|diff|edit)"
    r"|(?:replace|change|swap) (?:every|all|each)\b"
)
_FULL_WORDS = frozenset(
    ["full", "whole", "entire", "complete", "updated", "corrected", "revised", "edited", "modified", "fixed"]
)
_FULL = re.compile(
    r"\b(?:return|give|output|show|send|print|reproduce|repeat|write out|rewrite|paste)\b[^.\n]{0,40}"
    r"\b(?:full|whole|entire|complete|updated|corrected|revised|edited|modified|fixed)\b[^.\n]{0,12}"
    r"\b(?:file|code|text|document|function|program|script|class|module|version|listing|paragraph|essay|email"
    r"|letter|config|thing|source)"
)
_EDIT_PHRASES = ("in full", "otherwise unchanged", "unchanged otherwise", "keep everything else")
_JSON = re.compile(
    r"\b(?:return|respond|reply|answer|output|format(?:ted)?|produce|emit|print|provide|generate|give|serialize"
    r"|structured?|list (?:them|it|these|those)|as|in|into)\b[^.\n?]{0,60}\bjson\b(?! (?:file|files|parser|parsing"
    r"|library|module|data is))"
    r"|\bvalid json\b|\bonly json\b|\bjson only\b"
)
_SCHEMA = re.compile(
    r"\b(?:matching|following|conforming to|according to|that follows|valid against)\b[^.\n]{0,30}"
    r"\bschema\b"
)
_QUOTE_WORDS = frozenset(["quote", "verbatim", "word-for-word", "word", "copy", "extract", "exact"])
_QUOTE = re.compile(
    r"(?:quote|verbatim|word-for-word|word for word|copy (?:the|out|every|all)|extract (?:the|every|all|each)"
    r"|exact (?:sentence|words|wording|line|passage))"
)
_CODE_VERBS = frozenset(
    [
        "write",
        "implement",
        "create",
        "generate",
        "code",
        "build",
        "fix",
        "debug",
        "optimize",
        "optimise",
        "complete",
        "finish",
        "how",
    ]
)
_CODE_ASK = re.compile(
    r"(?:write|implement|create|generate|code|build|fix|debug|optimi[sz]e|complete|finish"
    r"|how (?:do|can|should|would) (?:i|you|we)|how to)\b[^.\n?]{0,60}"
    r"\b(?:function|method|class (?:that|which|for|to|named|called)|script|program|module|snippet|sql|query|regex"
    r"|unit tests?|test cases?|pytest|endpoint|algorithm|code|cli|parser|component|dockerfile|makefile"
    r"|bash|shell command|linked list|data structure|python|rust|javascript|typescript|java|c\+\+|golang|kotlin"
    r"|swift|ruby|php|haskell|scala)\b"
)
# Tokens (as whitespace alone splits them) that prose practically never has; two different ones make a code window.
_CODE_TOKENS = frozenset(
    [
        "def",
        "elif",
        "lambda",
        "#include",
        "const",
        "fn",
        "func",
        "struct",
        "impl",
        "=>",
        "==",
        "!=",
        "+=",
        "-=",
        "&&",
        "||",
        "{",
        "}",
        "};",
        "});",
        ");",
        "():",
        "):",
        "self,",
        "(self):",
        "import",
        "nullptr",
        'println!("{}",',
        "console.log(",
        'printf("%d\\n",',
        "__init__(self,",
        "return;",
    ]
)


def _near(text: str, trigger: str, pattern: re.Pattern[str], before: int, after: int) -> bool:
    """Whether `pattern` matches in a small slice around some occurrence of `trigger` in `text`."""
    i = text.find(trigger)
    while i >= 0:
        if pattern.search(text, max(0, i - before), i + len(trigger) + after):
            return True
        i = text.find(trigger, i + 1)
    return False


def _any_near(text: str, words: frozenset[str], found: set[str], pattern: re.Pattern[str], after: int) -> bool:
    return any(_near(text, w, pattern, 0, after) for w in words.intersection(found))


_FRESH_CODE_VERBS = frozenset(["write", "implement", "create", "generate"])


def _set_apart_block_chars(body: str) -> int:
    """Characters of the block a short request sets apart from its instruction: inside its outermost code fences,
    else the body less its shorter end line (the one-line instruction before or after the block; when the block's
    own end line is the shorter, the instruction line is counted in, a small over-estimate); 0 for one line.
    Only called on bodies shorter than MIN_BLOCK_CHARS, so its scans cost nothing."""
    i = body.find("```")
    j = body.rfind("```")
    if j > i >= 0:
        return j - body.find("\n", i, j) if "\n" in body[i:j] else 0
    first = body.find("\n")
    if first < 0:
        return 0
    last = len(body) - body.rfind("\n") - 1
    return len(body) - min(first, last)


def asks_for_edit(ask: str, words: set[str]) -> bool:
    """Whether lower-cased text `ask` (its `words_of` given) carries an edit instruction: rule 2's
    wording, without its block condition."""
    return (
        _any_near(ask, _EDIT_VERBS, words, _EDIT_VERB, 60)
        or (not _FULL_WORDS.isdisjoint(words) and any(_near(ask, w, _FULL, 60, 30) for w in _FULL_WORDS & words))
        or any(p in ask for p in _EDIT_PHRASES)
    )


def classify(text: str, focus: str | None = None, structured_request: bool = False) -> tuple[str, Cue]:
    """(class, cue) for a prompt: `text` is the whole templated prompt; `focus` the last user turn (or the raw
    prompt), where the instruction is; `structured_request`: the request carries tools, a grammar or a
    response_format. See the module docstring for the rules."""
    if structured_request:
        return STRUCTURED, "request_constrained"
    body = text if focus is None else focus
    n = len(body)
    window = body if n <= 2 * WINDOW_CHARS else body[:WINDOW_CHARS] + "\n" + body[-WINDOW_CHARS:]
    ask = window.lower()
    words = words_of(ask)
    has_block = n >= MIN_BLOCK_CHARS or len(text) >= LONG_PROMPT_CHARS
    if not has_block and _set_apart_block_chars(body) >= MIN_SHORT_BLOCK_CHARS:
        # a short block counts unless the instruction asks for fresh code (the block is then an example)
        fresh = _any_near(ask, _FRESH_CODE_VERBS, words, _CODE_ASK, 90)
        has_block = not fresh
    if has_block and asks_for_edit(ask, words):
        return COPY_EDIT, "edit_instruction"
    if "json" in ask and _near(ask, "json", _JSON, 75, 20):
        return STRUCTURED, "json_instruction"
    if "schema" in ask and _near(ask, "schema", _SCHEMA, 50, 10):
        return STRUCTURED, "json_instruction"
    if has_block and _any_near(ask, _QUOTE_WORDS, words, _QUOTE, 30):
        return COPY_EDIT, "quote_instruction"
    if "```" in ask or "```" in text[-WINDOW_CHARS:]:
        return CODE, "code_fence"
    if not _CODE_VERBS.isdisjoint(words) and _any_near(ask, _CODE_VERBS, words, _CODE_ASK, 90):
        return CODE, "code_instruction"
    if len(_CODE_TOKENS.intersection(ask.split())) >= 2:
        return CODE, "code_tokens"
    if code_density(window) > CODE_DENSITY:
        return CODE, "code_density"
    return CHAT, "default"


@dataclass(frozen=True)
class RequestClass:
    """What Dynamic Draft decides a request's frontier on: its class and the cue that decided it (`classify`), and
    for copy_edit its sub-class and that cue (app.policy.edit_kind; None when the wording says neither)."""

    content_class: str
    cue: str
    subclass: str | None = None
    subclass_cue: str | None = None


def class_key(content_class: str, subclass: str | None = None) -> str:
    """The name per-class data (source memory, statistics) is kept under: "copy_edit/near_copy" for a known
    sub-class of that class, else the class alone. Only SUBCLASSES' names pass, so the set stays small and fixed."""
    return f"{content_class}/{subclass}" if subclass and SUBCLASSES.get(subclass) == content_class else content_class


def content_class(text: str, focus: str | None = None, structured_request: bool = False) -> str:
    """The class alone (see `classify`)."""
    return classify(text, focus, structured_request)[0]


def last_user_text(messages: tuple[dict[str, object], ...] | None, prompt: str | None) -> str | None:
    """The instruction text of a request: its last user message (chat) or its raw prompt."""
    if messages is None:
        return prompt
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return str(m["content"])
    return None
