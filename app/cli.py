"""The `dynadraft` command line: the GUI by default, and generate, serve, calibrate, pull, models, cache, bench."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app import __version__
from app.runtime import sampler_flags
from app.runtime.device import FLASH_ATTN_MODES

FLASH_ATTN_HELP = "flash attention, as llama.cpp's -fa (default: auto; recalibrate after changing it)"


def _lazy(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """Import a subcommand's implementation only when it runs, so `--help` stays fast."""

    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(module), name)(args))

    return run


BENCH_HOME = "the benchmarks live in the source repository's bench/ folder, not in an installed package: clone it, \
run scripts/setup.sh --dev there, then run `dynadraft bench NAME` inside the clone (or set DYNADRAFT_BENCH_DIR)"


def _bench_dir() -> Path | None:
    """bench/ of this checkout, of the current folder, or DYNADRAFT_BENCH_DIR; None from an install without it."""
    import os

    given = os.environ.get("DYNADRAFT_BENCH_DIR")
    for folder in (Path(given) if given else None, Path(__file__).resolve().parent.parent / "bench", Path("bench")):
        if folder is not None and (folder / "README.md").is_file():
            return folder.resolve()
    return None


def _bench_scripts(bench_dir: Path) -> dict[str, Path]:
    """The runnable benchmarks: each module of a bench/ theme folder (engine/, server/, lib/, gpu/...) that has a
    `__main__` block, by file name without .py."""
    found = {}
    for path in sorted(bench_dir.glob("*/*.py")):
        if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8", errors="replace"):
            found[path.stem] = path
    return found


def _run_bench(args: argparse.Namespace) -> int:
    import runpy

    bench_dir = _bench_dir()
    if bench_dir is None:
        print(f"dynadraft bench: {BENCH_HOME}", file=sys.stderr)
        return 2
    scripts = _bench_scripts(bench_dir)
    script = scripts.get(f"bench_{args.name}") or scripts.get(args.name)
    if script is None:
        names = sorted(stem.removeprefix("bench_") for stem in scripts)
        print(f"dynadraft bench: no benchmark {args.name!r}; available: {', '.join(names)}", file=sys.stderr)
        return 2
    root = bench_dir.parent  # the repository root: bench/ is a package there, its scripts import bench.lib
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    sys.argv = [str(script), *args.rest]
    runpy.run_module(".".join(script.relative_to(root).with_suffix("").parts), run_name="__main__", alter_sys=True)
    return 0


def _add_server_binary(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--server-binary",
        metavar="PATH",
        help="run the model(s) on this llama-server (e.g. a fork's build, for formats the bundled runtime can't "
        "load) as a managed subprocess on 127.0.0.1",
    )


def _add_profile(p: argparse.ArgumentParser) -> None:
    """The engine-profile flags, the same in every subcommand; unset flags resolve in app.engine.profile."""
    p.add_argument(
        "--ctx-size",
        type=int,
        metavar="N",
        help="context window in tokens (default: 4096; 0: the model's training context; capped at it, and rounded "
        "up to a multiple of 256, as llama.cpp does)",
    )
    p.add_argument("--batch-size", type=int, metavar="N", help="tokens per decode batch (default: 512)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads (default: one per physical core)")
    p.add_argument(
        "--gpu-layers",
        type=int,
        metavar="N",
        help="layers to offload (-1: all; default: all when a GPU is detected, else 0)",
    )
    p.add_argument("--flash-attn", choices=FLASH_ATTN_MODES, help=FLASH_ATTN_HELP)


def _budget(value: str) -> int:
    n = int(value)
    if n < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (unrestricted), 0 or more, got {n}")
    return n


def _logit_bias(value: str) -> tuple[int, float]:
    """llama-cli's --logit-bias TOKEN_ID(+/-)BIAS: "15043+1", "15043-0.5", "15043-inf" (a ban)."""
    match = re.fullmatch(r"(\d+)([+-])(inf|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)", value.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"expected TOKEN_ID(+/-)BIAS, e.g. 15043+1 or 15043-inf; got {value!r}")
    bias = float(match.group(3))
    if bias == float("inf") and match.group(2) == "+":
        raise argparse.ArgumentTypeError(f"+inf is not a bias (-inf bans a token); got {value!r}")
    return int(match.group(1)), bias if match.group(2) == "+" else -bias


def _add_reasoning_budget(p: argparse.ArgumentParser) -> None:
    """llama.cpp's reasoning-budget flags (the same names and meanings as llama-server's and llama-cli's)."""
    p.add_argument(
        "--reasoning-budget",
        type=_budget,
        metavar="N",
        help="token budget for thinking: -1 for unrestricted, 0 for immediate end, N>0 for a budget (default: -1); "
        "a request's reasoning_budget_tokens wins (bundled runtime only)",
    )
    p.add_argument(
        "--reasoning-budget-message",
        metavar="MESSAGE",
        help="text committed before the closing </think> when the budget runs out (default: none)",
    )


COST_STOP_HELP = (
    "stop each draft where one more token no longer pays: by this device's measured verify and draft costs instead of "
    "a fixed p_min (bundled runtime only)"
)


MODEL_HELP = "target GGUF model: a path, or the name of one in the models folder (its file name, or a part of it)"


def _add_generate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="generate text from a prompt (with speculative decoding)")
    p.add_argument("--model", required=True, metavar="PATH", help=MODEL_HELP)
    p.add_argument("--draft", metavar="PATH", help="draft GGUF model, path or name (same vocabulary as the target)")
    p.add_argument(
        "--source",
        metavar="NAME",
        help="the draft source: any registered one (today draft, lookup, mtp), pool (chosen per step) or none; "
        "a wrong name is refused with the list",
    )
    p.add_argument("--lookup", action="store_true", help="draft with prompt n-gram lookup (--source lookup)")
    p.add_argument(
        "--mtp",
        action="store_true",
        help="draft with the model's own multi-token-prediction head (GGUFs with MTP/NextN layers, e.g. Qwen3.5/3.6; "
        "--source mtp)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--no-spec", action="store_true", help="plain decoding, no speculation")
    g.add_argument("--spec-n-max", type=int, metavar="K", help="draft depth (max drafted tokens per step)")
    p.add_argument("--spec-p-min", type=float, metavar="P", help="stop drafting below this draft probability")
    p.add_argument("--cost-stop", action="store_true", help=COST_STOP_HELP)
    p.add_argument("--spec-n-min", type=int, default=0, metavar="K", help="drop drafts shorter than this")
    p.add_argument("--adaptive", action="store_true", help="draft length follows measured acceptance")
    p.add_argument("--pool", action="store_true", help="choose the draft source per step (--source pool)")
    p.add_argument("--prompt", required=True, help="the user message")
    p.add_argument("--system", help="a system message")
    p.add_argument("--raw", action="store_true", help="send the prompt as raw text, without the chat template")
    # Sampling defaults are llama-cli's (-n -1, --temp 0.8, --top-k 40, --top-p 0.95, --min-p 0.05): the tool users
    # compare this command with, so a bare `dynadraft generate --model M --prompt P` behaves as theirs does.
    p.add_argument(
        "--max-tokens",
        type=int,
        default=-1,
        metavar="N",
        help="tokens to generate (default -1: until the reply ends or the context window is full)",
    )
    p.add_argument("--seed", type=int, metavar="S")
    sampler_flags.add(p, "sampling (llama-cli's flags and defaults)", with_defaults=True)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument(
        "--logit-bias",
        action="append",
        default=[],
        type=_logit_bias,
        metavar="TOKEN_ID(+/-)BIAS",
        help="add BIAS to a token's logit, as llama-cli's (e.g. 15043+1; 15043-inf bans it; repeatable)",
    )
    _add_reasoning_budget(p)
    _add_profile(p)
    _add_server_binary(p)
    p.add_argument("--no-dd", action="store_true", help="switch Dynamic Draft off for this run")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.set_defaults(func=_lazy("app.engine.generate_cli", "run_generate"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dynadraft",
        description="DynaDraft: local LLM chat with Dynamic-Draft speculative decoding. Without a subcommand, "
        "opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"DynaDraft {__version__}")
    parser.add_argument("--self-test", action="store_true", help="load the demo model, generate, check the GUI, exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_generate(sub)
    _add_serve(sub)
    _add_calibrate(sub)
    _add_models_and_tools(sub)
    return parser


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the local OpenAI-compatible endpoint (headless)")
    p.add_argument("--model", required=True, metavar="PATH", help=MODEL_HELP)
    p.add_argument("--draft", metavar="PATH", help="draft GGUF model, path or name")
    p.add_argument("--host", default="127.0.0.1", metavar="H")
    p.add_argument("--port", type=int, default=8080, metavar="P")
    p.add_argument("--api-key", metavar="K", help="required when binding beyond loopback")
    _add_profile(p)
    _add_server_binary(p)
    p.add_argument(
        "--cache-ram",
        type=int,
        default=-1,
        metavar="MiB",
        help="host RAM for saved conversation states, as llama-server's (default -1: a quarter of free memory, at "
        "most 8192; 0: off)",
    )
    p.add_argument("--max-queue", type=int, default=8, metavar="N", help="waiting requests before 429")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN", help="allow this CORS origin")
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests for this Host name (besides localhost; *.example allows subdomains)",
    )
    p.add_argument("--model-id", metavar="ID", help="the model name clients see (default: the file name)")
    p.add_argument("--seed", type=int, metavar="S", help="the seed of requests that give none (default: random)")
    sampler_flags.add(p, "sampling defaults: what a request that leaves a field out gets, as llama-server's", False)
    p.add_argument("--chat-template-file", metavar="FILE", help="a Jinja chat template instead of the model's own")
    _add_reasoning_budget(p)
    p.add_argument(
        "--cost-stop",
        action="store_true",
        help="the default draft setting (when neither a request nor Dynamic Draft chooses) stops each draft by the "
        "cost stop instead of its fixed p_min",
    )
    dd = p.add_mutually_exclusive_group()
    dd.add_argument("--no-dd", action="store_true", help="switch Dynamic Draft off (requests' fields or defaults run)")
    dd.add_argument(
        "--dd-force",
        action="store_true",
        help="force mode: Dynamic Draft's choice wins over requests' speculative fields",
    )
    p.set_defaults(func=_lazy("app.server.cli", "run_serve"))


def _add_calibrate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure the draft-settings frontier on this device (Dynamic Draft)")
    p.add_argument("--model", required=True, metavar="PATH", help=MODEL_HELP)
    p.add_argument("--draft", metavar="PATH", help="draft GGUF model, path or name")
    m = p.add_mutually_exclusive_group(required=True)
    m.add_argument("--quick", action="store_true")
    m.add_argument("--full", action="store_true")
    p.add_argument("--budget-min", type=float, metavar="N", help="wall-time budget in minutes")
    p.add_argument(
        "--contexts", metavar="N[,N...]", help="prompt lengths (tokens) to measure, instead of the mode's ladder"
    )
    p.add_argument("--gen-tokens", type=int, metavar="N", help="tokens generated per measurement (quick: 64)")
    p.add_argument(
        "--class-prompts",
        type=int,
        metavar="N",
        help="prompts measured per content class (quick: 2, full: 3; more is steadier and slower)",
    )
    p.add_argument(
        "--corpus", metavar="FILE", help="calibrate on your own kind of text (a UTF-8 file) instead of the shipped one"
    )
    p.add_argument(
        "--corpus-class",
        metavar="CLASS",
        help="the content class your --corpus text fills: chat (default), code, copy_edit or structured; the other "
        "classes use the shipped sections",
    )
    _add_profile(p)
    _add_server_binary(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_lazy("app.calibration.cli", "run_calibrate"))


def _add_models_and_tools(sub: argparse._SubParsersAction) -> None:
    from app.models.cli import add_models_arguments, add_pull_arguments

    p = sub.add_parser("pull", help="download a model from Hugging Face (catalog id or REPO:FILE)")
    add_pull_arguments(p)
    p.set_defaults(func=_lazy("app.models.cli", "run_pull"))

    p = sub.add_parser("models", help="list local models, or inspect a GGUF file")
    add_models_arguments(p)
    p.set_defaults(func=_lazy("app.models.cli", "run_models"))

    from app.engine.cache_cli import add_cache_arguments

    p = sub.add_parser("cache", help="list the prompt caches on disk by model, or clear them")
    add_cache_arguments(p)
    p.set_defaults(func=_lazy("app.engine.cache_cli", "run_cache"))

    p = sub.add_parser("bench", help="run a benchmark from bench/ (e.g. policy, engine, http, gui)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    p.set_defaults(func=_run_bench)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.self_test:
        from app.selftest import run_self_test

        return run_self_test()
    if args.command is None:
        from app.launch import gui_launch_problem

        problem = gui_launch_problem()  # before Qt loads: a missing X11 library would make Qt abort
        if problem:
            print(problem, file=sys.stderr)
            return 1
        from app.gui.main import run_app

        return run_app()
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
