"""Run coroutines for the sync API on a private event-loop thread.

`invoke`/`stream` must work from plain scripts, from threads, and from code that already runs
an event loop (Jupyter), where `asyncio.run` is not allowed. Each compiled graph gets its own
loop thread, started on first use and stopped when the graph is closed or collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
_CLOSE_WAIT_SECONDS = 10.0


class LoopThread:
    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name=f"tenxgraph-{self._name}", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _check_not_inside(self) -> None:
        if threading.current_thread() is self._thread:
            raise RuntimeError(
                "A sync method (invoke/stream/get_state) of this graph was called from code "
                "running inside the same graph; use its async form (await app.ainvoke(...))"
            )

    def run(self, func: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run `func(*args)` on the loop thread and wait for its result."""
        self._check_not_inside()
        future = asyncio.run_coroutine_threadsafe(func(*args), self._ensure())
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def iterate(
        self, func: Callable[..., AsyncIterator[T]], *args: Any, keepalive: object = None
    ) -> Iterator[T]:
        """Iterate an async iterator on the loop thread, one item at a time.

        The whole iteration runs in one task there (so a run's timeouts and stop requests can
        cancel it), handing items over one by one: the producer waits until the consumer asks
        for the next. `keepalive` is held until the iteration ends."""
        self._check_not_inside()
        loop = self._ensure()
        agen = func(*args)
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

        task = asyncio.run_coroutine_threadsafe(pump(), loop)
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
            del keepalive

    def call_soon(self, callback: Any, *args: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            if thread is not threading.current_thread():
                thread.join(timeout=5)
            if not loop.is_running():
                loop.close()


__all__ = ["LoopThread"]
