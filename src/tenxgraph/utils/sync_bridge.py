"""Run coroutines for the sync API on the process's private event-loop thread.

`invoke`/`stream` must work from plain scripts, from threads, and from code that already runs
an event loop (Jupyter), where `asyncio.run` is not allowed. They run on one event loop in one
daemon thread per process, started on first use, shared by every compiled graph, and wound
down before the interpreter exits (tasks cancelled, async generators and the checkpointers used
there closed, then the loop), so that nothing is left to complain at exit.

The shared loop is an executor, not state: every graph still has its own checkpointer, thread
turns, callbacks and ids, and a graph's runs on it are the same runs `ainvoke` makes anywhere.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

_CLOSE_WAIT_SECONDS = 10.0  # an abandoned stream's run, cancelled: how long to wait for its end
_WIND_DOWN_SECONDS = 5.0  # at exit: at most this long for cancelled tasks and closes to finish


class Closeable(Protocol):
    """What the loop thread closes at exit: a checkpointer, whose connections opened on that
    loop can only be closed there."""

    def aclose(self) -> Awaitable[None]: ...


# The bridge of the graph whose sync call is running in this context: a node calling a sync
# method of its own graph from the loop thread would wait for itself.
_running_for: contextvars.ContextVar[SyncBridge | None] = contextvars.ContextVar(
    "tenxgraph_sync_caller", default=None
)


_in_loop_thread = threading.local()  # `.loop` is set in the threads that run a loop of ours


class _LoopThread:
    """An event loop running forever in a daemon thread, and its orderly end."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        _in_loop_thread.loop = self.loop
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, closing: list[Closeable], timeout: float = _WIND_DOWN_SECONDS) -> None:
        """Cancel what still runs there, close `closing` and the loop's async generators and
        default executor, then stop and close the loop (as `asyncio.run` ends its loop).
        Bounded by `timeout`: a task that will not end leaves the loop to the daemon thread."""
        if threading.current_thread() is self.thread or self.loop.is_closed():
            return
        try:
            self.submit(_wind_down(closing)).result(timeout)
        except Exception:  # a loop that cannot wind down is left running
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


async def _wind_down(closing: list[Closeable]) -> None:
    loop = asyncio.get_running_loop()
    this = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks(loop) if task is not this]
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
        for task in tasks:  # retrieved, so that none is reported as never retrieved
            if not task.cancelled():
                task.exception()
    for resource in closing:
        with contextlib.suppress(Exception):
            await resource.aclose()
    await loop.shutdown_asyncgens()
    await loop.shutdown_default_executor()


class _LitellmClients:
    """litellm's cached HTTP clients: those made on the loop thread can only be closed there
    (litellm's own exit hook closes them on a new loop, leaving their sockets unclosed)."""

    async def aclose(self) -> None:
        litellm = sys.modules.get("litellm")  # never imported here: only if a model ran
        close = getattr(litellm, "close_litellm_async_clients", None)
        if close is not None:
            await close()


class _ProcessLoop:
    """The process's one loop thread for the sync API, started on first use, and the
    resources used from it, to close there at exit. Re-created in a forked child."""

    def __init__(self, name: str = "tenxgraph-loop") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._current: _LoopThread | None = None
        self._closing: weakref.WeakValueDictionary[int, Closeable] = weakref.WeakValueDictionary()
        self._exit_hook = False
        self._left_by_fork: list[_LoopThread] = []  # kept, never closed: the parent's loop

    def get(self) -> _LoopThread:
        current = self._current
        if current is not None:
            return current
        with self._lock:
            if self._current is None:
                if not self._exit_hook:
                    _before_exit(self.close)
                    self._exit_hook = True
                self._current = _LoopThread(self._name)
            return self._current

    def close_at_exit(self, resource: Closeable) -> None:
        self._closing[id(resource)] = resource

    def close(self) -> None:
        """Wind the loop down (at interpreter exit; a later sync call starts a new one)."""
        with self._lock:
            current, self._current = self._current, None
            closing: list[Closeable] = [*self._closing.values(), _LitellmClients()]
            self._closing.clear()
            self._exit_hook = False  # a sync call after this (in an exit hook) starts anew
        if current is not None:
            current.close(closing)

    def after_fork(self) -> None:
        """In a forked child the loop's thread is gone: forget the loop (unclosed: its file
        descriptors are shared with the parent's) and start a new one on the next call."""
        self._lock = threading.Lock()
        if self._current is not None:
            self._left_by_fork.append(self._current)
        self._current = None
        self._closing = weakref.WeakValueDictionary()


def _before_exit(callback: Callable[[], None]) -> None:
    """Run `callback` when the main thread ends, before `atexit` callbacks: other libraries'
    exit hooks (litellm closes its HTTP clients there) must find the loop already wound down,
    as they would after `asyncio.run`."""

    def guarded() -> None:
        with contextlib.suppress(Exception):
            callback()

    register = getattr(threading, "_register_atexit", None)
    try:
        if register is None:
            raise RuntimeError("no threading exit hooks")
        register(guarded)
    except RuntimeError:  # already shutting down, or another interpreter: atexit will do
        import atexit

        atexit.register(guarded)


_PROCESS_LOOP = _ProcessLoop()
# where synchronous code reads from a store (a lazy history fetching older messages): a loop
# of its own, so that a read never waits for the loop of the code that asked for it
_READ_LOOP = _ProcessLoop("tenxgraph-read")
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PROCESS_LOOP.after_fork)
    os.register_at_fork(after_in_child=_READ_LOOP.after_fork)


def read_blocking(closing: Closeable, read: Coroutine[Any, Any, T]) -> T:
    """Run `read` (a store's coroutine) on the read loop and wait for its result, from
    synchronous code on any thread. `closing` (what releases the store's connection there)
    runs on that loop at exit."""
    loop_thread = _READ_LOOP.get()
    if threading.current_thread() is loop_thread.thread:
        read.close()
        raise RuntimeError("a store read was asked for from the read loop itself")
    _READ_LOOP.close_at_exit(closing)
    return loop_thread.submit(read).result()


class SyncBridge:
    """One owner's (a compiled graph's) way to run its coroutines, blocking, on the process's
    loop thread. `closing` (its checkpointer) is closed on that loop at exit."""

    def __init__(self, name: str, *, closing: Closeable | None = None) -> None:
        self.name = name
        self.closing = closing

    def _loop_for_call(self) -> tuple[_LoopThread, bool]:
        """The loop to run a call on, and whether it is a temporary one to close after it.

        From the shared loop's own thread (a node calling a sync method), that loop is busy
        with the caller: the call gets a loop thread of its own for its duration; a call of
        the caller's own graph is refused instead, as its async form is what it needs."""
        if getattr(_in_loop_thread, "loop", None) is not None:
            if _running_for.get() is self:
                raise RuntimeError(
                    "A sync method (invoke/stream/get_state) of this graph was called from "
                    "code running inside the same graph; use its async form "
                    "(await app.ainvoke(...))"
                )
            return _LoopThread("tenxgraph-nested-loop"), True
        if self.closing is not None:
            _PROCESS_LOOP.close_at_exit(self.closing)
        return _PROCESS_LOOP.get(), False

    async def _as_owner(self, awaitable: Awaitable[T]) -> T:
        _running_for.set(self)  # in this task's own context: seen by the run's nodes only
        return await awaitable

    def run(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run `func(*args)` on the loop thread and wait for its result."""
        loop_thread, temporary = self._loop_for_call()
        future = loop_thread.submit(self._as_owner(func(*args)))
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise
        finally:
            if temporary:
                loop_thread.close([])

    def iterate(
        self, func: Callable[..., AsyncIterator[T]], *args: Any, keepalive: object = None
    ) -> Iterator[T]:
        """Iterate an async iterator on the loop thread, one item at a time.

        The whole iteration runs in one task there (so a run's timeouts and stop requests can
        cancel it), handing items over one by one: the producer waits until the consumer asks
        for the next. `keepalive` is held until the iteration ends."""
        loop_thread, temporary = self._loop_for_call()
        loop = loop_thread.loop
        agen = func(*args)
        import queue  # on first use: only iterating from sync code needs it

        handoff: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        demand = asyncio.Event()
        closed = threading.Event()

        async def pump() -> None:
            try:
                async for item in agen:
                    handoff.put(("item", item))
                    await demand.wait()
                    demand.clear()
            except BaseException as exc:  # delivered to the consumer thread
                handoff.put(("error", exc))
            else:
                handoff.put(("end", None))
            finally:
                try:
                    aclose = getattr(agen, "aclose", None)
                    if aclose is not None:
                        await aclose()
                finally:
                    closed.set()

        task = loop_thread.submit(self._as_owner(pump()))
        finished = False
        try:
            while True:
                kind, value = handoff.get()
                if kind == "end":
                    finished = True
                    return
                if kind == "error":
                    finished = True
                    raise value
                yield value
                loop.call_soon_threadsafe(demand.set)
        finally:
            if not finished:  # the consumer stopped early: end the run on the loop thread
                task.cancel()
                closed.wait(timeout=_CLOSE_WAIT_SECONDS)
            with contextlib.suppress(BaseException):
                task.result(timeout=_CLOSE_WAIT_SECONDS)
            if temporary:
                loop_thread.close([])
            del keepalive

    def stop(self) -> None:
        """Nothing to stop: the loop thread belongs to the process and ends at its exit."""


# Former name, for callers not yet moved to `SyncBridge`.
LoopThread = SyncBridge

__all__ = ["Closeable", "LoopThread", "SyncBridge"]
