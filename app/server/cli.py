"""`dynadraft serve`: load the model(s) and run the OpenAI-compatible endpoint in the foreground until Ctrl+C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.engine.config_args import config_from_args
from app.engine.types import EngineError
from app.engine.worker import Engine, print_context_notes
from app.runtime import sampler_flags
from app.runtime.dry import check_breakers
from app.runtime.sampling import SamplingParams
from app.server.anthropic_messages import claude_environment
from app.server.runner import EndpointError, EndpointServer, is_loopback


def run_serve(args: argparse.Namespace) -> int:
    """Serve until interrupted; 0 on a clean stop, 1 when the model or the endpoint cannot start, 2 on bad flags.

    Reads args.model, args.draft, args.host, args.port, args.api_key and, when present, args.ctx_size,
    args.threads, args.gpu_layers, args.max_queue, args.cors_origin and args.allowed_host (lists), args.model_id and
    args.cost_stop, and the sampler flags (app.runtime.sampler_flags) as the requests' defaults.
    """
    host = getattr(args, "host", None) or "127.0.0.1"
    api_key = getattr(args, "api_key", None)
    if not is_loopback(host) and not api_key:
        # Checked before loading the model so the user learns it in a second, not after a long load.
        print(f"dynadraft serve: binding {host} (beyond loopback) requires --api-key", file=sys.stderr)
        return 2
    template = getattr(args, "chat_template_file", None)
    if template and not Path(template).is_file():
        print(f"dynadraft serve: chat template not found: {template}", file=sys.stderr)
        return 2
    try:
        config = config_from_args(
            args, dynamic_draft=not getattr(args, "no_dd", False), dd_force=bool(getattr(args, "dd_force", False))
        )
    except ValueError as e:
        print(f"dynadraft serve: {e}", file=sys.stderr)
        return 2
    try:
        sampling_defaults = _sampling_defaults(args)
    except ValueError as e:
        print(f"dynadraft serve: {e}", file=sys.stderr)
        return 2
    if getattr(args, "cost_stop", False):
        if config.server_binary:
            print("dynadraft serve: --cost-stop: the cost stop needs the bundled runtime", file=sys.stderr)
            return 2
        config = replace(config, default_cost_stop=True)
    try:
        engine = Engine(config, max_queue=getattr(args, "max_queue", None) or 8).wait_ready()
    except EngineError as e:
        print(f"dynadraft serve: {e}", file=sys.stderr)
        return 1
    print_context_notes(engine, "dynadraft serve")
    server = EndpointServer(
        engine,
        getattr(args, "model_id", None),
        host=host,
        port=args.port if getattr(args, "port", None) is not None else 8080,
        api_key=api_key,
        cors_origins=getattr(args, "cors_origin", None) or (),
        allowed_hosts=getattr(args, "allowed_host", None) or (),
        log_level="info",
        sampling_defaults=sampling_defaults,
    )
    stop = threading.Event()
    try:
        server.start()
        model = server.model_id or Path(config.model).stem
        print(f"dynadraft serve: {server.url}/v1 (model {model}); Ctrl+C stops", flush=True)
        print(f"dynadraft serve: Dynamic Draft: {engine.call(lambda s: s.dd_status)}", flush=True)
        env = claude_environment(server.url, model, "<your --api-key>" if api_key else "")
        print(f"dynadraft serve: Claude clients (Anthropic's API, same port): {env} claude", flush=True)
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.wait(0.5) and server.running:
                pass
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
    except EndpointError as e:
        print(f"dynadraft serve: {e}", file=sys.stderr)
        return 1
    finally:
        server.stop()
        engine.close()
    return 0


def _sampling_defaults(args: argparse.Namespace) -> dict[str, Any]:
    """serve's sampler flags as the defaults of requests that leave those fields out (llama-server's names), checked
    once here: a bad value stops the start with its field's name, not every request with a 400."""
    defaults: dict[str, Any] = sampler_flags.fields(args)
    if getattr(args, "seed", None) is not None:
        defaults["seed"] = args.seed
    SamplingParams(**defaults)  # ValueError names the field
    breakers = sampler_flags.breakers(args)
    if breakers is not None:
        check_breakers(breakers)
        defaults["dry_sequence_breakers"] = list(breakers)
    return defaults
