"""What tests/adversarial/test_known_faults.py attacks with: an app whose model and tool count
their runs, ways to damage a thread's stored rows (and payloads that would show it if stored
data were ever unpickled or imported), a store that "dies" mid-step, a provider's answers, and
broken database files for the `tenxgraph` command.

Only public API of the time before issue 15 is imported, so that the suite runs against the old
code too.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field

from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tests.core.llm._support import USAGE_EVENT, event, sse
from tests.storage.conftest import Backend

# -- the app under attack, and its stored rows ------------------------------------------------


class Shop(AgentState):
    credits: int = 0
    notes: dict[str, Any] = Field(default_factory=dict)


class World:
    """The app under attack: a model that echoes, or asks for `pay` when told "pay", and the
    `pay` tool; both count their runs, so "nothing ran" can be checked."""

    def __init__(self) -> None:
        self.model_calls = 0
        self.paid: list[int] = []

    def model(self, messages: list[Message], info: ModelInfo) -> Any:
        self.model_calls += 1
        last = messages[-1]
        if last.role == "tool":
            return f"done: {last.text()}"
        if last.text().startswith("pay"):
            return [ToolCallBlock(id="call-pay", name="pay", args={"amount": 5})]
        return f"echo {last.text()}"

    def app(self, store: BaseCheckpointer) -> CompiledGraph:
        paid = self.paid

        def pay(amount: int) -> str:
            """Pay an amount of euros to the customer.

            Args:
                amount: How many euros.
            """
            paid.append(amount)
            return f"paid {amount}"

        return ReactAgent(FunctionModel(self.model), [pay], state=Shop).compile(checkpointer=store)


# a thread's key (its messages and checkpoints name it by that), from its id
_KEY = "thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?)"

_ORDER = {
    "tx_threads": "thread_id",
    "tx_checkpoints": "thread_key, version",
    "tx_messages": "thread_key, seq",
    "tx_tool_results": "thread_id, message_id, call_id",
    "tx_stop_requests": "thread_id",
}


async def stored_rows(backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store, in a stable order."""
    return {
        table: await backend.sql(f"SELECT * FROM {table} ORDER BY {order}")
        for table, order in _ORDER.items()
    }


async def message_body(backend: Backend, seq: int, thread_id: str = "victim") -> str:
    rows = await backend.sql(
        f"SELECT body FROM tx_messages WHERE {_KEY} AND seq = ?", thread_id, seq
    )
    return str(rows[0][0])


async def set_message_body(backend: Backend, seq: int, body: str) -> None:
    await backend.sql(
        f"UPDATE tx_messages SET body = ? WHERE {_KEY} AND seq = ?", body, "victim", seq
    )


async def latest_header(backend: Backend) -> dict[str, Any]:
    rows = await backend.sql(
        f"SELECT header FROM tx_checkpoints WHERE {_KEY} ORDER BY version DESC", "victim"
    )
    return json.loads(rows[0][0])  # type: ignore[no-any-return]


async def set_header(backend: Backend, header: str) -> None:
    """Every version of the victim's header: whichever one a reader picks is the hostile one."""
    await backend.sql(f"UPDATE tx_checkpoints SET header = ? WHERE {_KEY}", header, "victim")


class Planted:
    """What `pickle.loads` would do with a payload: create the file `path`. If the file ever
    appears, stored data was unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


def pickle_payload(marker: Path) -> str:
    """A protocol-0 pickle (plain ASCII, so a TEXT column holds it) that creates `marker`."""
    return pickle.dumps(Planted(marker), protocol=0).decode("ascii")


def class_payload(marker: Path) -> dict[str, Any]:
    """The shape object-reviving JSON decoders execute (jsonpickle, some ORMs)."""
    return {
        "__class__": "builtins.open",
        "py/object": "subprocess.Popen",
        "__reduce__": ["os.system", [f"touch {marker}"]],
        "args": [str(marker), "w"],
    }


Damage = Callable[[Backend, Path], Awaitable[None]]


async def not_json(backend: Backend, marker: Path) -> None:
    await set_message_body(backend, 1, '{"role": "assistant", "content": [')


async def unknown_role(backend: Backend, marker: Path) -> None:
    body = json.loads(await message_body(backend, 1))
    await set_message_body(backend, 1, json.dumps({**body, "role": "root"}))


async def closes_the_list(backend: Backend, marker: Path) -> None:
    """A row that, were the rows joined into one JSON text, would close the message list and
    set state fields of its own."""
    body = await message_body(backend, 1)
    await set_message_body(
        backend, 1, body + '],"context_summary":"INJECTED","credits":1000000,"_":['
    )


async def extra_message_field(backend: Backend, marker: Path) -> None:
    body = json.loads(await message_body(backend, 1))
    await set_message_body(backend, 1, json.dumps({**body, "credits": 1000000}))


async def header_wrong_type(backend: Backend, marker: Path) -> None:
    await set_header(backend, json.dumps({**await latest_header(backend), "credits": "lots"}))


async def header_extra_key(backend: Backend, marker: Path) -> None:
    await set_header(backend, json.dumps({**await latest_header(backend), "is_admin": True}))


async def missing_row(backend: Backend, marker: Path) -> None:
    await backend.sql(f"DELETE FROM tx_messages WHERE {_KEY} AND seq = 1", "victim")


async def pickled_row(backend: Backend, marker: Path) -> None:
    await set_message_body(backend, 1, pickle_payload(marker))


async def class_row(backend: Backend, marker: Path) -> None:
    await set_message_body(backend, 1, json.dumps(class_payload(marker)))


async def class_in_a_typed_header_field(backend: Backend, marker: Path) -> None:
    header = {**await latest_header(backend), "credits": class_payload(marker)}
    await set_header(backend, json.dumps(header))


async def pickle_in_a_typed_header_field(backend: Backend, marker: Path) -> None:
    header = {**await latest_header(backend), "credits": pickle_payload(marker)}
    await set_header(backend, json.dumps(header))


class Crash(Exception):
    """The process "dies" here: the tool ran and its ledger record is written, but the step's
    checkpoint is not."""


def dies_before_saving_tool_messages(store: BaseCheckpointer) -> None:
    real = store.asave

    async def asave(thread_id: str, **kwargs: Any) -> int:
        if any(m.role == "tool" for m in kwargs["new_messages"]):
            raise Crash("killed between the tool's ledger record and the step's checkpoint")
        return await real(thread_id, **kwargs)

    store.asave = asave  # type: ignore[method-assign]


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-kf",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
    }


def answering(text: str) -> Callable[[httpx.Request], httpx.Response]:
    """A provider that answers `text`, as a stream when asked for one."""

    def respond(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            words = text.split(" ")
            pieces = [w + " " for w in words[:-1]] + [words[-1]]
            return sse(
                event({"role": "assistant", "content": ""}),
                *(event({"content": p}) for p in pieces),
                event({}, "stop"),
                USAGE_EVENT,
            )
        return httpx.Response(200, json=completion(text))

    return respond


class BrokenStream(httpx.AsyncByteStream):
    """An SSE body whose connection drops after its first chunk."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = event({"role": "assistant", "content": "Once upon"})
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")

    async def aclose(self) -> None:
        return None


def dump(db: Path) -> list[str]:
    """A SQLite database's content, as SQL: equal dumps, equal databases."""
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


USER_GRAPH = """
from tenxgraph import END, START, StateGraph


def greet(state):
    return "Hello, " + state.context[-1].text() + "!"


builder = StateGraph()
builder.add_node(greet)
builder.add_edge(START, "greet")
builder.add_edge("greet", END)
"""


def garbage(path: Path) -> None:
    path.write_bytes(hashlib.sha512(b"not a database").digest() * 64)


def text_file(path: Path) -> None:
    path.write_text("thread_id,messages\nkept,2\n")


def truncated(path: Path) -> None:
    """A real database cut in half, as a full disk or a bad copy leaves it."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(200)])
    conn.commit()
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def command_line(command: str, thread: str, graph_file: Path) -> list[str]:
    """The arguments of `command` on `thread` (every command but `threads list` takes one)."""
    return {
        "threads-list": ["threads", "list"],
        "threads-show": ["threads", "show", thread],
        "threads-delete": ["threads", "delete", thread, "--yes"],
        "chat": ["chat", "--model", "test", "--thread", thread],
        "run": ["run", f"{graph_file}:builder", "--input", "hi", "--thread", thread],
        "demo": ["demo", "--yes", "--thread", thread],
    }[command]
