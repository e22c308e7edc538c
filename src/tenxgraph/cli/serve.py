"""`tenxgraph serve MODULE:APP ...`: the Agent Protocol server on uvicorn."""

from __future__ import annotations

import argparse
import os

from tenxgraph.cli._console import EXIT_OK, EXIT_USAGE, CliError, Console
from tenxgraph.cli._loading import load_target, to_app
from tenxgraph.core.graph import CompiledGraph


def _tokens(args: argparse.Namespace) -> dict[str, str]:
    given = list(args.auth_token or [])
    given += [t for t in os.environ.get("TENXGRAPH_AUTH_TOKENS", "").split(",") if t.strip()]
    tokens = {}
    for pair in given:
        token, sep, user = pair.strip().partition("=")
        if not sep or not token or not user:
            raise CliError(f"--auth-token takes TOKEN=USER, got {pair!r}", EXIT_USAGE)
        tokens[token] = user
    return tokens


def _graphs(specs: list[str]) -> dict[str, CompiledGraph]:
    graphs: dict[str, CompiledGraph] = {}
    for spec in specs:
        app = to_app(load_target(spec), spec)
        name = app.name if app.name != "graph" else spec.rpartition(":")[2]
        if name in graphs:
            raise CliError(f"two graphs are named {name!r}: give one another name", EXIT_USAGE)
        graphs[name] = app
    return graphs


def command(args: argparse.Namespace, console: Console) -> int:
    try:
        import uvicorn

        from tenxgraph.serve import DEFAULT_DB, bearer_tokens, create_app
    except ImportError as exc:
        raise CliError(
            f"tenxgraph serve needs the serve extra ({exc.name} is missing): "
            'pip install "tenxgraph[serve]"',
            EXIT_USAGE,
        ) from None
    tokens = _tokens(args)
    app = create_app(
        _graphs(args.apps),
        db=args.db or DEFAULT_DB,
        auth=bearer_tokens(tokens) if tokens else None,
        redis_url=args.redis,
        lease_ttl=args.lease_ttl,
        max_runs=args.max_runs,
    )
    where = f"http://{args.host}:{args.port}"
    console.err.write(
        f"tenxgraph: serving {', '.join(args.apps)} at {where} (chat page: {where}/)\n"
    )
    if not tokens and args.host not in ("127.0.0.1", "localhost", "::1"):
        console.err.write(
            "tenxgraph: warning: no --auth-token and not on loopback: anyone who "
            "reaches this port can run your graphs\n"
        )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return EXIT_OK
