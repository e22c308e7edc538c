"""Many workers over one PostgreSQL: real `tenxgraph serve` processes sharing a fresh database,
driven with LangGraph's own client. Worker A serves the API only (`--max-runs 0`), so a run
asked of A is executed by another worker:

- a client streaming from A gets every event of the run B executes, in order;
- a cancel sent to A stops the run B is executing;
- a worker killed (SIGKILL) in the middle of a run: another resumes it from the thread's last
  checkpoint, a tool call that had finished is replayed from the ledger, not run again, and
  A's clients get the rest of the stream and the end.

The graph (`tests/serve/workers_graph.py`) calls a loopback HTTP server of the test from its
tool, so the test knows when a tool is running, can hold it there, and counts its calls.
Skipped without TENXGRAPH_TEST_PG_DSN.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.serve.workers_graph import URL_VAR
from tests.storage.conftest import pg_dsn

ROOT = Path(__file__).resolve().parents[2]
START_SECONDS = 60.0  # bound on a worker's start (imports, tables)
RUN_SECONDS = 60.0  # bound on anything a run should do promptly
LEASE_TTL = 2.0  # short: a killed worker's run is resumed about that soon
CONFIG = {"configurable": {"max_parallel_tools": 1}}  # the tool calls one after the other
# asked explicitly of join_stream: without it the SDK sends an empty stream_mode
MODES: list[Any] = ["values", "updates"]


# -- the tool's HTTP server --------------------------------------------------------------------


@dataclass
class ToolServer:
    """Answers `/step/<name>` with "<name> ok". Counts the calls of each name, signals each
    start, and holds the first call of a name in `hold` until `release` (or the end)."""

    hold: set[str] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=dict)
    started: dict[str, threading.Event] = field(default_factory=dict)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def event(self, name: str) -> threading.Event:
        with self.lock:
            return self.started.setdefault(name, threading.Event())

    def answer(self, name: str) -> str:
        with self.lock:
            self.calls[name] = self.calls.get(name, 0) + 1
            first = self.calls[name] == 1
        self.event(name).set()
        if first and name in self.hold:
            self.release.wait(RUN_SECONDS * 2)
        return f"{name} ok"

    async def wait_started(self, name: str) -> None:
        started = await asyncio.to_thread(self.event(name).wait, RUN_SECONDS)
        assert started, f"the tool call {name!r} never started"


@pytest.fixture
def tools() -> Iterator[ToolServer]:
    state = ToolServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = state.answer(self.path.rsplit("/", 1)[-1]).encode()
            with suppress(OSError):  # the worker that asked may be dead by now
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# -- the database and the workers --------------------------------------------------------------


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A DSN of a fresh database of the test server, dropped afterwards."""
    import asyncpg

    dsn = pg_dsn()
    name = f"tx_workers_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
        base, _, _ = dsn.rpartition("/")
        query = dsn.partition("?")[2]
        yield f"{base}/{name}" + (f"?{query}" if query else "")
    finally:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Workers:
    """`tenxgraph serve` processes on one database; each is killed at the end."""

    def __init__(self, dsn: str, tool_url: str, logs: Path) -> None:
        self.dsn, self.tool_url, self.logs = dsn, tool_url, logs
        self.started: list[subprocess.Popen[bytes]] = []

    async def start(
        self, name: str, *, max_runs: int = 8, redis: str | None = None
    ) -> tuple[str, subprocess.Popen[bytes]]:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), URL_VAR: self.tool_url}
        command = [
            sys.executable, "-m", "tenxgraph.cli", "serve", "tests.serve.workers_graph:graph",
            "--db", self.dsn, "--port", str(port), "--lease-ttl", str(LEASE_TTL),
            "--max-runs", str(max_runs), *(["--redis", redis] if redis else []),
        ]  # fmt: skip
        process = _spawn(command, env, self.logs / f"{name}.log")
        self.started.append(process)
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(_wait_ready, url, process, self.logs / f"{name}.log")
        return url, process

    def close(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.terminate()
        for process in self.started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _spawn(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll the worker's health endpoint until it answers 200 (bounded)."""
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"worker exited with {process.returncode}:\n{log.read_text()}")
        with (
            suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(f"{url}/ok", timeout=2) as answer,
        ):
            if answer.status == 200:
                return
        time.sleep(0.05)
    raise AssertionError(f"worker at {url} not ready in {START_SECONDS}s:\n{log.read_text()}")


@pytest.fixture
def workers(database: str, tools: ToolServer, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(database, tools.url, tmp_path)
    try:
        yield started
    finally:
        started.close()


def _input(steps: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"steps: {steps}"}]}


def _messages(values: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["type"], str(m["content"])) for m in values["messages"]]


async def _collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [part async for part in stream]


# -- the tests -----------------------------------------------------------------------------


@pytest.mark.parametrize("bus", ["postgres", "redis"])
async def test_a_client_of_one_worker_streams_the_run_another_executes(
    workers: Workers, tools: ToolServer, bus: str
) -> None:
    """Woken through PostgreSQL's LISTEN/NOTIFY, or through Redis with --redis."""
    from langgraph_sdk import get_client

    from tests.serve.conftest import redis_url

    redis = redis_url() if bus == "redis" else None
    url_a, _ = await workers.start("a", max_runs=0, redis=redis)
    url_b, _ = await workers.start("b", redis=redis)
    client_a, client_b = get_client(url=url_a), get_client(url=url_b)
    thread = await client_a.threads.create()
    stream = client_a.runs.stream(
        thread["thread_id"], "graph", input=_input("one,two"), config=CONFIG,
        stream_mode=MODES,
    )  # fmt: skip
    parts = await asyncio.wait_for(_collect(stream), RUN_SECONDS)

    assert parts[0].event == "metadata"
    run_id = parts[0].data["run_id"]
    assert tools.calls == {"one": 1, "two": 1}  # executed, by B: A executes nothing
    final = [p for p in parts if p.event == "values"][-1].data
    assert _messages(final)[-1] == ("ai", "done: one ok, two ok")
    # in order, none missing: the same as B's replay of the stored events from the first
    replay = await _collect(
        client_b.runs.join_stream(thread["thread_id"], run_id, stream_mode=MODES)
    )
    assert [(p.event, p.data) for p in parts] == [(p.event, p.data) for p in replay]
    assert [int(p.id) for p in parts] == list(range(1, len(parts) + 1))
    run = await client_b.runs.get(thread["thread_id"], run_id)
    assert run["status"] == "success"


async def test_a_cancel_sent_to_one_worker_stops_the_run_another_executes(
    workers: Workers, tools: ToolServer
) -> None:
    from langgraph_sdk import get_client

    tools.hold.add("hold")
    url_a, _ = await workers.start("a", max_runs=0)
    url_b, process_b = await workers.start("b")
    client_a = get_client(url=url_a)
    thread = await client_a.threads.create()
    run = await client_a.runs.create(
        thread["thread_id"], "graph", input=_input("hold"), config=CONFIG
    )
    await tools.wait_started("hold")  # B is inside the tool, held there

    await asyncio.wait_for(
        client_a.runs.cancel(thread["thread_id"], run["run_id"], wait=True), RUN_SECONDS
    )
    assert not tools.release.is_set()  # stopped while its tool was still held
    stopped = await get_client(url=url_b).runs.get(thread["thread_id"], run["run_id"])
    assert stopped["status"] == "interrupted"
    assert process_b.poll() is None
    assert tools.calls == {"hold": 1}
    # the thread is free again: B executes the next run
    values = await asyncio.wait_for(
        client_a.runs.wait(thread["thread_id"], "graph", input=_input("after"), config=CONFIG),
        RUN_SECONDS,
    )
    assert isinstance(values, dict)
    assert _messages(values)[-1] == ("ai", "done: after ok")


async def test_a_killed_workers_run_is_resumed_by_another_without_rerunning_tools(
    workers: Workers, tools: ToolServer
) -> None:
    from langgraph_sdk import get_client

    tools.hold.add("two")  # its first call never returns: the worker dies inside it
    url_a, _ = await workers.start("a", max_runs=0)
    _, process_b = await workers.start("b")
    client_a = get_client(url=url_a)
    thread_id = (await client_a.threads.create())["thread_id"]
    run_id = (
        await client_a.runs.create(thread_id, "graph", input=_input("one,two"), config=CONFIG)
    )["run_id"]
    # a client following the run on A, from before the kill to the end
    following = asyncio.create_task(
        _collect(client_a.runs.join_stream(thread_id, run_id, stream_mode=MODES))
    )
    await tools.wait_started("two")  # "one" finished (recorded in the ledger), "two" running
    assert tools.calls == {"one": 1, "two": 1}

    process_b.send_signal(signal.SIGKILL)
    await asyncio.to_thread(process_b.wait, RUN_SECONDS)
    await workers.start("c")  # resumes the run once B's lease expires

    parts = await asyncio.wait_for(following, RUN_SECONDS)
    assert tools.calls == {"one": 1, "two": 2}  # "one" replayed from the ledger, not rerun
    attempts = [p.data["attempt"] for p in parts if p.event == "metadata"]
    assert attempts == [1, 2]
    assert [int(p.id) for p in parts] == list(range(1, len(parts) + 1))
    # a client that saw the first events before losing its connection gets the rest
    again = client_a.runs.join_stream(thread_id, run_id, stream_mode=MODES, last_event_id="2")
    rest = await asyncio.wait_for(_collect(again), RUN_SECONDS)
    assert [(p.id, p.event, p.data) for p in rest] == [(p.id, p.event, p.data) for p in parts[2:]]
    run = await client_a.runs.get(thread_id, run_id)
    assert run["status"] == "success"

    state = await client_a.threads.get_state(thread_id)
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "tool", "ai"]
    assert len({m["id"] for m in messages}) == len(messages)  # each message once
    assert [m["content"] for m in messages[2:4]] == ["one ok", "two ok"]
    assert messages[-1]["content"] == "done: one ok, two ok"
