"""A/B of two versions of tenxgraph inside one process: what each adds to a model call.

    python benchmarks/ab_models.py 64dab7d HEAD --runs 150

Comparing separate processes on a noisy machine mixes the machine's speed into the result:
a bare litellm call took anywhere from 5 to 13 ms of CPU here within one day. So both
versions are loaded side by side (each git revision exported to a temporary folder as a
package of its own name) and run alternately against the same loopback server as S6 (see
`scenarios/s6_models.py`), with a bare litellm call before every measured run so that each
starts as cold as in real use.

What a run adds = the thread's CPU for the run minus the CPU spent inside
`litellm.acompletion` during it, printed per layer as a median in ms and as a median share
of the litellm call, for: the Agent's model client alone (`client`: the request and the answer
converted, no graph), a one-node Agent graph without a checkpointer (`graph`), on a new
in-memory thread (`call`), and per step of a 10-step Agent loop on an in-memory thread
(`step`) and without a checkpointer (`step-nockpt`); on request (`--layers stream`), per
chunk of a 5,000-chunk `astream` beside a bare litellm stream read just before it. "Without a
checkpointer" is `compile(checkpointer=False)` in versions with the default in-memory store,
else `compile()`: the run keeps nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import itertools
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "scenarios"))

import s6_models as s6  # noqa: E402

LAYERS = ("client", "graph", "call", "step", "step-nockpt", "stream")
DEFAULT_LAYERS = LAYERS[:-1]  # a stream takes seconds: asked for by name
Run = Callable[[], Awaitable[None]]


def export(revision: str, name: str, into: Path) -> None:
    """`src/tenxgraph` of `revision` as the package `name` in `into`."""
    archive = into / f"{name}.tar"
    subprocess.run(
        ["git", "archive", "--format=tar", "-o", str(archive), revision, "src/tenxgraph"],
        cwd=HERE.parent,
        check=True,
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into / f"{name}-tree", filter="data")
    (into / f"{name}-tree" / "src" / "tenxgraph").rename(into / name)
    for path in (into / name).rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\btenxgraph\.", f"{name}.", text)
        text = re.sub(r"^(\s*)from tenxgraph import", rf"\1from {name} import", text, flags=re.M)
        path.write_text(text)


def layers(package: str, api_base: str) -> dict[str, tuple[Run, int]]:
    """The runs to measure for one version, and the steps each makes."""
    graph = importlib.import_module(f"{package}.core.graph")
    llm = importlib.import_module(f"{package}.core.llm")
    state = importlib.import_module(f"{package}.core.state")
    storage = importlib.import_module(f"{package}.storage.checkpointer")
    constants = importlib.import_module(f"{package}.utils.constants")
    end, start = constants.END, constants.START
    question = state.Message.text_message("hi")
    threads = (f"{package}-{i}" for i in itertools.count())
    # no checkpointer: since the default in-memory store (compile() keeps threads unless told
    # checkpointer=False), False; before it, None
    memory = importlib.import_module(f"{package}.storage.checkpointer.memory")
    nothing = False if hasattr(memory, "DefaultCheckpointer") else None

    def build(keep: bool, steps: int) -> Run:
        g = graph.StateGraph()
        g.add_node("agent", graph.Agent(s6.MODEL, api_base=api_base, api_key="x"))
        g.add_edge(start, "agent")
        if steps == 1:
            g.add_edge("agent", end)
        else:
            g.add_conditional_edges(
                "agent",
                lambda s: "agent" if len(s.context) - 1 < steps else end,
                {"agent": "agent", end: end},
            )
        app = g.compile(checkpointer=storage.InMemoryCheckpointer() if keep else nothing)

        async def run() -> None:
            await app.ainvoke({"messages": [question]}, {"thread_id": next(threads)})

        return run

    client = llm.LiteLLMClient()
    settings = {"api_base": api_base, "api_key": "x"}
    request = llm.ModelRequest(s6.MODEL, [question], settings=settings)

    async def client_call() -> None:
        await client.acomplete(request)

    streaming = graph.StateGraph()
    streaming.add_node("agent", graph.Agent(s6.MODEL, api_base=api_base, api_key="x"))
    streaming.add_edge(start, "agent")
    streaming.add_edge("agent", end)
    stream_app = streaming.compile(checkpointer=storage.InMemoryCheckpointer())

    async def stream() -> None:
        count = 0
        async for chunk in stream_app.astream(
            {"messages": [question]}, {"thread_id": next(threads)}
        ):
            message = chunk.message
            if message is not None and message.delta and message.text():
                count += 1
        if count != s6.CHUNKS:
            raise SystemExit(f"ab_models: {package} streamed {count} text chunks")

    return {
        "client": (client_call, 1),
        "graph": (build(False, 1), 1),
        "call": (build(True, 1), 1),
        "step": (build(True, 10), 10),
        "step-nockpt": (build(False, 10), 10),
        "stream": (stream, s6.CHUNKS),
    }


async def measure(
    packages: list[str], chosen: list[str], runs: int, stream_runs: int, api_base: str
) -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    _, bare, _ = s6.build("litellm", api_base)
    import litellm

    inside, litellm.acompletion = s6.timed(litellm.acompletion)
    versions = {p: layers(p, api_base) for p in packages}
    for layer in chosen:
        if layer == "stream":
            await measure_stream(packages, versions, stream_runs, inside, api_base)
            continue
        added: dict[str, list[float]] = {p: [] for p in packages}
        share: dict[str, list[float]] = {p: [] for p in packages}
        for p in packages:  # warm-ups
            for _ in range(5):
                await versions[p][layer][0]()
                await bare()
        steps = versions[packages[0]][layer][1]
        for i in range(runs if steps == 1 else max(20, runs // 5)):
            for p in packages if i % 2 == 0 else packages[::-1]:  # neither always first
                run, steps = versions[p][layer]
                await bare()  # as cold as in real use
                inside[0] = 0.0
                cpu = time.thread_time()
                await run()
                total = time.thread_time() - cpu
                added[p].append((total - inside[0]) / steps * 1e3)
                share[p].append((total - inside[0]) / inside[0] * 100)
        print(
            f"{layer:<12}"
            + "".join(
                f"  {p}: {median(added[p]):.3f} ms ({median(share[p]):.2f}% of litellm)"
                for p in packages
            ),
            flush=True,
        )


async def measure_stream(
    packages: list[str],
    versions: dict[str, dict[str, tuple[Run, int]]],
    runs: int,
    inside: list[float],
    api_base: str,
) -> None:
    """Per streamed chunk: what each version's stream spends outside litellm (the call and
    every chunk read) beyond what a bare litellm stream read just before it spends outside
    it (reading each chunk's text), in us and as a share of that bare stream's CPU."""
    bare_stream, _, _ = s6.build("litellm", api_base)
    added: dict[str, list[float]] = {p: [] for p in packages}
    share: dict[str, list[float]] = {p: [] for p in packages}
    for p in packages:  # warm-ups
        await versions[p]["stream"][0]()
    for i in range(runs):
        for p in packages if i % 2 == 0 else packages[::-1]:
            run, chunks = versions[p]["stream"]
            spent = []
            for one in (bare_stream, run):
                gc.collect()
                inside[0] = 0.0
                cpu = time.thread_time()
                await one()
                spent.append((time.thread_time() - cpu, inside[0]))
            (bare_total, bare_inside), (total, litellm_cpu) = spent
            own = (total - litellm_cpu) - (bare_total - bare_inside)
            added[p].append(own / chunks * 1e6)
            share[p].append(own / bare_total * 100)
    print(
        f"{'stream':<12}"
        + "".join(
            f"  {p}: {median(added[p]):.2f} us/chunk ({median(share[p]):.2f}% of the bare stream)"
            for p in packages
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", help="git revision A, e.g. a commit or main")
    parser.add_argument("b", help="git revision B, e.g. HEAD")
    parser.add_argument("--runs", type=int, default=150, help="runs per version and layer")
    parser.add_argument(
        "--stream-runs", type=int, default=8, help="streams per version (layer 'stream')"
    )
    parser.add_argument("--layers", default=",".join(DEFAULT_LAYERS), help=f"of {','.join(LAYERS)}")
    args = parser.parse_args()
    chosen = args.layers.split(",")
    if not set(chosen) <= set(LAYERS):
        parser.error(f"--layers takes {', '.join(LAYERS)}")
    with tempfile.TemporaryDirectory() as folder:
        into = Path(folder)
        packages = ["tg_a", "tg_b"]
        for revision, name in zip((args.a, args.b), packages, strict=True):
            export(revision, name, into)
        sys.path.insert(0, str(into))
        print(f"tg_a = {args.a}, tg_b = {args.b}")
        server = s6.Server(1)
        try:
            asyncio.run(measure(packages, chosen, args.runs, args.stream_runs, server.api_base))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
