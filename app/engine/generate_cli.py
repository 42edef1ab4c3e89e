"""`dynadraft generate`: one request through the engine, printed as text or as one JSON object."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from dataclasses import replace

from app.engine.config_args import config_from_args
from app.engine.types import DoneEvent, EngineError, GenerationRequest, InvalidRequest, StepEvent, TextEvent
from app.engine.worker import Engine, print_context_notes
from app.runtime import sampler_flags
from app.runtime.dry import DEFAULT_BREAKERS
from app.runtime.sampling import SamplingParams
from app.speculative.mtp import MtpSource
from app.speculative.registry import POOL, from_intent
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import PromptLookupSource


def source_from_args(args: argparse.Namespace) -> str | None:
    """The draft source asked for: --source NAME (any registered source, "pool" or "none"), or its aliases --pool,
    --mtp and --lookup (in that precedence); None when none is named. A --source that an alias contradicts is an
    error (ValueError); an unknown name is refused with the registry's choices when the settings are built."""
    alias = POOL if args.pool else (MtpSource.name if args.mtp else PromptLookupSource.name if args.lookup else None)
    if args.source is not None and alias is not None and alias != args.source:
        raise ValueError(f"--source {args.source} and --{alias} name two draft sources: give one")
    return args.source if args.source is not None else alias


def spec_from_args(args: argparse.Namespace, loaded: Collection[str] = ()) -> SpecSettings | None:
    """The request-level override the flags ask for, or None to let Dynamic Draft / defaults decide; a depth or
    p_min without a source drafts with the `loaded` sources' default (registry.default_source)."""
    if args.no_spec:
        return PLAIN
    source = source_from_args(args)
    explicit = (
        args.spec_n_max is not None or args.spec_p_min is not None or args.adaptive or source is not None
    ) or args.cost_stop
    if not explicit:
        return None
    return from_intent(  # a source's own default depth where --spec-n-max is not given (registry.default_n_max)
        source,
        loaded=loaded,
        n_max=args.spec_n_max,
        n_min=args.spec_n_min,
        p_min=args.spec_p_min,
        adaptive=args.adaptive,
        cost_stop=args.cost_stop,
    )


def sampling_from_args(args: argparse.Namespace) -> SamplingParams:
    """The sampler flags as SamplingParams (llama-cli's names; ValueError names a value out of range)."""
    return SamplingParams(seed=args.seed, **sampler_flags.fields(args))


def run_generate(args: argparse.Namespace) -> int:
    try:
        sampling = sampling_from_args(args)
        breakers = sampler_flags.breakers(args)
        spec = spec_from_args(args, ("draft",) if args.draft else ())  # checked now, resolved once loaded
        messages: list[dict[str, str]] = []
        if args.system:
            messages.append({"role": "system", "content": args.system})
        messages.append({"role": "user", "content": args.prompt})
        if args.max_tokens == 0 or args.max_tokens < -1:
            raise ValueError(f"--max-tokens must be >= 1, or -1 for no limit; got {args.max_tokens}")
        request = GenerationRequest(
            messages=None if args.raw else tuple(messages),
            prompt=args.prompt if args.raw else None,
            max_tokens=max(args.max_tokens, 1),
            sampling=sampling,
            stop=tuple(args.stop),
            speculative=spec,
            logit_bias=tuple(args.logit_bias),
            dry_sequence_breakers=DEFAULT_BREAKERS if breakers is None else breakers,
        )
        if args.max_tokens == -1:
            request = request.to_context_end()
    except (ValueError, InvalidRequest) as e:
        print(f"dynadraft generate: {e}", file=sys.stderr)
        return 2
    try:
        # --mtp asks for the head: a GGUF without one is refused at load, with the reason.
        wants_mtp = args.mtp or args.source == MtpSource.name
        config = config_from_args(args, dynamic_draft=not args.no_dd, mtp="on" if wants_mtp else "auto")
    except ValueError as e:
        print(f"dynadraft generate: {e}", file=sys.stderr)
        return 2
    try:
        with Engine(config) as engine:
            print_context_notes(engine, "dynadraft generate")
            if spec is not None and source_from_args(args) is None:  # the loaded sources decide the source
                request = replace(request, speculative=spec_from_args(args, engine.draft_sources()))
            handle = engine.submit(request)
            summary = None
            for ev in handle.events():
                if isinstance(ev, TextEvent) and not args.json:
                    sys.stdout.write(ev.text)
                    sys.stdout.flush()
                elif isinstance(ev, DoneEvent):
                    summary = ev.summary
                elif isinstance(ev, StepEvent):
                    pass
    except EngineError as e:
        print(f"dynadraft generate: {e}", file=sys.stderr)
        return 1
    assert summary is not None
    dd = summary.dynamic_draft
    if dd and dd.get("reason") == "stale_table":  # said even with --json (on stderr), so a stale table is never silent
        print(f"dynadraft generate: Dynamic Draft not applied: {dd.get('stale_message')}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_dict(), ensure_ascii=False))
    else:
        t = summary.timings
        print(
            f"\n\n[{summary.finish_reason}] prompt {t.prompt_n} tok ({t.prompt_per_second:.1f} tok/s,"
            f" cache {t.cache_n})"
            f" | gen {t.predicted_n} tok {t.predicted_per_second:.1f} tok/s | steps {summary.steps}"
            f" | drafted {t.draft_n} accepted {t.draft_n_accepted} | {summary.settings.label()}",
            file=sys.stderr,
        )
    return 0
