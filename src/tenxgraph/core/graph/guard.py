"""Node timeouts and stop requests: cancelling the run's task only while it runs node code."""

from __future__ import annotations

import asyncio
from typing import Any

from tenxgraph.core.exceptions import GraphError, NodeError, NodeTimeoutError
from tenxgraph.core.graph.node import NodeSpec


class Guard:
    """Cancels the run's task when a node overruns its time or a stop is asked for, but only
    while that task is inside node code (`armed`); otherwise the next check raises.

    One timer serves the whole run: a node's start only moves the deadline, and a timer that
    fires before the running node's deadline sets itself again for it. So a run of many steps
    schedules one timer, not one per node; `close` cancels it when the run ends."""

    __slots__ = ("armed", "deadline", "handle", "stopping", "task", "timed_out")

    def __init__(self) -> None:
        self.armed = False
        self.stopping = False
        self.timed_out = False
        self.task: asyncio.Task[Any] | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.deadline: float | None = None  # of the running node; None between nodes

    def start(self, timeout: float | None) -> None:
        """A node starts, with `timeout` seconds to finish (None: no limit)."""
        self.timed_out = False
        if timeout is None:
            return
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + timeout
        if self.handle is None:  # else an earlier node's timer fires first and moves on
            self.handle = loop.call_at(self.deadline, self._expire)

    def _expire(self) -> None:
        self.handle = None
        deadline = self.deadline
        if deadline is None:  # no node running: the next one sets a timer of its own
            return
        loop = asyncio.get_running_loop()
        if loop.time() < deadline:  # set by an earlier node: wait for this one's deadline
            self.handle = loop.call_at(deadline, self._expire)
            return
        self.timed_out = True
        if self.armed and self.task is not None:
            self.task.cancel()

    def stop(self) -> None:
        self.stopping = True
        if self.armed and self.task is not None:
            self.task.cancel()

    def disarm(self) -> None:
        """The node is over (its timer may stay set for the next node)."""
        self.armed = False
        self.deadline = None

    def close(self) -> None:
        """The run is over."""
        self.disarm()
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def check(self, spec: NodeSpec, timeout: float | None, *, cancelled: bool) -> None:
        """Raise the timeout or stop that caused (or raced with) the end of a node call."""
        if not (self.timed_out or self.stopping):
            return
        task = self.task
        if task is not None and (cancelled or task.cancelling()):
            task.uncancel()
        if self.timed_out:
            raise timeout_error(spec, timeout)
        raise Stopped


class Stopped(Exception):
    """Internal: the run was asked to stop."""


def node_error(spec: NodeSpec, exc: Exception) -> GraphError:
    if isinstance(exc, GraphError):
        return exc
    return NodeError(
        f"Error in node {spec.name!r}: {type(exc).__name__}: {exc}",
        "NODE_001",
        {"node": spec.name, "error_type": type(exc).__name__},
    )


def timeout_error(spec: NodeSpec, timeout: float | None) -> NodeTimeoutError:
    return NodeTimeoutError(
        f"Node {spec.name!r} did not finish within {timeout} s. Raise config['node_timeout'] "
        "(seconds), or set it to None to disable the limit",
        "NODE_TIMEOUT_001",
        {"node": spec.name, "timeout": timeout},
    )


__all__ = ["Guard", "Stopped", "node_error", "timeout_error"]
