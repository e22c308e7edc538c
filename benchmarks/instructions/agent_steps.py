"""N runs of S6's looping Agent graph (10 steps each, an in-memory thread) with litellm's
`acompletion` answering from prebuilt `ModelResponse`s, counting only around the runs:
what tenxgraph spends per Agent step on the litellm path (request, answer, merge, save,
sealing the answers handed out), without a server or the call itself.

    PYTHONHASHSEED=0 PYTHONPATH=src valgrind --tool=callgrind --collect-atstart=no \
        --callgrind-out-file=/dev/null python benchmarks/instructions/agent_steps.py 30
    # "Collected" / 300: instructions per step

`--skip PIECE[,PIECE]` replaces one piece of the step by a no-op, to see what it costs (the
runs still check the answers; what is skipped no longer works, so this is for measuring
only): `seal` (sealing the answers the result hands out), `encode` (the in-memory store's
JSON of each message), `header` (its JSON of the state without the messages), `check` (the
save's check that each message reads back equal), `scrub` (looking for credentials in the
raw response), `tally` (writing the thread's running usage total into each step's state) and
`usage` (that and counting each call's tokens and cost: what observability costs a step with
no tracer provider). Quicker than `agent_share.py` (a few minutes less), and closer to a unit
count; that script's `outside` count also holds what the loopback call adds around litellm.
"""

import argparse
import asyncio
import copy
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before litellm is imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

import litellm
import s6_models as s6
from _callgrind import toggler
from litellm.types.utils import ModelResponse

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils.constants import END, START

STEPS = 10
BODY = json.loads(s6.completion_body())  # S6's server's answer

parser = argparse.ArgumentParser()
parser.add_argument("runs", type=int)
parser.add_argument("--skip", default="")
args = parser.parse_args()


def skip(piece: str) -> None:
    if piece == "seal":
        import tenxgraph.core.graph.engine as engine

        engine.seal = lambda message: None  # type: ignore[assignment]
    elif piece in ("encode", "header"):
        import tenxgraph.storage.checkpointer.memory as memory

        if piece == "encode":
            memory.encode_message = lambda message: ""  # type: ignore[assignment]
        else:
            memory.encode_header = lambda state, thread_id: ""  # type: ignore[assignment]
    elif piece == "check":
        import tenxgraph.storage.checkpointer.base as base

        base.message_problem = lambda message: None  # type: ignore[assignment]
    elif piece == "scrub":
        import tenxgraph.core.llm.wire_in as wire_in

        wire_in.scrub = lambda value: value  # type: ignore[assignment]
    elif piece in ("usage", "tally"):
        from tenxgraph.observability.observer import Observer

        Observer.tally = lambda self, meta: None  # type: ignore[method-assign]
        if piece == "usage":
            Observer.count_call = lambda self, answer, free: None  # type: ignore[method-assign]
    elif piece:
        raise SystemExit(f"agent_steps: nothing called {piece!r} to skip")


for piece in args.skip.split(","):
    skip(piece)

answers: list[Any] = []


async def answer(*_: Any, **__: Any) -> Any:
    return answers.pop()


litellm.acompletion = answer


def again(state: Any) -> str:
    return "agent" if len(state.context) - 1 < STEPS else END


graph = StateGraph()
graph.add_node("agent", Agent("openai/bench", api_base="http://127.0.0.1:9", api_key="x"))
graph.add_edge(START, "agent")
graph.add_conditional_edges("agent", again, {"agent": "agent", END: END})
app = graph.compile(checkpointer=InMemoryCheckpointer())
question = Message.text_message("hi")
threads = itertools.count()


async def runs(count: int) -> None:
    for _ in range(count):
        result = await app.ainvoke({"messages": [question]}, {"thread_id": f"t{next(threads)}"})
        if len(result["messages"]) != STEPS + 1:
            raise SystemExit("agent_steps: the loop made the wrong number of calls")


def prepare(count: int) -> None:
    answers[:] = [ModelResponse(**copy.deepcopy(BODY)) for _ in range(count * STEPS)]


prepare(20)
asyncio.run(runs(20))  # warm-ups, not counted
prepare(args.runs)  # litellm's work: made before counting
toggle = toggler()
toggle()
asyncio.run(runs(args.runs))
toggle()
print(f"{args.runs * STEPS} steps", file=sys.stderr)
