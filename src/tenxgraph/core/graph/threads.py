"""`Threads`: what one app knows about its threads in this process.

Which run holds each thread (runs of this app on one event loop queue here; other apps and
processes are kept out by the checkpointer's lease), and the live state of recently run
threads, so that the next turn on a thread need not load it again.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Collection
from typing import TYPE_CHECKING, Literal

from tenxgraph.core.exceptions import ResourceNotFoundError
from tenxgraph.core.graph.program import Program
from tenxgraph.core.redaction import get_logger
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state._construct import copied
from tenxgraph.storage.checkpointer.lease import busy_error, waited_error
from tenxgraph.storage.checkpointer.paging import RECENT_MESSAGES
from tenxgraph.storage.checkpointer.versions import same_version

log = get_logger("tenxgraph.threads")

#: where `Threads.checkout` got a state: a new thread's, the one kept from the last run, the
#: stored head read now for this run alone, or an older stored version (a fork)
Source = Literal["new", "kept", "read", "fork"]

LIVE_THREADS = 1024  # per app: states kept in memory between runs, so a run need not reload
LIVE_BYTES = 256 * 2**20  # per app: and at most about this much memory for their messages
# what a kept message is counted as: a 300-character text takes ~0.74 KB sealed (compact) and
# ~1.9 KB not (a LOW turn's input kept on an in-memory thread is not sealed)
MESSAGE_BYTES = 1536
STATE_BYTES = 4096  # and a kept state besides its messages


if TYPE_CHECKING:
    from typing import Protocol

    from tenxgraph.storage.checkpointer.lease import Lease

    class Holder(Protocol):
        """A run as the thread registry sees it."""

        lease: Lease | None
        loop: asyncio.AbstractEventLoop | None  # the loop it runs on, once started

        def request_stop(self) -> None: ...


class Threads:
    """Per app: the runs holding threads, their waiting queues and the states kept warm."""

    def __init__(self, program: Program, initial: AgentState) -> None:
        self.program = program
        self.initial = initial  # every new thread starts from a copy of this
        # per (event loop, thread): the runs waiting for their turn on that thread
        self.turns: dict[tuple[int, str], deque[asyncio.Future[None]]] = {}
        # thread -> (version, its state after its last run, the memory counted for it)
        self.live: OrderedDict[str, tuple[int, AgentState, int]] = OrderedDict()
        self.live_bytes = 0
        self.active: dict[str, Holder] = {}

    async def take_turn(
        self,
        thread_id: str,
        strategy: str = "reject",
        deadline: float | None = None,
        waited: float | None = None,
    ) -> tuple[int, str]:
        """Take `thread_id` among this app's runs on this event loop, by the multitask
        strategy: refuse at once while another run holds it (`reject`), wait for it
        (`enqueue`, until the `time.monotonic()` `deadline`, `waited` seconds from the run's
        start), or stop it and wait (`interrupt`). Returns the key to give back to
        `end_turn`."""
        loop = asyncio.get_running_loop()
        key = (id(loop), thread_id)
        waiting = self.turns.get(key)
        if waiting is None:  # nobody else: no lock object at all
            self.turns[key] = deque()
            return key
        holder = self.active.get(thread_id)
        lease = None if holder is None else holder.lease
        owner = "a run of this app" if lease is None else lease.owner
        if strategy == "reject":
            raise busy_error(thread_id, owner, None)
        if strategy == "interrupt" and holder is not None:
            holder.request_stop()
        log.info(
            "thread %s is held by %s: %s", thread_id, owner,
            "stopping that run, then taking the thread" if strategy == "interrupt"
            else "waiting for its turn",
        )  # fmt: skip
        turn = loop.create_future()
        waiting.append(turn)
        try:
            async with asyncio.timeout_at(deadline):  # the loop's clock is time.monotonic()
                await turn
        except (asyncio.CancelledError, TimeoutError) as exc:
            if turn.done() and not turn.cancelled():  # handed the turn just as we gave up
                self.end_turn(key)
            if isinstance(exc, TimeoutError):
                raise waited_error(thread_id, owner, waited) from exc
            raise
        return key

    def end_turn(self, key: tuple[int, str]) -> None:
        """Hand the thread to the next run waiting for it, if any."""
        waiting = self.turns[key]
        while waiting:
            turn = waiting.popleft()
            if not turn.done():  # not given up (cancelled) while waiting
                turn.set_result(None)
                return
        del self.turns[key]

    def new_state(self) -> AgentState:
        return copied(self.initial)

    async def checkout(
        self, thread_id: str, version: int | None = None, look_up: Collection[str | int] = ()
    ) -> tuple[AgentState, int | None, Source]:
        """The thread's state for a run, the version it is at, and where it came from. Kept
        from the last run if still current, else loaded; a fresh state for a new thread. The
        run owns it until it ends; one it "read" nothing else has ever held. `look_up`: ids
        of the messages the run will merge (a loading store may say in the same read which of
        them it holds)."""
        checkpointer = self.program.checkpointer
        if checkpointer is None:
            if version is not None:
                raise ValueError("config['checkpoint_version'] needs a graph with a checkpointer")
            return self.new_state(), None, "new"
        kept = self._forget(thread_id)
        if kept is None and version is None:  # nothing to compare: read it at once
            return await self._load(thread_id, look_up)
        head = await checkpointer.aversion(thread_id)
        if version is not None:
            if head is None:
                raise ResourceNotFoundError(
                    f"Thread {thread_id!r} does not exist, so it has no version {version}",
                    context={"thread_id": thread_id, "version": version},
                )
            if version != head:
                snapshot = await checkpointer.aload(thread_id, self.program.state_type, version)
                assert snapshot is not None
                return snapshot.state, head, "fork"
        if kept is not None and same_version(kept[0], head):
            return kept[1], head, "kept"
        if head is None:
            return self.new_state(), None, "new"
        return await self._load(thread_id, look_up)

    def forget(self, thread_id: str) -> None:
        """Keep nothing of `thread_id` (a thread that is not run again)."""
        self._forget(thread_id)

    async def stored(self, thread_id: str) -> AgentState:
        """The thread's state to read, not to run: kept or loaded (its recent messages)."""
        kept = await self.current(thread_id)
        return kept if kept is not None else (await self._load(thread_id))[0]

    def _forget(self, thread_id: str) -> tuple[int, AgentState, int] | None:
        """Stop keeping `thread_id`; what was kept of it, if anything."""
        kept = self.live.pop(thread_id, None)
        if kept is not None:
            self.live_bytes -= kept[2]
        return kept

    async def _load(
        self, thread_id: str, look_up: Collection[str | int] = ()
    ) -> tuple[AgentState, int | None, Source]:
        """The stored thread with its recent messages only (older ones are read from the
        store if a node reads them), or a new state."""
        checkpointer = self.program.checkpointer
        assert checkpointer is not None
        state_type = self.program.state_type
        snapshot = await checkpointer.aload_recent(thread_id, state_type, RECENT_MESSAGES, look_up)
        if snapshot is None:
            return self.new_state(), None, "new"
        return snapshot.state, snapshot.version, "read"

    async def current(self, thread_id: str, version: int | None = None) -> AgentState | None:
        """The kept state of `thread_id` if it is still the stored head (and `version`, when
        given), else None. It stays kept: the caller must not hand it out as it is."""
        kept = self.live.get(thread_id)
        checkpointer = self.program.checkpointer
        if kept is None or checkpointer is None or version not in (None, kept[0]):
            return None
        return kept[1] if same_version(kept[0], await checkpointer.aversion(thread_id)) else None

    def remember(self, thread_id: str, version: int | None, state: AgentState) -> None:
        """Keep a run's final state for the thread's next run. The least recently run threads
        beyond `LIVE_THREADS`, or beyond `LIVE_BYTES` of counted memory, are dropped (they
        are read from the store again when needed, the recent messages only)."""
        if self.program.checkpointer is None or version is None:
            return
        live = self.live
        self._forget(thread_id)
        size = STATE_BYTES + MESSAGE_BYTES * in_memory(state.context)
        live[thread_id] = (version, state, size)
        self.live_bytes += size
        while len(live) > 1 and (len(live) > LIVE_THREADS or self.live_bytes > LIVE_BYTES):
            self.live_bytes -= live.popitem(last=False)[1][2]


def in_memory(history: list[Message]) -> int:
    """How many messages of `history` are in memory (a lazy history's stored part is not)."""
    counted = getattr(history, "in_memory", None)
    return len(history) if counted is None else int(counted())


__all__ = ["LIVE_BYTES", "LIVE_THREADS", "Threads"]
