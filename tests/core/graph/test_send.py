"""`Send`: map-reduce fan-out. A condition (or a `Command`'s goto) returns `Send(node, arg)`s;
each runs `node` once in the next super-step with `arg` in place of the state, in parallel (at
most `config["max_concurrency"]` at once), and their updates merge in the order sent. Paused or
failed steps are continued from the stored payloads."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import GraphError, GraphRecursionError, NodeError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.reducers import append_items
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer
from tenxgraph.utils import Command, Send, interrupt
from tenxgraph.utils.constants import END, START
from tests.core.graph._support import ai, inp, texts

SUBJECTS = ["cats", "dogs", "owls"]


class Jokes(AgentState):
    subjects: list[str] = Field(default_factory=list)
    jokes: Annotated[list[str], append_items] = Field(default_factory=list)


def sends(subjects: Sequence[str] = SUBJECTS, node: str = "joke") -> list[Send]:
    return [Send(node, {"subject": s}) for s in subjects]


def joke_about(arg: dict[str, Any], answer: Any = None) -> dict[str, Any]:
    """A sent node's update: a joke (and a message) about the payload's subject."""
    text = f"joke about {arg['subject']}" + (f" ({answer})" if answer is not None else "")
    return {"jokes": [text], "context": [ai(text)]}


class Recorder:
    """A `joke` node that records the payload of each run, and the `fan` condition."""

    def __init__(self) -> None:
        self.args: list[Any] = []
        self.fans = 0

    def fan(self, state: Jokes) -> list[Send]:
        self.fans += 1
        return sends(state.subjects)

    async def joke(self, arg: dict[str, Any]) -> dict[str, Any]:
        self.args.append(arg)
        return joke_about(arg)


def fan_out(
    joke: Callable[..., Any],
    fan: Callable[[Jokes], Any] | None = None,
    *,
    plan: Callable[..., Any] | None = None,
    **others: Callable[..., Any],
) -> StateGraph:
    """START -> plan -(fan)-> joke -> END; `others` are more nodes, each leading to END."""
    graph = StateGraph(Jokes)
    graph.add_node("plan", plan or (lambda s: {"subjects": SUBJECTS}))
    graph.add_node("joke", joke)
    graph.add_edge(START, "plan")
    if fan is not None or plan is None:
        graph.add_conditional_edges("plan", fan or (lambda s: sends(s.subjects)))
    graph.add_edge("joke", END)
    for name, node in others.items():
        graph.add_node(name, node)
        graph.add_edge(name, END)
    return graph


_GO = object()  # `final`'s default input: a new run with the user message "go"


async def final(app: CompiledGraph, config: dict[str, Any] | None = None, data: Any = _GO) -> Jokes:
    """The state after `app` ran `data` (None: retry the failed step)."""
    data = inp("go") if data is _GO else data
    result = await asyncio.wait_for(app.ainvoke(data, config, response_granularity="full"), 5)
    state = result["state"]
    assert isinstance(state, Jokes)
    return state


def cfg() -> dict[str, Any]:
    return {"thread_id": f"t-{uuid.uuid4().hex}"}


ALL_JOKES = [f"joke about {s}" for s in SUBJECTS]


# -- fan-out --------------------------------------------------------------------------------


async def test_each_send_runs_its_node_once_with_its_payload_in_place_of_the_state() -> None:
    rec = Recorder()
    state = await final(fan_out(rec.joke, rec.fan).compile())
    assert rec.args == [{"subject": s} for s in SUBJECTS]  # the payload, not the state
    assert state.jokes == ALL_JOKES
    assert state.execution_meta.step == 2  # plan, then all three Sends in one super-step


async def test_a_condition_may_return_a_single_send() -> None:
    rec = Recorder()
    state = await final(fan_out(rec.joke, lambda s: Send("joke", {"subject": "eels"})).compile())
    assert rec.args == [{"subject": "eels"}]
    assert state.jokes == ["joke about eels"]


async def test_sends_mixed_with_node_names_run_together_in_the_next_step() -> None:
    rec = Recorder()
    seen: list[Any] = []

    def tally(state: Jokes) -> dict[str, Any]:
        seen.append(state)  # a node reached by name gets the state, as usual
        return {"jokes": ["tally"]}

    graph = fan_out(rec.joke, lambda s: [*sends(s.subjects[:2]), "tally"], tally=tally)
    state = await final(graph.compile())
    assert rec.args == [{"subject": "cats"}, {"subject": "dogs"}]
    assert len(seen) == 1
    assert isinstance(seen[0], Jokes)
    assert seen[0].jokes == []  # it ran in the same step as the Sends, not after them
    assert sorted(state.jokes) == sorted(["joke about cats", "joke about dogs", "tally"])
    assert state.execution_meta.step == 2


async def test_a_node_may_send_through_command_goto() -> None:
    rec = Recorder()

    def plan(state: Jokes) -> Command:
        return Command(update={"subjects": ["elk"]}, goto=sends(["elk", "emu"]))

    state = await final(fan_out(rec.joke, plan=plan).compile())
    assert rec.args == [{"subject": "elk"}, {"subject": "emu"}]
    assert state.subjects == ["elk"]
    assert state.jokes == ["joke about elk", "joke about emu"]


async def test_sends_to_one_node_run_at_the_same_time() -> None:
    started: set[str] = set()
    all_started = asyncio.Event()

    async def joke(arg: dict[str, Any]) -> dict[str, Any]:
        started.add(arg["subject"])
        if len(started) == len(SUBJECTS):
            all_started.set()
        await all_started.wait()  # only finishes if every Send runs concurrently
        return joke_about(arg)

    state = await final(fan_out(joke).compile())
    assert state.jokes == ALL_JOKES


async def test_updates_merge_in_the_order_sent_not_the_order_finished() -> None:
    done = {s: asyncio.Event() for s in SUBJECTS}
    finished: list[str] = []

    async def joke(arg: dict[str, Any]) -> dict[str, Any]:
        subject = arg["subject"]
        later = SUBJECTS[SUBJECTS.index(subject) + 1 :]
        if later:
            await done[later[0]].wait()  # each Send finishes after the one sent after it
        finished.append(subject)
        done[subject].set()
        return joke_about(arg)

    state = await final(fan_out(joke).compile())
    assert finished == SUBJECTS[::-1]
    assert state.jokes == ALL_JOKES
    assert texts(state.context) == ["go", *ALL_JOKES]


# -- max_concurrency ------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2])
async def test_max_concurrency_bounds_how_many_sends_run_at_once(limit: int) -> None:
    subjects = [f"s{i}" for i in range(5)]
    running = peak = 0
    full, release = asyncio.Event(), asyncio.Event()

    async def joke(arg: dict[str, Any]) -> dict[str, Any]:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == limit:
            full.set()
        await release.wait()
        running -= 1
        return joke_about(arg)

    app = fan_out(joke, lambda s: sends(subjects)).compile()
    run = asyncio.create_task(final(app, {"max_concurrency": limit}))
    await asyncio.wait_for(full.wait(), 5)
    # every Send that could start has started by the time this resumes: without the limit,
    # all five would be running
    assert peak == limit
    release.set()
    state = await run
    assert peak == limit
    assert state.jokes == [f"joke about {s}" for s in subjects]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
async def test_max_concurrency_must_be_a_positive_int(bad: Any) -> None:
    app = fan_out(Recorder().joke).compile()
    with pytest.raises(ValueError, match="max_concurrency"):
        await app.ainvoke(inp("go"), {"max_concurrency": bad})


# -- bad Sends ------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [object(), {1, 2}, float("nan"), {"deep": [object()]}])
def test_send_payload_must_be_json_data(payload: Any) -> None:
    with pytest.raises(TypeError, match=r"'joke'.*JSON data"):
        Send("joke", payload)


@pytest.mark.parametrize("route", ["condition", "command"])
async def test_send_to_an_unknown_node_is_graph_004(route: str) -> None:
    ghost = [Send("ghost", {"subject": "boo"})]

    def plan(state: Jokes) -> Command:
        return Command(goto=ghost)

    if route == "condition":
        graph = fan_out(Recorder().joke, lambda s: ghost)
    else:
        graph = fan_out(Recorder().joke, plan=plan)
    with pytest.raises(GraphError) as info:
        await graph.compile().ainvoke(inp("go"))
    assert info.value.error_code == "GRAPH_004"
    assert "ghost" in str(info.value)


# -- interrupts and resume ------------------------------------------------------------------


def asking(asks: set[str], log: list[dict[str, Any]]) -> Callable[..., Any]:
    """A `joke` node whose runs about `asks` ask a question, and which logs every call."""

    async def joke(arg: dict[str, Any]) -> dict[str, Any]:
        log.append(arg)
        answer = (
            interrupt(f"ok to joke about {arg['subject']}?") if arg["subject"] in asks else None
        )
        return joke_about(arg, answer)

    return joke


async def test_interrupt_in_a_sent_run_is_keyed_by_its_index_and_stores_the_payloads() -> None:
    log: list[dict[str, Any]] = []
    graph = fan_out(
        asking({"dogs"}, log),
        lambda s: [Send("other", {"subject": "bats"}), *sends(s.subjects)],
        other=lambda arg: None,
    )
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = cfg()
    result = await app.ainvoke(inp("go"), config)
    # dogs is the second Send to `joke` (the third Send of the step)
    assert result["interrupt"]["key"] == "node:joke[1]:0"
    assert result["interrupt"]["value"] == "ok to joke about dogs?"
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.internal_data["next"] == [
        {"send": "other", "arg": {"subject": "bats"}},
        *({"send": "joke", "arg": {"subject": s}} for s in SUBJECTS),
    ]


async def test_resume_reruns_the_step_and_only_the_run_that_asked_gets_the_answer() -> None:
    log: list[dict[str, Any]] = []
    app = fan_out(asking({"cats", "owls"}, log)).compile(checkpointer=InMemoryCheckpointer())
    config = cfg()
    first = await app.ainvoke(inp("go"), config)
    assert first["interrupt"]["key"] == "node:joke[0]:0"
    second = await app.ainvoke({"resume": "yes"}, config)
    assert second["interrupt"]["key"] == "node:joke[2]:0"  # owls still asks: "yes" was cats'
    state = await final(app, config, {"resume": "sure"})
    assert state.jokes == ["joke about cats (yes)", "joke about dogs", "joke about owls (sure)"]
    assert Counter(a["subject"] for a in log) == dict.fromkeys(SUBJECTS, 3)


def new_store(backend: str, tmp_path: Path) -> BaseCheckpointer:
    """A checkpointer of its own on the thread storage `backend` keeps (a file, a server)."""
    if backend == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(tmp_path / "threads.db")
    dsn = os.environ.get("TENXGRAPH_TEST_PG_DSN")
    if not dsn:
        pytest.skip("TENXGRAPH_TEST_PG_DSN is not set: PostgreSQL tests need a server")
    from tenxgraph.storage.checkpointer import PgCheckpointer

    return PgCheckpointer(dsn, max_size=2)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_new_app_on_the_same_storage_resumes_from_the_stored_payloads(
    backend: str, tmp_path: Path
) -> None:
    async def run_once(data: Any, config: dict[str, Any], log: list[Any], rec: Recorder) -> Any:
        store = new_store(backend, tmp_path)  # as another process would open it
        try:
            app = fan_out(asking({"dogs"}, log), rec.fan).compile(checkpointer=store)
            return await asyncio.wait_for(app.ainvoke(data, config, response_granularity="full"), 5)
        finally:
            await store.aclose()

    config = cfg()
    first = await run_once(inp("go"), config, [], Recorder())
    assert first["state"].execution_meta.interrupt_data["key"] == "node:joke[1]:0"
    log: list[Any] = []
    rec = Recorder()
    result = await run_once({"resume": "fine"}, config, log, rec)
    assert rec.fans == 0  # the payloads came from storage, not from running the condition again
    assert log == [{"subject": s} for s in SUBJECTS]
    assert result["state"].jokes == ["joke about cats", "joke about dogs (fine)", "joke about owls"]


async def test_a_failing_send_fails_the_run_and_a_retry_reuses_the_payloads() -> None:
    rec = Recorder()
    failing = [True]

    async def joke(arg: dict[str, Any]) -> dict[str, Any]:
        if arg["subject"] == "owls" and failing[0]:
            raise RuntimeError("owl trouble")
        return await rec.joke(arg)

    app = fan_out(joke, rec.fan).compile(checkpointer=InMemoryCheckpointer())
    config = cfg()
    with pytest.raises(NodeError, match="owl trouble"):
        await app.ainvoke(inp("go"), config)
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "error"
    assert isinstance(stored, Jokes)
    assert stored.jokes == []  # nothing of the failed step is kept
    failing[0] = False
    rec.args.clear()
    state = await final(app, config, None)
    assert rec.fans == 1
    assert rec.args == [{"subject": s} for s in SUBJECTS]
    assert state.jokes == ALL_JOKES


# -- recursion limit and streaming ----------------------------------------------------------


async def test_a_step_of_many_sends_counts_once_toward_the_recursion_limit() -> None:
    app = fan_out(Recorder().joke, lambda s: sends([f"s{i}" for i in range(5)])).compile()
    state = await final(app, {"recursion_limit": 2})  # plan + one step of five Sends
    assert len(state.jokes) == 5
    with pytest.raises(GraphRecursionError):
        await app.ainvoke(inp("go"), {"recursion_limit": 1})


async def test_streaming_yields_the_messages_of_sent_runs() -> None:
    app = fan_out(Recorder().joke).compile()
    chunks = [c async for c in app.astream(inp("go"), None, response_granularity="low")]
    said = [c.message.text() for c in chunks if c.event == "message" and c.message is not None]
    assert [t for t in said if t.startswith("joke")] == ALL_JOKES
    assert "go" in said
