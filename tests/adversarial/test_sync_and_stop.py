"""The sync API's loop thread, and stopping a run.

- Sync calls of any number of compiled graphs run on one event-loop thread per process, which
  is wound down at exit without a word on stderr ("Event loop is closed", unclosed
  connections), on every checkpointer.
- `astop()` of a run in this process ends that run even when the event loop and the
  checkpointer are busy with many others (how fast is measured by
  benchmarks/stop_latency.py, not here).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import tenxgraph
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer
from tenxgraph.utils.constants import START
from tests.core.graph._support import inp, linear, texts
from tests.storage.conftest import Backend

SRC = Path(tenxgraph.__file__).resolve().parents[1]  # the tenxgraph under test, for children


def run_child(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `script` in a fresh interpreter that turns ResourceWarnings into errors."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONDEVMODE")}
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", "-c", textwrap.dedent(script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# -- one loop thread per process -------------------------------------------------------------

GRAPHS_CHILD = """
    import json, sys, threading
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils.constants import END, START

    kind, where, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])

    def checkpointer(i):
        if kind == "memory":
            from tenxgraph.storage.checkpointer import InMemoryCheckpointer
            return InMemoryCheckpointer()
        if kind == "sqlite":
            from tenxgraph.storage.checkpointer import SqliteCheckpointer
            return SqliteCheckpointer(f"{where['dir']}/graph{i}.db")
        from tenxgraph.storage.checkpointer import PgCheckpointer
        return PgCheckpointer(where["dsn"], schema=where["schema"], max_size=2)

    async def answer(state):
        return f"answer {state.context[-1].text()}"

    apps = []
    for i in range(count):
        graph = StateGraph(AgentState)
        graph.add_node("a", answer)
        graph.add_node("b", answer)
        graph.add_edge(START, "a")
        graph.add_edge("a", "b")
        graph.add_edge("b", END)
        apps.append(graph.compile(checkpointer=checkpointer(i)))

    results = []
    for i, app in enumerate(apps):
        config = {"thread_id": f"g{i}"}
        result = app.invoke({"messages": [Message.text_message("hi")]}, config)
        results.append(result["messages"][-1].text())
        results.append(len(list(app.stream({"messages": [Message.text_message("again")]}, config))))
        for chunk in app.stream({"messages": [Message.text_message("early")]}, config):
            break  # an abandoned stream
        results.append(len(app.get_state(config).context))
    names = [t.name for t in threading.enumerate() if t.name.startswith("tenxgraph")]
    for app in apps[: count // 2]:  # half closed by hand, half left to the exit
        app.close()
    print(json.dumps({"results": results, "loop_threads": names}))
"""


def where(backend: Backend, tmp_path: Path) -> str:
    if backend.name == "postgres":
        return json.dumps({"dsn": backend.dsn, "schema": backend.schema})
    return json.dumps({"dir": str(tmp_path)})


@pytest.mark.parametrize("count", [2, 10])
async def test_sync_calls_of_many_graphs_share_one_loop_thread_and_exit_silently(
    backend: Backend, tmp_path: Path, count: int
) -> None:
    done = run_child(GRAPHS_CHILD, backend.name, where(backend, tmp_path), str(count))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no "Event loop is closed", no unclosed connection
    report = json.loads(done.stdout)
    # per graph: the answer, a full stream's chunks, and the stored messages (the abandoned
    # stream stored its input before it was closed, or nothing: both are fine here)
    for i in range(count):
        answer, chunks, stored = report["results"][3 * i : 3 * i + 3]
        assert answer == "answer answer hi"
        assert chunks > 0
        assert stored >= 6
    assert len(report["loop_threads"]) == 1, report["loop_threads"]


AGENTS_CHILD = """
    import json, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from tenxgraph.core.graph import Agent, StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    ANSWER = json.dumps({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hello"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }).encode()

    class Chat(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Chat)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"

    answers = []
    for i in range(2):
        graph = StateGraph(AgentState)
        graph.add_node("agent", Agent("openai/m", api_base=base, api_key="sk-loopback"))
        graph.add_edge(START, "agent")
        graph.add_edge("agent", END)
        app = graph.compile(checkpointer=InMemoryCheckpointer())
        result = app.invoke({"messages": [Message.text_message("hi")]}, {"thread_id": "t"})
        answers.append(result["messages"][-1].text())
    print(json.dumps(answers))
"""


def test_sync_invoke_of_two_agent_graphs_leaves_no_event_loop_errors_at_exit() -> None:
    """Both graphs' model calls (litellm's cached clients, its logging worker) ran on one
    loop, which ends before litellm's own exit hooks run."""
    done = run_child(AGENTS_CHILD)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["hello", "hello"]
    assert "Event loop is closed" not in done.stderr
    assert "was destroyed but it is pending" not in done.stderr
    assert done.stderr == ""


async def test_sync_calls_of_two_graphs_run_on_the_same_loop_thread() -> None:
    seen: list[tuple[str, threading.Thread]] = []

    def node(name: str) -> Any:
        async def record(state: AgentState) -> str:
            seen.append((name, threading.current_thread()))
            return "ok"

        return record

    first = linear(node("first"), checkpointer=InMemoryCheckpointer())
    second = linear(node("second"), checkpointer=InMemoryCheckpointer())
    first.invoke(inp("hi"), {"thread_id": "t"})  # inside this test's running loop, too
    list(second.stream(inp("hi"), {"thread_id": "t"}))
    first.invoke(inp("again"), {"thread_id": "t"})
    assert [name for name, _ in seen] == ["first", "second", "first"]
    threads = {thread for _, thread in seen}
    assert len(threads) == 1
    assert threads != {threading.current_thread()}


FORK_CHILD = """
    import os, sys, threading
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils.constants import END, START

    async def answer(state):
        return "ok"

    graph = StateGraph(AgentState)
    graph.add_node("a", answer)
    graph.add_edge(START, "a")
    graph.add_edge("a", END)
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    app.invoke({"messages": [Message.text_message("before")]}, {"thread_id": "t"})
    pid = os.fork()
    app.invoke({"messages": [Message.text_message("after")]}, {"thread_id": "t"})
    names = [t.name for t in threading.enumerate() if t.name.startswith("tenxgraph")]
    assert len(names) == 1, names
    if pid:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        print("both ran")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_sync_api_works_in_a_forked_child_and_both_exit_silently() -> None:
    done = run_child(FORK_CHILD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "both ran"
    assert done.stderr == ""


def test_a_sync_call_of_another_graph_from_inside_a_node_still_works() -> None:
    """The one loop thread is busy with the caller's node: the inner call gets a loop of its
    own for its duration (and its own graph's sync call is still refused: see test_sync)."""
    inner = linear(("agent", Agent("test")), checkpointer=InMemoryCheckpointer())

    async def delegate(state: AgentState) -> str:
        result = inner.invoke(inp("inner"), {"thread_id": "inner"})
        streamed = list(inner.stream(inp("streamed"), {"thread_id": "inner"}))
        return f"{len(result['messages'])} {len(streamed) > 0}"

    outer = linear(delegate, checkpointer=InMemoryCheckpointer())
    result = outer.invoke(inp("hi"), {"thread_id": "outer"})
    assert texts(result["messages"])[-1] == "2 True"


# -- astop() under load ------------------------------------------------------------------------


class Counted(AgentState):
    count: int = 0


STORAGE_CALLS = ("asave", "aload", "aversion", "ais_stop_requested", "aclear_stop_request")


def watch_calls(store: BaseCheckpointer, thread_id: str, log: list[str]) -> None:
    """Log the names of `store`'s calls for `thread_id`, from now on."""
    for name in STORAGE_CALLS:
        original = getattr(store, name)

        async def call(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            if args and args[0] == thread_id:
                log.append(_name)
            return await _original(*args, **kw)

        setattr(store, name, call)


def parked_app(store: BaseCheckpointer, entered: dict[str, asyncio.Event]) -> CompiledGraph:
    async def park(state: AgentState, config: dict[str, Any]) -> str:
        entered[config["thread_id"]].set()
        await asyncio.Event().wait()
        return "never"

    return linear(("park", park), checkpointer=store)


async def test_a_stop_in_this_process_makes_one_storage_call_its_last_save(
    checkpointer: BaseCheckpointer,
) -> None:
    """Each storage call of a stopping run may wait behind every other run's queued calls: a
    stop asked in this process neither asks the store whether it was asked nor clears a
    request it never stored."""
    entered = {"t": asyncio.Event()}
    app = parked_app(checkpointer, entered)
    run = asyncio.create_task(app.ainvoke(inp("hi"), {"thread_id": "t"}))
    await entered["t"].wait()
    calls: list[str] = []
    watch_calls(checkpointer, "t", calls)
    assert (await app.astop({"thread_id": "t"}))["running"] is True
    result = await run
    assert result["interrupted"]["reason"] == "stop_requested"
    assert calls == ["asave"]


async def test_a_stop_request_left_in_the_store_does_not_stop_the_threads_next_run(
    checkpointer: BaseCheckpointer,
) -> None:
    """A stop asked through the store (another process) while this process stopped the run
    itself is not meant for the thread's next run."""
    entered = {"t": asyncio.Event()}
    app = parked_app(checkpointer, entered)
    run = asyncio.create_task(app.ainvoke(inp("hi"), {"thread_id": "t"}))
    await entered["t"].wait()
    await checkpointer.arequest_stop("t")  # as another process's astop would
    await app.astop({"thread_id": "t"})
    assert (await run)["interrupted"]["reason"] == "stop_requested"
    app.override_node("park", lambda state: "answered")
    result = await app.ainvoke(inp("next"), {"thread_id": "t"})
    assert "interrupted" not in result
    assert texts(result["messages"]) == ["next", "answered"]


async def test_a_stopping_runs_saves_go_ahead_of_the_other_runs_queued_saves(
    sql_backend: Backend,
) -> None:
    """100 runs loop through steps, each saving a checkpoint per step on the one store: once
    one is asked to stop, its saves are served before the others' queued ones. Counted, not
    timed: how many saves of other runs land between the stop and the stopped run's end."""
    store = sql_backend.store
    runs = 100
    started: set[str] = set()
    all_started = asyncio.Event()

    async def step(state: Counted, config: dict[str, Any]) -> dict[str, int]:
        started.add(config["thread_id"])
        if len(started) == runs:
            all_started.set()
        await asyncio.sleep(0)
        return {"count": state.count + 1}

    graph = StateGraph(Counted)
    graph.add_node("a", step)
    graph.add_node("b", step)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "a")
    app = graph.compile(checkpointer=store)
    config = {"recursion_limit": 10**9, "node_timeout": None}
    threads = [f"t{i}" for i in range(runs)]
    tasks = [
        asyncio.create_task(app.ainvoke(inp("go"), {**config, "thread_id": t})) for t in threads
    ]
    await all_started.wait()
    saves = 0
    original = store.asave

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal saves
        version = await original(*args, **kwargs)
        if args[0] != target:
            saves += 1
        return version

    target = threads[runs // 2]
    store.asave = counted  # type: ignore[method-assign]
    await app.astop({"thread_id": target})
    result = await tasks[runs // 2]
    others = saves
    for thread_id in threads:
        await app.astop({"thread_id": thread_id})
    await asyncio.gather(*tasks)
    assert result["interrupted"]["reason"] == "stop_requested"
    # only the saves already under way when the stop came may land first (one connection on
    # SQLite, the test's four on PostgreSQL); before, every queued save of every run did
    assert others <= 10, others
