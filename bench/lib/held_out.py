"""The held-out prompts of the class benchmarks (bench_classes.py and the scripts that reuse its prompts and traces):
chat, code, copy-edit and structured requests written for the benchmarks, none of them calibration text; their order
one class after another; the trace names of the calibration prompts; what the detectors say of each prompt."""

from __future__ import annotations

_EDIT_CODE = """def load_scores(path):
    scores = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, value = line.split(",")
            scores[name] = int(value)
    return scores


def best_players(scores, count=3):
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    return [name for name, _ in ranked[:count]]


def average(scores):
    if not scores:
        return 0.0
    return sum(scores.values()) / len(scores)


def report(path):
    scores = load_scores(path)
    print("players:", len(scores))
    print("average:", round(average(scores), 2))
    for name in best_players(scores):
        print("top:", name, scores[name])
"""

_EDIT_PROSE = (
    "Our team spent the last quater rebuilding the onboarding flow for new customers. The old flow asked for ten "
    "peices of information before showing anything useful, and most people gave up half way. The new flow asks for "
    "an email adress and a password, then lets people explore a demo project straight away; the remaining details "
    "are requested later, when they are actualy needed. Early numbers are encouraging: the share of visitors who "
    "finish signing up rose from 31 to 47 percent, and support tickets about the sign-up page dropped by a third. "
    "We still have work to do on the mobile version, where the keyboard hides the submit button on smaller "
    "screens, and on the welcome email, which many people never recieve because it lands in their spam folder."
)

_JS = """function groupBy(items, key) {
  const out = {};
  for (const item of items) {
    const k = item[key];
    if (!(k in out)) {
      out[k] = [];
    }
    out[k].push(item);
  }
  return out;
}

function countBy(items, key) {
  const groups = groupBy(items, key);
  const counts = {};
  for (const k of Object.keys(groups)) {
    counts[k] = groups[k].length;
  }
  return counts;
}

module.exports = { groupBy, countBy };
"""

_ORDER_TEXT = (
    "Hello, this is Jonas Berg from Lakeside Bakery. I would like to order 40 sourdough loaves, 120 croissants and "
    "two trays of cinnamon buns for Friday 12 September, delivered to 18 Harbour Lane before 7 am. Please invoice "
    "the bakery as usual; our order reference is LB-2291. If the croissants are not possible, 80 pains au chocolat "
    "would also work. My phone number is 555-0142 if anything is unclear."
)

_FETCH = """import json
from urllib.request import Request, urlopen


def fetch_json(url, headers=None):
    request = Request(url, headers=headers or {})
    with urlopen(request) as response:
        body = response.read().decode("utf-8")
    return json.loads(body)


def fetch_all(urls):
    results = {}
    for url in urls:
        results[url] = fetch_json(url)
    return results
"""

_WINDOWS = """def moving_sums(values, width):
    \"\"\"Sum of every window of `width` consecutive values, in order.\"\"\"
    sums = []
    for start in range(len(values) - width):
        window = values[start:start + width]
        sums.append(sum(window))
    return sums


def peak_window(values, width):
    sums = moving_sums(values, width)
    best = max(range(len(sums)), key=sums.__getitem__)
    return best, sums[best]
"""

_CONFIG = """DEFAULTS = {
    "port": 8080,
    "host": "127.0.0.1",
    "workers": 4,
}


def main():
    config = load_config("settings.ini")
    serve(config["host"], config["port"], config["workers"])


def serve(host, port, workers):
    print(f"serving on {host}:{port} with {workers} workers")


def load_config(path):
    config = dict(DEFAULTS)
    with open(path) as f:
        for line in f:
            key, _, value = line.partition("=")
            if key.strip() in config:
                config[key.strip()] = type(DEFAULTS[key.strip()])(value.strip())
    return config
"""

_SHORT = """```python
def sum_prices(items):
    tmp = 0
    for item in items:
        tmp += item.price * item.qty
    return tmp
```"""

HELD_OUT: list[tuple[str, str, str]] = [
    # (name, expected class, user message)
    ("chat-tcp", "chat", "Explain the difference between TCP and UDP to a beginner, with an everyday analogy."),
    ("chat-sleep", "chat", "What are some practical tips for sleeping better when working night shifts?"),
    ("chat-history", "chat", "Tell me briefly how the printing press changed Europe in the fifteenth century."),
    ("code-merge", "code", "Write a Python function that merges two sorted lists into one sorted list, with a "
     "docstring and a short example."),
    ("code-lru", "code", "Implement an LRU cache class in Python with get and put methods, both O(1)."),
    ("code-sql", "code", "Write an SQL query that returns, for each customer, the total of their orders in 2025, "
     "highest first, from tables customers(id, name) and orders(id, customer_id, amount, created_at)."),
    ("edit-rename", "copy_edit", "Rename the function `average` to `mean_score` everywhere in this code and return "
     "the full file, nothing else:\n\n" + _EDIT_CODE),
    ("edit-typos", "copy_edit", _EDIT_PROSE + "\n\nFix the spelling mistakes in the text above and return the "
     "corrected text in full, nothing else."),
    ("edit-js", "copy_edit", _JS + "\nAdd JSDoc comments to every function above and return the whole updated "
     "file."),
    ("edit-param", "copy_edit", "Add a `timeout` parameter (in seconds, default 10) to `fetch_json`, pass it to "
     "`urlopen`, and let `fetch_all` take and forward it too. Return the whole updated file.\n\n" + _FETCH),
    ("edit-bug", "copy_edit", _WINDOWS + "\nThere is an off-by-one bug: the last window is never summed. Fix it "
     "and return the full corrected code."),
    ("edit-reorder", "copy_edit", "Reorder this module so that every function is defined before the function that "
     "calls it (main last), and return the whole file, otherwise unchanged:\n\n" + _CONFIG),
    ("edit-short", "copy_edit", "Rename `tmp` to `total` and return the whole function.\n\n" + _SHORT),
    ("json-order", "structured", _ORDER_TEXT + '\n\nReturn this order as a JSON object with the keys "customer", '
     '"items" (a list of {"product", "quantity"}), "date", "address" and "reference". Respond with JSON only.'),
    ("json-fruits", "structured", "Give me a JSON array of five fruits, each an object with the keys name, colour "
     "and season. Output valid JSON only."),
    ("json-meeting", "structured", "Turn this into JSON with keys title, date, attendees (list) and decisions "
     "(list): Weekly sync, 3 March. Present: Ana, Li, Omar. Decided to move the release to Tuesday and to hire "
     "a second designer. Respond with JSON only."),
]  # fmt: skip


def interleaved() -> list[tuple[str, str, str]]:
    """The held-out prompts one class after another (chat, code, copy_edit, structured, chat, ...), so a run cut
    short still holds every class."""
    by_class: dict[str, list[tuple[str, str, str]]] = {}
    for p in HELD_OUT:
        by_class.setdefault(p[1], []).append(p)
    lanes = list(by_class.values())
    return [lane[i] for i in range(max(map(len, lanes))) for lane in lanes if i < len(lane)]


def calib_name(content_class: str, k: int = 0) -> str:
    """The trace name of a class's k-th calibration prompt: "calib-code", then "calib-code~1", "calib-code~2"."""
    return f"calib-{content_class}" + (f"~{k}" if k else "")


def held_out_classes() -> dict[str, tuple[str, str | None]]:
    """What the detectors say of each held-out prompt: (class, sub-class or None)."""
    from app.policy.edit_kind import classify_request

    out = {}
    for name, _, user in HELD_OUT:
        rc = classify_request(user, user)
        out[name] = (rc.content_class, rc.subclass)
    return out
