"""What observability costs a run: two versions of tenxgraph side by side in one process.

    python benchmarks/ab_observability.py a62afbf HEAD --runs 60

Version A is a revision before observability; version B is measured twice: with no tracer
provider configured (OpenTelemetry imported, its global provider left unset: the check a run
makes is the whole cost) and with the OpenTelemetry SDK (`TracerProvider` and an
`InMemorySpanExporter` behind a `SimpleSpanProcessor`, cleared after each run) given with
`compile(tracing=Tracing(tracer_provider=...))`. The three run alternately, in one process.

- `s1`: S1's loop (two function nodes, 1,000 node executions, no checkpointer): thread CPU
  per step, in microseconds.
- `step`: an Agent looping 10 times on an in-memory thread against S6's loopback OpenAI
  server (see `scenarios/s6_models.py`): thread CPU per step outside `litellm.acompletion`,
  in ms and as a share of the litellm call (as `ab_models.py` measures it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "scenarios"))
sys.path.insert(0, str(HERE))

import s6_models as s6  # noqa: E402
from ab_models import export  # noqa: E402

# one run: its CPU per step outside litellm, and that as a share of the litellm calls (%)
Run = Callable[[], Awaitable[tuple[float, float | None]]]
S1_STEPS = 1_000
AGENT_STEPS = 10


def variants(api_base: str, inside: list[float]) -> dict[str, dict[str, Run]]:
    """For each variant, its runs per layer."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    found: dict[str, dict[str, Run]] = {}
    for name, package, tracing in (
        ("A", "tg_a", None),
        ("B", "tg_b", None),
        ("B+sdk", "tg_b", provider),
    ):
        found[name] = layers(package, tracing, api_base, inside, exporter)
    return found


def layers(
    package: str, provider: Any, api_base: str, inside: list[float], exporter: Any
) -> dict[str, Run]:
    graph = importlib.import_module(f"{package}.core.graph")
    state = importlib.import_module(f"{package}.core.state")
    storage = importlib.import_module(f"{package}.storage.checkpointer")
    constants = importlib.import_module(f"{package}.utils.constants")
    end, start = constants.END, constants.START
    options: dict[str, Any] = {}
    if provider is not None:
        observability = importlib.import_module(f"{package}.observability")
        options["tracing"] = observability.Tracing(tracer_provider=provider)
    threads = (f"{package}-{i}" for i in itertools.count())

    class Counter(state.AgentState):  # type: ignore[name-defined,misc]
        count: int = 0

    async def bump(s: Any) -> dict[str, int]:
        return {"count": s.count + 1}

    loop = graph.StateGraph(Counter)
    loop.add_node("a", bump)
    loop.add_node("b", bump)
    loop.add_edge(start, "a")
    loop.add_edge("a", "b")
    loop.add_conditional_edges(
        "b", lambda s: end if s.count >= S1_STEPS else "a", {"a": "a", end: end}
    )
    s1_app = loop.compile(checkpointer=False, **options)
    go = {"messages": [state.Message.text_message("go")]}

    async def s1() -> tuple[float, float | None]:
        cpu = time.thread_time()
        await s1_app.ainvoke(go, {"recursion_limit": S1_STEPS + 10})
        spent = time.thread_time() - cpu
        exporter.clear()
        return spent / S1_STEPS * 1e6, None

    agent = graph.StateGraph()
    agent.add_node("agent", graph.Agent(s6.MODEL, api_base=api_base, api_key="x"))
    agent.add_edge(start, "agent")
    agent.add_conditional_edges(
        "agent",
        lambda s: "agent" if len(s.context) - 1 < AGENT_STEPS else end,
        {"agent": "agent", end: end},
    )
    agent_app = agent.compile(checkpointer=storage.InMemoryCheckpointer(), **options)
    question = {"messages": [state.Message.text_message("hi")]}

    async def step() -> tuple[float, float | None]:
        inside[0] = 0.0
        cpu = time.thread_time()
        await agent_app.ainvoke(question, {"thread_id": next(threads)})
        total = time.thread_time() - cpu
        exporter.clear()
        own = total - inside[0]
        return own / AGENT_STEPS * 1e3, own / inside[0] * 100

    return {"s1": s1, "step": step}


async def measure(runs: int, api_base: str) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    _, bare, _ = s6.build("litellm", api_base)
    import litellm

    inside, litellm.acompletion = s6.timed(litellm.acompletion)
    found = variants(api_base, inside)
    names = list(found)
    for layer, unit in (("s1", "us/step"), ("step", "ms/step")):
        spent: dict[str, list[float]] = {n: [] for n in names}
        share: dict[str, list[float]] = {n: [] for n in names}
        for n in names:  # warm-ups
            for _ in range(3):
                await found[n][layer]()
        for i in range(runs):
            order = names[i % len(names) :] + names[: i % len(names)]  # none always first
            for n in order:
                if layer == "step":
                    await bare()  # as cold as in real use
                value, part = await found[n][layer]()
                spent[n].append(value)
                if part is not None:
                    share[n].append(part)
        base = median(spent["A"])
        line = f"{layer:<5}"
        for n in names:
            line += f"  {n}: {median(spent[n]):.3f} {unit} ({median(spent[n]) / base:.3f}x A)"
            if share[n]:
                line += f" {median(share[n]):.2f}% of litellm"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", help="git revision before observability, e.g. a62afbf")
    parser.add_argument("b", help="git revision to measure, e.g. HEAD")
    parser.add_argument("--runs", type=int, default=60, help="runs per variant and layer")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        into = Path(folder)
        for revision, name in ((args.a, "tg_a"), (args.b, "tg_b")):
            export(revision, name, into)
        sys.path.insert(0, str(into))
        print(f"A = {args.a}, B = {args.b}")
        server = s6.Server(1)
        try:
            asyncio.run(measure(args.runs, server.api_base))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
