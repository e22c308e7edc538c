"""Graphs for the cross-process tests (test_crash.py, test_durable.py): imported both by the
test process and by the child processes it starts, so every process runs the same graph.

Every node appends one line to the file named by env `TX_TRACE` (when set): the test reads
which nodes ran, in which process, across crashes and resumes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import AgentState
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.utils import interrupt
from tests.core.graph._support import linear


def open_store(kind: str, target: str) -> BaseCheckpointer:
    """`kind` "sqlite" (target: a file path) or "postgres" (target: a DSN)."""
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(target)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    return PgCheckpointer(target, max_size=2)


def trace(name: str) -> None:
    path = os.environ.get("TX_TRACE")
    if path:
        with Path(path).open("a") as file:
            file.write(f"{name} {os.getpid()}\n")


def mark(path: str) -> None:
    Path(path).write_text("blocked")


async def first(state: AgentState) -> str:
    trace("first")
    return "first done"


async def second(state: AgentState) -> str:
    """Crashes (env TX_CRASH=self: SIGKILL to itself) or hangs until killed (TX_CRASH=hang,
    after writing the marker file TX_MARKER); otherwise replies."""
    trace("second")
    mode = os.environ.get("TX_CRASH")
    if mode == "self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "hang":
        mark(os.environ["TX_MARKER"])
        await asyncio.sleep(120)  # the parent kills the process long before this ends
    return "second done"


def third(state: AgentState) -> str:
    trace("third")
    time.sleep(0)  # a sync node: runs in a worker thread
    return "third done"


def crash_app(kind: str, target: str) -> CompiledGraph:
    """START -> first -> second -> third -> END."""
    return linear(first, second, third, checkpointer=open_store(kind, target))


async def ask(state: AgentState) -> str:
    trace("ask")
    name = interrupt({"field": "name"}, message="What is your name?", reason="need_name")
    return f"hello {name}"


def ask_app(kind: str, target: str) -> CompiledGraph:
    """START -> first -> ask (interrupts) -> END."""
    return linear(first, ask, checkpointer=open_store(kind, target))
