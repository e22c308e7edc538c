"""Subgraphs: a compiled graph added as a node of another runs inside the parent's step, with
the parent's conversation and shared fields as input, and what it changed merged back through
the parent's reducers. Its run is durable in the parent's checkpointer (interrupts pause the
parent, resuming continues the child, a failure is retried without rerunning what finished,
also from another process), its chunks stream with a `namespace`, and its nodes or tools may
route in the parent with `Command(graph=Command.PARENT)`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.graph.subgraph import child_thread_id
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message, StreamChunk
from tenxgraph.core.state.reducers import append_items
from tenxgraph.storage.checkpointer import (
    BaseCheckpointer,
    InMemoryCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.utils import Command, Send, interrupt
from tenxgraph.utils.constants import END, START
from tests._helpers import asking, results, roles, thread, tool_call, tool_pairs_intact
from tests.core.graph._support import ai, chain, inp, texts

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"
REPO = Path(__file__).resolve().parents[3]

Node = tuple[str, Callable[..., Any]]


# -- states, nodes and graphs ----------------------------------------------------------------


class Doc(AgentState):
    """The parent's state: `notes` merge by id; `owner` is the parent's own."""

    topic: str = ""
    notes: Annotated[list[dict[str, str]], append_items] = Field(default_factory=list)
    owner: str = "parent"
    active: str = ""
    box: Any = None  # kept as it is given (no validation copies it)
    tags: Annotated[list[str], append_items] = Field(default_factory=list)


class Lab(AgentState):
    """The child's state: `topic` and `notes` shared by name, `scratch` its own."""

    topic: str = ""
    notes: list[dict[str, str]] = Field(default_factory=list)
    scratch: str = ""
    active: str = ""
    box: Any = None
    tags: list[str] = Field(default_factory=list)


def note(calls: Counter[str], name: str) -> Node:
    """A child node adding a note about the topic (and writing its own field)."""

    def node(state: Lab) -> dict[str, Any]:
        calls[name] += 1
        return {"notes": [*state.notes, {"id": f"{name}-{state.topic}"}], "scratch": name}

    return name, node


def ask(calls: Counter[str], name: str, question: str = "publish?") -> Node:
    """A child node asking a person, answering with what it was told."""

    def node(state: AgentState) -> Message:
        calls[name] += 1
        return ai(f"{name}: {interrupt(question)}")

    return name, node


def say(calls: Counter[str], name: str, text: str | None = None) -> Node:
    def node(state: AgentState) -> Message:
        calls[name] += 1
        return ai(text or name)

    return name, node


def researcher(*nodes: Node, state: type[AgentState] = Lab) -> CompiledGraph:
    return chain(*nodes, state=state).compile(name="researcher")


def around(
    child: CompiledGraph,
    calls: Counter[str],
    checkpointer: BaseCheckpointer | None = None,
    state: type[AgentState] = Doc,
) -> CompiledGraph:
    """START -> plan (topic "owls") -> research (the child) -> write -> END."""

    def plan(state: Doc) -> dict[str, Any]:
        calls["plan"] += 1
        return {"topic": "owls"}

    def write(state: Doc) -> Message:
        calls["write"] += 1
        return ai(f"writing with {[n['id'] for n in state.notes]}")

    return chain(("plan", plan), ("research", child), ("write", write), state=state).compile(
        checkpointer=checkpointer if checkpointer is not None else InMemoryCheckpointer()
    )


def asking_app(calls: Counter[str], checkpointer: BaseCheckpointer) -> CompiledGraph:
    """The parent around a child that notes (r1) and then asks (r2)."""
    return around(researcher(note(calls, "r1"), ask(calls, "r2")), calls, checkpointer)


def namespaces(chunks: list[StreamChunk]) -> dict[str, list[tuple[str, ...]]]:
    """For each text streamed in a whole message, the namespaces it was streamed under."""
    found: dict[str, list[tuple[str, ...]]] = {}
    for chunk in chunks:
        message = chunk.message
        if message is not None and not message.delta:
            found.setdefault(message.text(), []).append(chunk.namespace)
    return found


async def stored(app: CompiledGraph, config: dict[str, Any]) -> AgentState:
    state = await app.aget_state(config)
    assert state is not None
    return state


def once_each(messages: list[Message]) -> bool:
    ids = [m.message_id for m in messages]
    return len(set(ids)) == len(ids)


# -- input and output ------------------------------------------------------------------------


async def test_the_child_gets_the_conversation_and_shared_fields_and_returns_its_changes() -> None:
    seen: list[dict[str, Any]] = []
    kept = ["given"]

    def look(state: Lab) -> dict[str, Any]:
        seen.append({"texts": texts(state.context), "topic": state.topic, "notes": state.notes})
        state.notes.append({"id": "in-place"})  # on the child's copy only
        state.box.append("in-place")
        return {"scratch": "mine", "notes": [*state.notes, {"id": "found"}]}

    calls: Counter[str] = Counter()
    app = around(researcher(("look", look), say(calls, "r2", "child says")), calls)
    given = inp("hi", notes=[{"id": "given"}], box=kept)
    result = await app.ainvoke(given, response_granularity="full")
    assert seen == [
        {"texts": ["hi"], "topic": "owls", "notes": [{"id": "given"}, {"id": "in-place"}]}
    ]
    assert kept == ["given"]  # the parent's objects are not changed by the child
    state = result["state"]
    assert [n["id"] for n in state.notes] == ["given", "in-place", "found"]
    assert state.owner == "parent"
    assert not hasattr(state, "scratch")  # the child's own field stays in the child
    assert texts(state.context) == [
        "hi",
        "child says",
        "writing with ['given', 'in-place', 'found']",
    ]
    assert once_each(state.context)


async def test_changed_fields_go_through_the_parents_reducers_and_unchanged_are_not_resent() -> (
    None
):
    """The child replaces its notes with one new note: through the parent's append_items the
    old note stays. It leaves tags (items without ids: append_items would append them all
    again) unchanged: the parent's tags are not doubled."""

    def prune(state: Lab) -> dict[str, Any]:
        return {"notes": [{"id": "new"}]}

    app = chain(("research", researcher(("prune", prune))), state=Doc).compile(
        checkpointer=InMemoryCheckpointer()
    )
    given = inp("hi", notes=[{"id": "given"}], tags=["t"])
    state = (await app.ainvoke(given, response_granularity="full"))["state"]
    assert [n["id"] for n in state.notes] == ["given", "new"]
    assert state.tags == ["t"]


def fan_out(child: CompiledGraph, payloads: list[dict[str, Any]]) -> CompiledGraph:
    """START -> start, which sends each payload to research (the child) -> END."""
    graph = StateGraph(Doc)
    graph.add_node("start", lambda s: None)
    graph.add_node("research", child)
    graph.add_edge(START, "start")
    graph.add_conditional_edges("start", lambda s: [Send("research", p) for p in payloads])
    graph.add_edge("research", END)
    return graph.compile(checkpointer=InMemoryCheckpointer())


def about(topic: str) -> dict[str, Any]:
    return {"topic": topic, "context": [ai(f"about {topic}").model_dump(mode="json")]}


def found(calls: Counter[str]) -> Node:
    def node(state: Lab) -> Message:
        calls["found"] += 1
        return ai(f"found {state.topic} after {texts(state.context)}")

    return "found", node


async def test_a_send_to_a_subgraph_runs_it_once_per_payload_and_merges_both() -> None:
    calls: Counter[str] = Counter()
    app = fan_out(researcher(found(calls)), [about("a"), about("b")])
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(found=2)
    assert texts(state.context) == ["hi", "found a after ['about a']", "found b after ['about b']"]


# a field the child changed from its own default (not in the payload) comes back too
async def test_fields_changed_by_sent_children_merge_back_through_the_reducer() -> None:
    calls: Counter[str] = Counter()
    app = fan_out(researcher(note(calls, "r1")), [about("a"), about("b")])
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(r1=2)
    assert sorted(n["id"] for n in state.notes) == ["r1-a", "r1-b"]


# a payload without "context": the child starts from its fields alone
async def test_a_send_payload_without_context_is_the_childs_input_fields() -> None:
    calls: Counter[str] = Counter()
    app = fan_out(researcher(found(calls)), [{"topic": "a"}, {"topic": "b"}])
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(found=2)
    assert texts(state.context) == ["hi", "found a after []", "found b after []"]


# -- durable: interrupts, resume, retry -------------------------------------------------------


async def test_an_interrupt_in_the_child_pauses_the_parent_and_resume_continues_the_child(
    store: BaseCheckpointer,
) -> None:
    calls: Counter[str] = Counter()
    app = asking_app(calls, store)
    config = thread()
    paused = await app.ainvoke(inp("hi"), config)
    asked = paused["interrupt"]
    assert (asked["key"], asked["node"], asked["value"]) == (
        "node:research:0",
        "research",
        "publish?",
    )
    assert calls == Counter(plan=1, r1=1, r2=1)

    step = (await stored(app, config)).execution_meta.step
    key = child_thread_id(config["thread_id"], "research", step)
    assert key == f"{config['thread_id']}::research@{step}"
    assert await store.aversion(key) is not None  # kept in the parent's checkpointer
    child = await app.aget_subgraph_state(config, "research")
    assert child is not None
    assert child.execution_meta.is_interrupted()
    assert ([n["id"] for n in child.notes], child.scratch) == (["r1-owls"], "r1")

    done = await app.ainvoke({"resume": "yes"}, config, response_granularity="full")
    assert calls == Counter(plan=1, r1=1, r2=2, write=1)  # r1 did not run again
    assert texts(done["state"].context) == ["hi", "r2: yes", "writing with ['r1-owls']"]
    assert await app.aget_subgraph_state(config, "research") is None  # no child run now
    # the finished child's thread went once the parent's step was saved
    assert await store.aversion(key) is None
    left = [t for t in await store.alist_threads() if t.startswith(config["thread_id"])]
    assert left == [config["thread_id"]]


async def test_two_questions_in_the_child_need_two_resumes_each_with_its_answer(
    store: BaseCheckpointer,
) -> None:
    calls: Counter[str] = Counter()
    child = researcher(ask(calls, "a1", "first?"), ask(calls, "a2", "second?"))
    app = around(child, calls, store)
    config = thread()
    first = await app.ainvoke(inp("hi"), config)
    assert first["interrupt"]["value"] == "first?"
    second = await app.ainvoke({"resume": "one"}, config)
    assert second["interrupt"]["value"] == "second?"
    assert second["interrupt"]["node"] == "research"
    done = await app.ainvoke({"resume": "two"}, config, response_granularity="full")
    assert texts(done["state"].context) == ["hi", "a1: one", "a2: two", "writing with []"]
    assert calls == Counter(plan=1, a1=2, a2=2, write=1)


async def test_a_failure_in_the_child_fails_the_parent_and_a_retry_skips_what_finished(
    store: BaseCheckpointer,
) -> None:
    calls: Counter[str] = Counter()

    def flaky(state: Lab) -> Message:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise RuntimeError("boom")
        return ai("flaky ok")

    app = around(researcher(note(calls, "r1"), ("flaky", flaky)), calls, store)
    config = thread()
    with pytest.raises(Exception, match="boom"):
        await app.ainvoke(inp("hi"), config)
    done = await app.ainvoke(None, config, response_granularity="full")
    assert calls == Counter(plan=1, r1=1, flaky=2, write=1)
    state = done["state"]
    assert texts(state.context) == ["hi", "flaky ok", "writing with ['r1-owls']"]
    assert once_each(state.context)


async def test_a_breakpoint_in_the_child_pauses_the_parent_and_a_stop_pauses_both() -> None:
    """A child's `interrupt_before` is the parent's pause (resumed with any answer); a stop of
    the parent while the child runs cancels the child, and `ainvoke(None)` continues it
    without running again what it finished."""
    calls: Counter[str] = Counter()
    running = asyncio.Event()

    async def slow(state: Lab) -> dict[str, Any]:
        calls["slow"] += 1
        if calls["slow"] == 1:  # the first time, it waits to be stopped
            running.set()
            await asyncio.Event().wait()
        return {"scratch": "slow"}

    child = chain(note(calls, "r1"), ("slow", slow), state=Lab).compile(
        name="researcher", interrupt_before=["slow"]
    )
    app = around(child, calls)
    config = thread()
    paused = await app.ainvoke(inp("hi"), config)
    assert paused["interrupt"]["reason"] == "interrupt_before"
    assert paused["interrupt"]["node"] == "research"
    assert calls == Counter(plan=1, r1=1)

    resumed = asyncio.create_task(app.ainvoke({"resume": None}, config))
    await running.wait()
    await app.astop(config)
    stopped = await resumed
    assert stopped["interrupted"]["reason"] == "stop_requested"

    # continued: the child stops again at its breakpoint (as a graph of its own would)
    again = await app.ainvoke(None, config)
    assert again["interrupt"]["reason"] == "interrupt_before"
    done = await app.ainvoke({"resume": None}, config, response_granularity="full")
    assert calls == Counter(plan=1, r1=1, slow=2, write=1)
    assert texts(done["state"].context)[-1] == "writing with ['r1-owls']"


async def test_the_tool_ledger_works_inside_the_child(store: BaseCheckpointer) -> None:
    ran: Counter[str] = Counter()

    def lookup(q: str) -> str:
        """Look something up."""
        ran["lookup"] += 1
        return f"found {q}"

    def approve() -> str:
        """Ask a person."""
        ran["approve"] += 1
        return f"approved: {interrupt('ok?')}"

    def agent(state: AgentState) -> Message:
        return asking(tool_call("lookup", "c1", q="owls"), tool_call("approve", "c2"))

    child = chain(("agent", agent), ("tools", ToolNode([lookup, approve]))).compile(name="tooly")
    graph = chain(("research", child), state=Doc)
    app = graph.compile(checkpointer=store)
    config = thread()
    paused = await app.ainvoke(inp("hi"), config)
    assert paused["interrupt"]["value"] == "ok?"
    done = await app.ainvoke({"resume": "sure"}, config, response_granularity="full")
    assert ran == Counter(lookup=1, approve=2)  # the finished call was not run again
    answered = results(done["state"].context)
    assert (answered["c1"].output, answered["c2"].output) == ("found owls", "approved: sure")
    assert tool_pairs_intact(done["state"].context)


async def test_the_tool_ledger_works_in_children_run_by_send() -> None:
    """Two sent children with tools; one pauses in a tool. On resume the child that finished
    is not run again and the paused one replays its finished call from its ledger."""
    ran: Counter[str] = Counter()

    def lookup(q: str) -> str:
        """Look something up."""
        ran[f"lookup {q}"] += 1
        return f"found {q}"

    def approve() -> str:
        """Ask a person."""
        ran["approve"] += 1
        return f"approved: {interrupt('ok?')}"

    def agent(state: Lab) -> Message:
        calls = [tool_call("lookup", f"{state.topic}1", q=state.topic)]
        if state.topic == "b":
            calls.append(tool_call("approve", "b2"))
        return asking(*calls)

    child = chain(("agent", agent), ("tools", ToolNode([lookup, approve])), state=Lab)
    app = fan_out(child.compile(name="tooly"), [{"topic": "a"}, {"topic": "b"}])
    config = thread()
    paused = await app.ainvoke(inp("hi"), config)
    assert paused["interrupt"]["key"] == "node:research[1]:0"
    done = await app.ainvoke({"resume": "sure"}, config, response_granularity="full")
    assert ran == Counter({"lookup a": 1, "lookup b": 1, "approve": 2})
    answered = results(done["state"].context)
    assert {k: v.output for k, v in answered.items()} == {
        "a1": "found a",
        "b1": "found b",
        "b2": "approved: sure",
    }


RESUME_SCRIPT = """
import asyncio, json, sys
from collections import Counter
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tests.core.graph.test_subgraphs import asking_app

async def main(db, thread_id):
    calls = Counter()
    app = asking_app(calls, SqliteCheckpointer(db))
    result = await app.ainvoke({"resume": "from afar"}, {"thread_id": thread_id},
                               response_granularity="full")
    print(json.dumps({"calls": calls, "texts": [m.text() for m in result["state"].context]}))
    await app.aclose()

asyncio.run(main(*sys.argv[1:]))
"""


def resume_elsewhere(db: Path, thread_id: str) -> dict[str, Any]:
    """RESUME_SCRIPT in a new Python process; what it printed last (JSON)."""
    proc = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT, str(db), thread_id],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


async def test_a_paused_child_is_resumed_from_another_process(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    calls: Counter[str] = Counter()
    app = asking_app(calls, SqliteCheckpointer(db))
    config = thread()
    assert (await app.ainvoke(inp("hi"), config))["interrupt"]["node"] == "research"
    await app.aclose()
    out = resume_elsewhere(db, config["thread_id"])
    assert out["calls"] == {"r2": 1, "write": 1}  # neither plan nor r1 ran there
    assert out["texts"] == ["hi", "r2: from afar", "writing with ['r1-owls']"]


async def test_a_newly_compiled_app_on_the_same_file_resumes_the_child(tmp_path: Path) -> None:
    config = thread()
    first: Counter[str] = Counter()
    app = asking_app(first, SqliteCheckpointer(tmp_path / "t.db"))
    await app.ainvoke(inp("hi"), config)
    await app.aclose()
    again: Counter[str] = Counter()
    app = asking_app(again, SqliteCheckpointer(tmp_path / "t.db"))
    try:
        done = await app.ainvoke({"resume": "later"}, config, response_granularity="full")
    finally:
        await app.aclose()
    assert again == Counter(r2=1, write=1)
    assert texts(done["state"].context)[1:] == ["r2: later", "writing with ['r1-owls']"]


# -- aget_subgraph_state -----------------------------------------------------------------------


def nested(calls: Counter[str], checkpointer: BaseCheckpointer) -> CompiledGraph:
    """parent: research -> write; research: look -> inner; inner: dig -> ask."""
    inner = researcher(say(calls, "dig"), ask(calls, "deep", "deeper?"))
    outer = chain(say(calls, "look"), ("inner", inner), state=Lab).compile(name="outer")
    return chain(("research", outer), say(calls, "write"), state=Doc).compile(
        checkpointer=checkpointer
    )


async def test_subgraph_state_by_nested_path_and_errors_for_other_nodes() -> None:
    calls: Counter[str] = Counter()
    app = nested(calls, InMemoryCheckpointer())
    config = thread()
    paused = await app.ainvoke(inp("hi"), config)
    assert (paused["interrupt"]["node"], paused["interrupt"]["value"]) == ("research", "deeper?")
    outer = await app.aget_subgraph_state(config, "research")
    inner = await app.aget_subgraph_state(config, ("research", "inner"))
    assert outer is not None
    assert inner is not None
    assert texts(outer.context) == ["hi", "look"]
    assert texts(inner.context) == ["hi", "look", "dig"]
    assert inner.execution_meta.is_interrupted()
    with pytest.raises(ValueError, match=r"\['research'\]"):
        await app.aget_subgraph_state(config, "write")
    with pytest.raises(ValueError, match=r"\['inner'\]"):
        await app.aget_subgraph_state(config, ("research", "look"))

    done = await app.ainvoke({"resume": "yes"}, config, response_granularity="full")
    assert texts(done["state"].context) == ["hi", "look", "dig", "deep: yes", "write"]
    assert calls == Counter(look=1, dig=1, deep=2, write=1)


# -- streaming ---------------------------------------------------------------------------------


@pytest.mark.parametrize("granularity", ["low", "partial", "full"])
async def test_chunks_carry_their_namespace_and_every_message_streams_once(
    granularity: str,
) -> None:
    calls: Counter[str] = Counter()
    app = around(researcher(say(calls, "r1", "child says"), note(calls, "r2")), calls)
    config = thread()
    chunks = [c async for c in app.astream(inp("hi"), config, response_granularity=granularity)]
    found = namespaces(chunks)
    assert found["child says"] == [("research",)]
    assert found["writing with ['r2-owls']"] == [()]
    assert {c.namespace for c in chunks} <= {(), ("research",)}
    state = await stored(app, config)
    assert texts(state.context) == ["hi", "child says", "writing with ['r2-owls']"]
    assert once_each(state.context)


async def test_a_resumed_child_streams_under_its_namespace() -> None:
    calls: Counter[str] = Counter()
    app = asking_app(calls, InMemoryCheckpointer())
    config = thread()
    await app.ainvoke(inp("hi"), config)
    chunks = [c async for c in app.astream({"resume": "yes"}, config, "partial")]
    found = namespaces(chunks)
    assert found == {"r2: yes": [("research",)], "writing with ['r1-owls']": [()]}


# a message the child streamed before it paused is not streamed again when the resumed
# parent's step adds it
async def test_messages_streamed_before_a_pause_are_not_streamed_again_on_resume() -> None:
    calls: Counter[str] = Counter()
    child = researcher(say(calls, "r1", "child says"), ask(calls, "r2"))
    app = around(child, calls)
    config = thread()
    chunks = [c async for c in app.astream(inp("hi"), config, "partial")]
    chunks += [c async for c in app.astream({"resume": "yes"}, config, "partial")]
    found = namespaces(chunks)
    assert found["child says"] == [("research",)]
    assert found["r2: yes"] == [("research",)]
    assert found["writing with []"] == [()]


async def test_a_grandchilds_chunks_have_the_full_path() -> None:
    calls: Counter[str] = Counter()
    app = nested(calls, InMemoryCheckpointer())
    config = thread()
    first = namespaces([c async for c in app.astream(inp("hi"), config, "partial")])
    assert (first["look"], first["dig"]) == ([("research",)], [("research", "inner")])
    then = namespaces([c async for c in app.astream({"resume": "yes"}, config, "partial")])
    assert (then["deep: yes"], then["write"]) == ([("research", "inner")], [()])
    state = await stored(app, config)
    assert texts(state.context) == ["hi", "look", "dig", "deep: yes", "write"]
    assert once_each(state.context)


async def test_a_childs_deltas_stream_under_its_namespace() -> None:
    async def writer(state: AgentState) -> AsyncIterator[Message]:
        yield Message.text_message("Hel", "assistant", "reply-1", delta=True)
        yield Message.text_message("lo", "assistant", "reply-1", delta=True)
        yield Message.text_message("Hello", "assistant", "reply-1")

    child = chain(("writer", writer)).compile(name="streamer")
    app = chain(("research", child), state=Doc).compile(checkpointer=InMemoryCheckpointer())
    config = thread()
    chunks = [c async for c in app.astream(inp("hi"), config, "partial")]
    deltas = [(c.message.text(), c.namespace) for c in chunks if c.message and c.message.delta]
    assert deltas == [("Hel", ("research",)), ("lo", ("research",))]
    assert namespaces(chunks)["Hello"] == [("research",)]
    assert texts((await stored(app, config)).context) == ["hi", "Hello"]


# -- Command(graph=Command.PARENT) -------------------------------------------------------------


def desk(child: CompiledGraph, calls: Counter[str]) -> CompiledGraph:
    """START -> research (the child) -> triage; billing only reachable by a command."""
    graph = StateGraph(Doc)
    graph.add_node("research", child)
    for name in ("triage", "billing"):
        graph.add_node(name, say(calls, name)[1])
        graph.add_edge(name, END)
    graph.add_edge(START, "research")
    graph.add_edge("research", "triage")
    return graph.compile(checkpointer=InMemoryCheckpointer())


async def test_a_child_node_routes_in_the_parent_with_command_parent() -> None:
    calls: Counter[str] = Counter()

    def hand_over(state: Lab) -> Command:
        calls["hand_over"] += 1
        return Command(
            goto="billing", update={"active": "billing", "owner": "billing"}, graph=Command.PARENT
        )

    child = researcher(say(calls, "r1", "child says"), ("hand_over", hand_over), say(calls, "r3"))
    app = desk(child, calls)
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(r1=1, hand_over=1, billing=1)  # not r3, not triage
    assert (state.active, state.owner) == ("billing", "billing")  # the parent's fields
    assert texts(state.context) == ["hi", "child says", "billing"]


def tool_desk(calls: Counter[str], update: dict[str, Any]) -> CompiledGraph:
    """The desk around a child (state Lab) whose tool hands over to billing with `update`."""

    def transfer_to_billing(reason: str) -> Command:
        """Hand the customer to billing."""
        return Command(goto="billing", update=update, graph=Command.PARENT)

    def agent(state: AgentState) -> Message:
        return asking(tool_call("transfer_to_billing", "c1", reason="refund"))

    tools = ToolNode([transfer_to_billing])
    child = chain(("agent", agent), ("tools", tools), say(calls, "after"), state=Lab)
    return desk(child.compile(name="tooly"), calls)


async def test_a_tool_in_the_child_routes_in_the_parent_and_its_answer_is_kept() -> None:
    calls: Counter[str] = Counter()
    app = tool_desk(calls, {"active": "billing"})
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(billing=1)  # neither the child's "after" nor triage
    assert state.active == "billing"
    assert roles(state.context) == ["user", "assistant", "tool", "assistant"]
    assert state.context[1].tool_call_blocks()[0].id == "c1"
    assert "c1" in results(state.context[2:3])  # the answer right after its call
    assert tool_pairs_intact(state.context)


# a tool's Command(graph=PARENT) update is the parent's to check: it may set `owner`, a field
# only the parent has
async def test_a_child_tools_parent_command_may_update_fields_only_the_parent_has() -> None:
    calls: Counter[str] = Counter()
    app = tool_desk(calls, {"owner": "billing"})
    state = (await app.ainvoke(inp("hi"), thread(), response_granularity="full"))["state"]
    assert calls == Counter(billing=1)
    assert state.owner == "billing"


async def test_command_parent_outside_a_subgraph_is_a_graph_error() -> None:
    def up(state: AgentState) -> Command:
        return Command(goto="billing", graph=Command.PARENT)

    app = chain(("up", up)).compile(checkpointer=False)
    with pytest.raises(GraphError, match="not running as a subgraph") as caught:
        await app.ainvoke(inp("hi"))
    assert caught.value.error_code == "GRAPH_004"


async def test_a_command_to_another_named_graph_is_refused() -> None:
    with pytest.raises(ValueError, match=r"Command\.PARENT"):
        Command(goto="billing", graph="other")


# -- usage -------------------------------------------------------------------------------------


async def test_model_calls_in_the_child_count_in_the_parents_usage() -> None:
    from tenxgraph.core.graph import Agent

    asked: list[int] = []

    def model(messages: list[Message], info: Any) -> str:
        asked.append(len(messages))
        return f"answer {len(asked)}"

    child = chain(("agent", Agent(FunctionModel(model)))).compile(name="thinker")
    app = chain(("research", child), ("again", Agent(FunctionModel(model))), state=Doc).compile(
        checkpointer=InMemoryCheckpointer()
    )
    result = await app.ainvoke(inp("hi"), thread())
    assert len(asked) == 2
    assert result["token_usage"]["model_calls"] == 2
