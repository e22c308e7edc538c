"""Crash safety: a child process running a graph is killed with SIGKILL mid-run (by itself
inside a node, or by this process while its node is blocked); this process then finds the
thread unfinished (status running) and `ainvoke(None, config)` finishes it from the last
checkpoint, with no message lost or duplicated. On SQLite, and on PostgreSQL when
TENXGRAPH_TEST_PG_DSN is set."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tests.core.graph._durable_graph import crash_app
from tests.core.graph._support import texts

PG_DSN_VAR = "TENXGRAPH_TEST_PG_DSN"
REPO = Path(__file__).resolve().parents[3]
MARKER_WAIT_SECONDS = 30

CHILD_SCRIPT = """
import asyncio, sys
from tenxgraph.core.state import Message
from tests.core.graph._durable_graph import crash_app

async def main(kind, target, thread_id):
    app = crash_app(kind, target)
    await app.ainvoke({"messages": [Message.text_message("hello", "user")]},
                      {"thread_id": thread_id})
    print("finished")  # never reached: the process is killed in node `second`

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(kind, target) for `crash_app`: a SQLite file, or the PostgreSQL DSN."""
    if request.param == "sqlite":
        try:
            from tenxgraph.storage.checkpointer import SqliteCheckpointer  # noqa: F401
        except Exception as exc:
            pytest.skip(f"SqliteCheckpointer is not usable: {type(exc).__name__}: {exc}")
        return "sqlite", str(tmp_path / "t.db")
    dsn = os.environ.get(PG_DSN_VAR)
    if not dsn:
        pytest.skip(f"{PG_DSN_VAR} is not set: PostgreSQL tests need a server")
    return "postgres", dsn


def child(backend: tuple[str, str], thread_id: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD_SCRIPT, *backend, thread_id],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_file(path: Path, proc: subprocess.Popen[str]) -> None:
    """Poll (bounded) for a file another process writes."""
    deadline = time.monotonic() + MARKER_WAIT_SECONDS
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child ended early ({proc.returncode}): {proc.stderr.read()}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"child did not reach the blocking node in {MARKER_WAIT_SECONDS}s")
        time.sleep(0.02)


def trace_lines(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


async def resume_and_check(
    backend: tuple[str, str],
    thread_id: str,
    trace: Path,
    child_pid: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In this process (a new one for the thread): the thread is unfinished after `first`;
    `ainvoke(None, ...)` finishes it and nothing is lost or duplicated."""
    monkeypatch.setenv("TX_TRACE", str(trace))
    app = crash_app(*backend)
    config: dict[str, Any] = {"thread_id": thread_id}
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "running"  # unfinished
    assert texts(state.context) == ["hello", "first done"]
    before = [m.message_id for m in state.context]
    checkpointer: BaseCheckpointer = app.checkpointer  # type: ignore[assignment]
    history = await checkpointer.ahistory(thread_id)
    assert history[0].status == "running"
    assert history[0].message_count == 2

    result = await app.ainvoke(None, config)
    assert texts(result["messages"]) == ["second done", "third done"]
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.status == "completed"
    assert texts(state.context) == ["hello", "first done", "second done", "third done"]
    message_ids = [m.message_id for m in state.context]
    assert message_ids[:2] == before
    assert len(set(message_ids)) == 4
    await app.aclose()
    runs = trace_lines(trace)
    assert [name for name, _ in runs] == ["first", "second", "second", "third"]
    pids = [int(pid) for _, pid in runs]
    assert pids[:2] == [child_pid, child_pid]
    assert pids[2:] == [os.getpid(), os.getpid()]  # `first` was not run again


async def test_child_killed_by_itself_inside_a_node_is_resumed(
    backend: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = f"crash-{uuid.uuid4().hex}"
    trace = tmp_path / "trace.txt"
    proc = child(backend, thread_id, {"TX_CRASH": "self", "TX_TRACE": str(trace)})
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    assert "finished" not in out
    await resume_and_check(backend, thread_id, trace, proc.pid, monkeypatch)


async def test_child_killed_by_the_parent_while_its_node_is_blocked_is_resumed(
    backend: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = f"crash-{uuid.uuid4().hex}"
    trace = tmp_path / "trace.txt"
    marker = tmp_path / "blocked"
    proc = child(
        backend,
        thread_id,
        {"TX_CRASH": "hang", "TX_MARKER": str(marker), "TX_TRACE": str(trace)},
    )
    try:
        await asyncio.to_thread(wait_for_file, marker, proc)
    finally:
        proc.kill()  # SIGKILL
        out, _ = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert "finished" not in out
    await resume_and_check(backend, thread_id, trace, proc.pid, monkeypatch)
