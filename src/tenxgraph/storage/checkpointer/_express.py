"""An express lane through a checkpointer's queue, for the storage calls of a stopping run.

Hundreds of runs sharing one SQLite connection (or a few pooled PostgreSQL ones) queue for
it; a stop would wait behind the whole queue, once per storage call. A run marks its calls
with an `Express` (a context variable, set by the engine for the run's task); once the run
is stopping, its calls, those already waiting included, are served before the others.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable


class Express:
    """One run's pass to the front of the queue, valid once `urgent` is set."""

    __slots__ = ("_waiting", "urgent")

    def __init__(self) -> None:
        self.urgent = False
        self._waiting: list[tuple[asyncio.Future[None], Callable[[asyncio.Future[None]], None]]]
        self._waiting = []

    def set(self) -> None:
        """From now on this run's storage calls go first, those already queued included."""
        self.urgent = True
        waiting, self._waiting = self._waiting, []
        for turn, promote in waiting:
            if not turn.done():
                promote(turn)

    def _watch(
        self, turn: asyncio.Future[None], promote: Callable[[asyncio.Future[None]], None]
    ) -> None:
        self._waiting = [w for w in self._waiting if not w[0].done()]
        self._waiting.append((turn, promote))


current_express: contextvars.ContextVar[Express | None] = contextvars.ContextVar(
    "tenxgraph_express", default=None
)


class PriorityGate:
    """Up to `capacity` holders at a time (1: a lock); waiters are served in order, except
    that those of an urgent `Express` are served first. Turns are handed over, never taken."""

    def __init__(self, capacity: int = 1) -> None:
        self._free = capacity
        self._queue: deque[asyncio.Future[None]] = deque()
        self._express: deque[asyncio.Future[None]] = deque()

    def turn(self) -> _Turn:
        """`async with gate.turn():` holds a turn for the block."""
        return _Turn(self)

    async def _acquire(self, express: Express | None) -> None:
        if self._free and not self._queue and not self._express:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if express is not None and express.urgent:
            self._express.append(turn)
        else:
            self._queue.append(turn)
            if express is not None:
                express._watch(turn, self._promote)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed the turn just as cancelled
                self._release()
            raise

    def _promote(self, turn: asyncio.Future[None]) -> None:
        try:
            self._queue.remove(turn)
        except ValueError:
            return
        self._express.append(turn)

    def _release(self) -> None:
        for waiting in (self._express, self._queue):
            while waiting:
                turn = waiting.popleft()
                if not turn.done():  # not given up while waiting
                    turn.set_result(None)
                    return
        self._free += 1


class _Turn:
    """A turn on a gate as an async context manager: a plain object, not an async generator,
    so it also works while its loop shuts down (after `loop.shutdown_asyncgens()`)."""

    __slots__ = ("_gate",)

    def __init__(self, gate: PriorityGate) -> None:
        self._gate = gate

    async def __aenter__(self) -> None:
        await self._gate._acquire(current_express.get())

    async def __aexit__(self, *exc_info: object) -> None:
        self._gate._release()


__all__ = ["Express", "PriorityGate", "current_express"]
