"""Node timeouts and stop requests: cancelling the run's task only while it runs node code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import Context
from typing import Any

from tenxgraph.core.exceptions import GraphError, NodeError, NodeTimeoutError
from tenxgraph.core.graph.node import NodeSpec


class Guard:
    """Cancels the run's task when a node overruns its time or a stop is asked for, but only
    while that task is inside node code (`armed`); otherwise the next check raises.

    One timer serves the whole run: a node's start only moves the deadline, and a timer that
    fires before the running node's deadline sets itself again for it. The same timer beats
    for the run's lease (`keep_alive`). So a run of many steps schedules one timer, not one per
    node or per purpose; `close` cancels it when the run ends. The timer runs in an empty
    context of its own: a cancelled timer stays in the loop's queue until it is due (a node's
    timeout: up to 15 minutes), and must not keep the run's context (the run, its state and
    observer) alive until then."""

    __slots__ = (
        "armed",
        "beat",
        "beat_at",
        "beat_every",
        "deadline",
        "handle",
        "stopping",
        "task",
        "timed_out",
    )

    def __init__(self) -> None:
        self.armed = False
        self.stopping = False
        self.timed_out = False
        self.task: asyncio.Task[Any] | None = None
        self.handle: asyncio.TimerHandle | None = None
        self.deadline: float | None = None  # of the running node; None between nodes
        self.beat: Callable[[], None] | None = None
        self.beat_every = 0.0
        self.beat_at: float | None = None  # when `beat` is due next; None: not beating

    def start(self, timeout: float | None) -> None:
        """A node starts, with `timeout` seconds to finish (None: no limit)."""
        self.timed_out = False
        if timeout is None:
            return
        loop = asyncio.get_running_loop()
        deadline = self.deadline = loop.time() + timeout
        handle = self.handle
        if handle is None or handle.when() > deadline:  # else it fires first and moves on
            if handle is not None:  # a beat due after this node's deadline
                handle.cancel()
            self.handle = loop.call_at(deadline, self._expire, context=Context())

    def keep_alive(self, every: float, beat: Callable[[], None]) -> None:
        """Call `beat` every `every` seconds until `stop_beating` or `close`."""
        loop = asyncio.get_running_loop()
        self.beat, self.beat_every = beat, every
        self.beat_at = loop.time() + every
        if self.handle is None:
            self.handle = loop.call_at(self.beat_at, self._expire, context=Context())

    def stop_beating(self) -> None:
        # a timer already set finds nothing due and moves on; dropping `beat` (a bound method
        # of the run) breaks the cycle run -> guard -> run, so the run is freed at once
        self.beat_at = self.beat = None

    def _expire(self) -> None:
        self.handle = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        beat_at = self.beat_at
        if beat_at is not None and now >= beat_at and self.beat is not None:
            beat_at = self.beat_at = now + self.beat_every
            self.beat()
        deadline = self.deadline  # None: no node running; the next one moves it
        if deadline is not None and now >= deadline:
            deadline = None
            self.timed_out = True
            if self.armed and self.task is not None:
                self.task.cancel()
        due = [t for t in (deadline, beat_at) if t is not None]
        if due:  # the next thing to happen: a node's deadline or a beat
            self.handle = loop.call_at(min(due), self._expire, context=Context())

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
        self.stop_beating()
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
    """What a node's exception surfaces as: `NodeError` with 10xgraph's text, "Error in node
    'x': <the exception's message>" (its users match on it); the exception's class is in
    `context["error_type"]` (and named in the text when its message is empty), the exception
    itself is the `__cause__`."""
    if isinstance(exc, GraphError):
        return exc
    kind = type(exc).__name__
    return NodeError(
        f"Error in node {spec.name!r}: {str(exc) or kind}",
        "NODE_001",
        {"node": spec.name, "node_name": spec.name, "error_type": kind},
    )


def timeout_error(spec: NodeSpec, timeout: float | None) -> NodeTimeoutError:
    return NodeTimeoutError(
        f"Node {spec.name!r} did not finish within {timeout} s. Raise config['node_timeout'] "
        "(seconds), or set it to None to disable the limit",
        "NODE_TIMEOUT_001",
        {"node": spec.name, "timeout": timeout},
    )


__all__ = ["Guard", "Stopped", "node_error", "timeout_error"]
