"""`Keeper`: one run's writes to its thread, and the lease that makes them the only ones.

The run's first save takes the thread's lease (atomically with the write), a heartbeat renews
it while the run works, and the last save (or `let_go`, when the run ends otherwise) releases
it. A run that finds its lease taken over stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import StaleStateError, ThreadBusyError
from tenxgraph.core.graph.guard import Guard
from tenxgraph.core.graph.threads import log
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer.lease import Lease, lost_error, new_owner

if TYPE_CHECKING:
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer
    from tenxgraph.storage.media.offload import MediaOffload


class Keeper:
    """Saves one run's checkpoints under its lease; nothing at all without a checkpointer."""

    def __init__(
        self,
        checkpointer: BaseCheckpointer | None,
        thread_id: str,
        run_id: str,
        guard: Guard,
        on_lost: Callable[[], None],
        media: MediaOffload | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.media = media  # big inline media is saved to its store, the messages naming it
        self.thread_id = thread_id
        self.guard = guard  # the run's one timer also beats the heartbeat
        self.on_lost = on_lost  # called when another run took the thread over
        # the run's claim on its thread, taken by its first save and released by its last
        self.lease = (
            None if checkpointer is None else Lease(new_owner(run_id), checkpointer.lease_ttl)
        )
        self.holding = False
        self.lost = False
        # a store that is not saved after every step: the messages of the steps not saved
        # yet, to append at the next save (None: that save rewrites the log)
        self.every_step = checkpointer is None or checkpointer.saves_every_step
        self._unsaved: list[Message] | None = []
        self._renewal: asyncio.Task[None] | None = None

    async def save(
        self,
        state: AgentState,
        version: int | None,
        added: list[Message] | None,
        *,
        final: bool = False,
        step: bool = False,
    ) -> int | None:
        """Checkpoint: append `added` to the log, or replace the log when it is None. The
        first save takes the thread's lease, a `final` one releases it. The save after a
        `step` is put off, for a store that is not saved after every step, to its next save
        (the version stays the same)."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            return version
        unsaved = self._unsaved
        if step and not final and not self.every_step and self.holding:
            if unsaved is not None:
                if added is None:
                    self._unsaved = None
                else:
                    unsaved.extend(added)
            return version
        if unsaved != [] and added is not None:
            added = None if unsaved is None else [*unsaved, *added]
        lease = self.lease
        messages: Sequence[Message] = state.context if added is None else added
        if self.media is not None and type(messages) is list:  # not a lazy history
            messages = await self.media.prepare(self.thread_id, messages)
        try:
            saved = await checkpointer.asave(
                self.thread_id,
                expected_version=version,
                state=state,
                new_messages=messages,
                rewrite=added is None,
                lease=lease,
                release=final,
            )
        except (ThreadBusyError, StaleStateError) as exc:
            if not self.holding or lease is None:  # the first save: the caller decides
                raise
            self.holding = False  # someone else took the thread while we held it
            self._stop_heartbeat()
            raise lost_error(self.thread_id, lease.owner) from exc
        self._unsaved = []
        if final:
            self.holding = False
            self._stop_heartbeat()
        elif not self.holding:
            self.holding = True
            self._start_heartbeat()
        return saved

    async def record_failure(
        self,
        state: AgentState,
        version: int | None,
        exc: BaseException,
        current: Sequence[Any],
        deferred: set[str],
    ) -> int | None:
        """Mark the state failed and keep what was done so far; the version it is saved at."""
        if isinstance(exc, asyncio.CancelledError | GeneratorExit) or not self.holding:
            return version  # cancelled (continued later), or the thread is not ours to write
        from tenxgraph.core.redaction import redact, scrub_exception

        meta = state.execution_meta
        meta.error(redact(str(scrub_exception(exc))))  # no key is stored
        if current:  # `ainvoke(None, config)` retries from the step that failed
            meta.internal_data["next"] = list(current)
            meta.internal_data["deferred"] = sorted(deferred)
        # the original error matters more than a failed bookkeeping write
        with contextlib.suppress(Exception):
            version = await self.save(state, version, [], final=True)
        return version

    async def delete_children(self, thread_ids: list[str]) -> None:
        """Delete the threads of subgraph runs a saved step finished (the parent has their
        messages and fields now; a crash before this leaves one behind, harmless)."""
        checkpointer = self.checkpointer
        if checkpointer is None:
            return
        for thread_id in thread_ids:
            try:
                await checkpointer.adelete_thread(thread_id)
            except Exception as exc:  # the step is saved: a leftover does no harm
                log.warning("thread %s: could not delete the finished subgraph thread %s (%s)",
                            self.thread_id, thread_id, exc)  # fmt: skip

    async def let_go(self) -> None:
        """At the end of a run that still holds its lease (cancelled, or its last save
        failed): release it, so the thread can be continued at once."""
        self._stop_heartbeat()
        checkpointer, lease = self.checkpointer, self.lease
        if self.holding and checkpointer is not None and lease is not None:
            self.holding = False
            with contextlib.suppress(Exception):  # else it expires after its ttl
                await checkpointer.arelease_lease(self.thread_id, lease.owner)

    def lost_error(self) -> Exception | None:
        """The error of a run stopped because another run took its thread over."""
        if self.lost and self.lease is not None:
            return lost_error(self.thread_id, self.lease.owner)
        return None

    # -- the heartbeat ---------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        """Renew the lease every third of its life while the run works (a long node or tool
        must not let it expire), on the run's one timer; a run that ends sooner never does."""
        if self.lease is not None:
            self.guard.keep_alive(self.lease.ttl / 3, self._beat)

    def _beat(self) -> None:
        if self._renewal is None or self._renewal.done():  # one renewal at a time
            self._renewal = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        checkpointer, lease = self.checkpointer, self.lease
        if checkpointer is None or lease is None:
            return
        try:
            kept = await checkpointer.arenew_lease(self.thread_id, lease)
        except Exception as exc:  # storage hiccup: try again at the next beat; a save would tell
            log.warning("thread %s: renewing the lease failed (%s); trying again at the next "
                        "beat", self.thread_id, type(exc).__name__)  # fmt: skip
            kept = True
        if not kept and self.holding:  # taken over by another run: this one must stop now
            self.lost = True
            self.on_lost()

    def _stop_heartbeat(self) -> None:
        self.guard.stop_beating()
        if self._renewal is not None and not self._renewal.done():
            self._renewal.cancel()


__all__ = ["Keeper"]
