"""Tools, tried as a hostile user would: on memory, SQLite and PostgreSQL.

- Whatever a tool returns, the model gets a result it can read, the thread stores it and
  reads it back equal, and the thread stays usable (bytes used to brick it).
- A tool raising `CancelledError` by itself is an error result; the run goes on.
- A tool's `idempotency_key` is the same when a kill makes it run again.
- Calls of tools that require approval wait for a person's decision, given from any process.

Only public API of the time before these promises is imported at module level, so that the
suite runs (and fails case by case) against the old code too.
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.graph import CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import Message, ToolCallBlock, ToolResult
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils import tool
from tenxgraph.utils.constants import END, START
from tests._helpers import asking, results, strict_json, tools_only
from tests.adversarial import _idempotency_worker as worker
from tests.storage.conftest import Backend

WAIT = 20.0  # seconds: the bound on any wait that would hang if a promise broke
WORKER = Path(__file__).with_name("_idempotency_worker.py")
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


# -- helpers --------------------------------------------------------------------------------


def thread() -> dict[str, Any]:
    return {"thread_id": f"adv-{uuid.uuid4().hex}"}


def reopened(backend: Backend) -> BaseCheckpointer:
    """The same storage through another instance, as another process would see it (the
    in-memory store only exists once)."""
    return backend.open() if backend.is_sql else backend.store


async def invoke(app: CompiledGraph, data: Any, config: dict[str, Any]) -> dict[str, Any]:
    async with asyncio.timeout(WAIT):
        return await app.ainvoke(data, config)


# -- every return value becomes a result the model can read ----------------------------------


class Opaque:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _deep(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        node.append([])
        node = node[0]
    return root


def _cycle() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


def data_of(output: Any) -> bytes:
    """The bytes a binary result carries."""
    return base64.b64decode(output["data_base64"])


def cut_note(output: Any) -> Any:
    """What sits at the bottom of a nested-lists result."""
    while isinstance(output, list) and output:
        output = output[0]
    return output


# name: (what the tool returns, what the model reads must show)
RETURNS: dict[str, tuple[Any, Any]] = {
    "bytes-png": (lambda: PNG, lambda out: data_of(out) == PNG),
    "bytes-binary": (lambda: b"\xff\xfe\x00\x01", lambda out: data_of(out) == b"\xff\xfe\x00\x01"),
    "bytearray": (lambda: bytearray(b"\xc3\x28"), lambda out: data_of(out) == b"\xc3\x28"),
    "memoryview": (lambda: memoryview(b"\x80abc"), lambda out: data_of(out) == b"\x80abc"),
    "bytes-in-dict": (
        lambda: {"name": "report", "blob": b"\xde\xad\xbe\xef"},
        lambda out: out["name"] == "report" and data_of(out["blob"]) == b"\xde\xad\xbe\xef",
    ),
    "nan": (lambda: float("nan"), lambda out: out == "NaN"),
    "infinities": (
        lambda: {"low": -math.inf, "high": math.inf, "ok": 1.5},
        lambda out: out == {"low": "-Infinity", "high": "Infinity", "ok": 1.5},
    ),
    "deep-5000": (lambda: _deep(5000), lambda out: "nested deeper than" in cut_note(out)),
    "cycle": (_cycle, lambda out: out == [1, "<circular reference to a list>"]),
    "huge-int": (lambda: 10**5000, lambda out: int(out, 16) == 10**5000),
    "lone-surrogate": (lambda: "caf\udce9", lambda out: out == "caf\\udce9"),
    "str-raises": (Opaque, lambda out: out == "<Opaque object (its str() failed)>"),
    "tool-result-bytes": (
        lambda: ToolResult(b"\x00\xff"),
        lambda out: data_of(out) == b"\x00\xff",
    ),
}


@pytest.mark.parametrize("name", list(RETURNS))
async def test_any_return_value_is_a_readable_result_stored_and_read_back_equal(
    backend: Backend, name: str
) -> None:
    make, readable = RETURNS[name]

    def give() -> Any:
        """Give something awkward."""
        return make()

    config = thread()
    app = tools_only([give], checkpointer=backend.store)
    data = {"messages": [Message.text_message("go"), asking(ToolCallBlock(id="c1", name="give"))]}
    done = await invoke(app, data, config)

    block = results(done["messages"])["c1"]
    assert not block.is_error
    assert strict_json(block.output) == block.output  # JSON-safe: no NaN, bytes, objects
    assert readable(block.output), block.output
    again = await tools_only([give], checkpointer=reopened(backend)).aget_state(config)
    assert again is not None
    assert again.execution_meta.status == "completed"
    assert results(again.context)["c1"] == block  # read back equal


async def test_bytes_are_base64_data_with_a_sniffed_mime_type(backend: Backend) -> None:
    def snapshot() -> bytes:
        """Take a screenshot."""
        return PNG

    config = thread()
    app = tools_only([snapshot], checkpointer=backend.store)
    data = {
        "messages": [Message.text_message("go"), asking(ToolCallBlock(id="c1", name="snapshot"))]
    }
    done = await invoke(app, data, config)

    output = results(done["messages"])["c1"].output
    assert output["mime_type"] == "image/png"
    assert output["size_bytes"] == len(PNG)
    assert base64.b64decode(output["data_base64"]) == PNG


async def test_a_tool_returning_bytes_does_not_brick_the_thread(backend: Backend) -> None:
    """The reported case: every later message on the thread retried the failing step."""
    seen: list[str] = []

    def download() -> bytes:
        """Download the invoice."""
        return b"%PDF-1.7\n\xe2\xe3\xcf\xd3"

    def model(messages: list[Message], info: Any) -> Any:
        seen.append(messages[-1].role)
        if messages[-1].role == "tool":
            return "Here is your invoice."
        return [ToolCallBlock(id=f"c{len(seen)}", name="download", args={})]

    app = ReactAgent(FunctionModel(model), [download]).compile(checkpointer=backend.store)
    config = thread()
    first = await invoke(app, {"messages": [Message.text_message("invoice?")]}, config)
    assert first["messages"][-1].text() == "Here is your invoice."
    later = await invoke(app, {"messages": [Message.text_message("again")]}, config)
    assert later["messages"][-1].text() == "Here is your invoice."
    state = await app.aget_state(config)
    assert state is not None
    pdfs = [b.output for b in results(state.context).values()]
    assert [p["mime_type"] for p in pdfs] == ["application/pdf", "application/pdf"]


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
async def test_a_tool_raising_cancelled_error_by_itself_is_an_error_result(
    backend: Backend, sync: bool
) -> None:
    async def flaky_async() -> str:
        """Call a service."""
        raise asyncio.CancelledError("the HTTP client gave up")

    def flaky_sync() -> str:
        """Call a service."""
        raise asyncio.CancelledError("the HTTP client gave up")

    flaky = flaky_sync if sync else flaky_async
    flaky.__name__ = "flaky"
    config = thread()
    app = tools_only([flaky], checkpointer=backend.store)
    data = {"messages": [Message.text_message("go"), asking(ToolCallBlock(id="c1", name="flaky"))]}
    done = await invoke(app, data, config)

    block = results(done["messages"])["c1"]
    assert block.is_error
    assert "CancelledError" in block.output
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"


# -- exactly once, honestly: a stable idempotency key ----------------------------------------


def _worker_args(backend: Backend, key_file: Path) -> list[str]:
    if backend.name == "sqlite":
        return ["sqlite", str(backend.db_path), str(key_file)]
    return ["postgres", backend.dsn, backend.schema, str(key_file)]


def _kill_after_the_side_effect(backend: Backend, key_file: Path) -> str:
    """Start the worker, wait (polling the file, bounded by WAIT) until its tool wrote its
    key, SIGKILL it there and reap it (so its lease's owner is seen dead). What the file
    holds then."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), *_worker_args(backend, key_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + WAIT
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if key_file.exists() and key_file.read_text().endswith("\n"):
                break
            time.sleep(0.02)  # a poll of the condition, not a wait for time to pass
    finally:
        proc.send_signal(signal.SIGKILL)
        _, stderr = proc.communicate(timeout=WAIT)
    written = key_file.read_text() if key_file.exists() else ""
    assert written.count("\n") == 1, f"the tool never ran in the worker:\n{stderr[-2000:]}"
    assert proc.returncode == -signal.SIGKILL, stderr[-2000:]
    return written


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
async def test_the_idempotency_key_is_the_same_when_a_kill_makes_a_tool_run_again(
    sql_backend: Backend, tmp_path: Path
) -> None:
    """A kill between a tool's side effect and its ledger write runs the tool again: with
    the same key, so the outside system can tell."""
    key_file = tmp_path / "keys.txt"
    _kill_after_the_side_effect(sql_backend, key_file)

    app = worker.build(sql_backend.open(), key_file, hang=False)
    done = await invoke(app, None, {"thread_id": worker.THREAD})

    assert done["messages"][-1].text() == "done: charged 5"
    first, second = key_file.read_text().splitlines()
    assert first == second  # the re-run got the key the killed run had
    assert first.startswith("tx_")


async def test_idempotency_keys_differ_per_call_and_stay_hidden_from_the_model(
    backend: Backend,
) -> None:
    keys: dict[str, str] = {}

    def charge(amount: int, tool_call_id: str, idempotency_key: str) -> str:
        """Charge the card."""
        keys[tool_call_id] = idempotency_key
        return "charged"

    node = ToolNode([charge])
    params = node.all_tools_sync()[0]["function"]["parameters"]
    assert list(params["properties"]) == ["amount"]  # the model never sees the key
    graph = StateGraph()
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile(checkpointer=backend.store)
    calls = [ToolCallBlock(id=f"c{i}", name="charge", args={"amount": i}) for i in range(3)]
    data = {"messages": [Message.text_message("go"), asking(*calls)]}
    await invoke(app, data, thread())
    await invoke(app, data, thread())  # the same call ids on another thread

    assert len(keys) == 3
    assert len(set(keys.values())) == 3


# -- approve, edit or reject pending tool calls, from any process ----------------------------


class Shop:
    """Tools with side effects, counted across the app instances that run them."""

    def __init__(self) -> None:
        self.lookups = 0
        self.refunds: list[tuple[int, int]] = []

    def tools(self) -> list[Any]:
        def lookup(order_id: int) -> dict[str, Any]:
            """Find an order."""
            self.lookups += 1
            return {"order_id": order_id, "total": 40}

        @tool(requires_approval=True)
        def refund(order_id: int, amount: int) -> str:
            """Refund part of an order."""
            self.refunds.append((order_id, amount))
            return f"Refunded {amount} on order {order_id}."

        return [lookup, refund]

    def app(self, store: BaseCheckpointer) -> CompiledGraph:
        def model(messages: list[Message], info: Any) -> Any:
            if messages[-1].role == "tool":
                return "Done."
            return [
                ToolCallBlock(id="c1", name="lookup", args={"order_id": 7}),
                ToolCallBlock(id="c2", name="refund", args={"order_id": 7, "amount": 40}),
            ]

        return ReactAgent(FunctionModel(model), self.tools()).compile(checkpointer=store)


async def _paused(shop: Shop, backend: Backend) -> tuple[dict[str, Any], dict[str, Any]]:
    config = thread()
    paused = await invoke(
        shop.app(backend.store), {"messages": [Message.text_message("refund 7")]}, config
    )
    return paused, config


async def test_a_call_that_requires_approval_pauses_before_it_runs(backend: Backend) -> None:
    shop = Shop()
    paused, _ = await _paused(shop, backend)

    asked = paused["interrupt"]
    assert asked["reason"] == "tool_approval"
    assert asked["value"]["tool_calls"] == [
        {"id": "c2", "name": "refund", "args": {"order_id": 7, "amount": 40}}
    ]
    assert shop.refunds == []
    assert shop.lookups == 1  # the call needing no approval ran, and is recorded


@pytest.mark.parametrize(
    ("decision", "refunds", "output"),
    [
        ({"c2": "approve"}, [(7, 40)], "Refunded 40 on order 7."),
        ("approve", [(7, 40)], "Refunded 40 on order 7."),  # one pending call: a bare decision
        (
            {"c2": {"edit": {"order_id": 7, "amount": 20}}},
            [(7, 20)],
            "Refunded 20 on order 7.",
        ),
        ({"c2": {"reject": "over the limit"}}, [], "over the limit"),
        ("reject", [], "rejected"),
    ],
    ids=["approve", "bare-approve", "edit", "reject", "bare-reject"],
)
async def test_another_process_approves_edits_or_rejects_a_pending_call(
    backend: Backend, decision: Any, refunds: list[tuple[int, int]], output: str
) -> None:
    shop = Shop()
    _, config = await _paused(shop, backend)

    other = shop.app(reopened(backend))  # another process, say
    done = await invoke(other, {"resume": decision}, config)

    assert done["messages"][-1].text() == "Done."
    assert shop.refunds == refunds
    assert shop.lookups == 1  # replayed from the ledger, not run again
    state = await other.aget_state(config)
    assert state is not None
    found = results(state.context)
    assert output in found["c2"].output
    assert found["c2"].is_error == (not refunds)
    assert found["c1"].output == {"order_id": 7, "total": 40}


async def test_an_edit_is_recorded_with_the_arguments_that_ran(backend: Backend) -> None:
    shop = Shop()
    _, config = await _paused(shop, backend)
    other = shop.app(reopened(backend))
    await invoke(other, {"resume": {"c2": {"edit": {"order_id": 7, "amount": 5}}}}, config)

    state = await other.aget_state(config)
    assert state is not None
    [message] = [
        m for m in state.context if m.role == "tool" and m.metadata["tool_call_id"] == "c2"
    ]
    assert message.metadata["approval"] == "edited"
    assert message.metadata["function_argument"] == {"order_id": 7, "amount": 5}


@pytest.mark.parametrize(
    ("decision", "said"),
    [
        ({}, "no decision for ['c2']"),
        ({"c2": "approve", "c9": "approve"}, "['c9'] is not a pending call"),
        ({"c2": "maybe"}, "a decision is"),
        ({"c2": {"edit": {"order_id": 7, "amount": "lots"}}}, "amount"),
        (["approve"], "dict of one decision per call id"),
    ],
    ids=["missing", "unknown", "unreadable", "invalid-edit", "not-a-dict"],
)
async def test_a_wrong_decision_is_a_clear_error_and_the_thread_stays_paused(
    backend: Backend, decision: Any, said: str
) -> None:
    shop = Shop()
    paused, config = await _paused(shop, backend)
    other = shop.app(reopened(backend))

    with pytest.raises(ValueError, match=r"tool approval|decision|edited arguments") as caught:
        await invoke(other, {"resume": decision}, config)
    assert said in str(caught.value)

    state = await other.aget_state(config)
    assert state is not None
    assert state.execution_meta.interrupt_data == paused["interrupt"]  # still paused, as it was
    done = await invoke(other, {"resume": {"c2": "approve"}}, config)
    assert done["messages"][-1].text() == "Done."
    assert shop.refunds == [(7, 40)]
    assert shop.lookups == 1


async def test_several_pending_calls_are_asked_about_at_once(backend: Backend) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def model(messages: list[Message], info: Any) -> Any:
        if messages[-1].role == "tool":
            return "Done."
        return [
            ToolCallBlock(id="d1", name="delete", args={"path": "/tmp/a"}),
            ToolCallBlock(id="d2", name="delete", args={"path": "/etc/passwd"}),
        ]

    def app(store: BaseCheckpointer) -> CompiledGraph:
        return ReactAgent(FunctionModel(model), [delete]).compile(checkpointer=store)

    config = thread()
    paused = await invoke(app(backend.store), {"messages": [Message.text_message("x")]}, config)
    assert [c["id"] for c in paused["interrupt"]["value"]["tool_calls"]] == ["d1", "d2"]

    decisions = {"d1": "approve", "d2": {"reject": "never that one"}}
    await invoke(app(reopened(backend)), {"resume": decisions}, config)
    assert ran == ["/tmp/a"]


async def test_tool_node_can_require_approval_by_name(backend: Backend) -> None:
    ran: list[int] = []

    def pay(amount: int) -> str:
        """Pay."""
        ran.append(amount)
        return "paid"

    def app(store: BaseCheckpointer) -> CompiledGraph:
        node = ToolNode([pay], requires_approval=["pay"])
        graph = StateGraph()
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        return graph.compile(checkpointer=store)

    config = thread()
    call = ToolCallBlock(id="p1", name="pay", args={"amount": 3})
    data = {"messages": [Message.text_message("go"), asking(call)]}
    paused = await invoke(app(backend.store), data, config)
    assert paused["interrupt"]["reason"] == "tool_approval"
    assert ran == []
    await invoke(app(reopened(backend)), {"resume": "approve"}, config)
    assert ran == [3]


# -- call ids a hostile model sends -----------------------------------------------------------


@pytest.mark.parametrize(
    "call_id",
    ["c\x001", "c\n\x1b[2J", "c" * 10_000],
    ids=["nul", "control", "10k-chars"],
)
async def test_a_hostile_call_id_runs_its_tool_once_and_replays_from_the_ledger(
    backend: Backend, call_id: str
) -> None:
    """The ledger keys calls by their ids; ids no store can keep as they are (PostgreSQL text
    refuses NUL) must neither fail the step nor break the replay after a pause."""
    ran: list[str] = []

    def look(order_id: int) -> str:
        """Look an order up."""
        ran.append("look")
        return f"order {order_id}"

    @tool(requires_approval=True)
    def refund(order_id: int) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    graph = StateGraph()
    graph.add_node("tools", ToolNode([look, refund]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile(checkpointer=backend.store)
    config = thread()
    ask = asking(
        ToolCallBlock(id=call_id, name="look", args={"order_id": 7}),
        ToolCallBlock(id="r1", name="refund", args={"order_id": 7}),
    )
    paused = await invoke(app, {"messages": [Message.text_message("go"), ask]}, config)
    assert paused["interrupt"]["reason"] == "tool_approval"
    done = await invoke(app, {"resume": "approve"}, config)  # look is replayed, not re-run
    assert ran == ["look"]
    answers = results(done["messages"])
    assert answers[call_id].output == "order 7"
    assert answers["r1"].output == "refunded 7"


async def test_a_call_id_with_a_lone_surrogate_is_refused_by_name_and_nothing_is_written(
    backend: Backend,
) -> None:
    from tenxgraph.core.exceptions import SerializationError

    def x() -> str:
        """X."""
        return "x"

    app = tools_only([x], checkpointer=backend.store)
    config = thread()
    ask = asking(ToolCallBlock(id="c\udcff", name="x", args={}))
    with pytest.raises(SerializationError, match="lone surrogate") as refused:
        await invoke(app, {"messages": [Message.text_message("go"), ask]}, config)
    assert "content" in str(refused.value.context["field"])
    assert await app.aget_state(config) is None
