"""`ServeDB`: the server's own tables (threads' owners and metadata, the run queue, the events
each run streamed), behind one interface with a SQLite and a PostgreSQL backend.

Every read and write that a client asks for names the owner: a thread or run of another owner
is, to that caller, a thread or run that does not exist. The run queue is claimed by workers
(`claim_run`): a pending run whose thread runs nothing else, or a running run whose worker
stopped renewing its lease (it died), which is then resumed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from tenxgraph.serve.records import RunEvent, RunRecord, RunStatus, ThreadRecord, ThreadStatus


class ThreadExistsError(Exception):
    """`create_thread` of an id already taken (by this owner or another)."""


class ThreadBusyError(Exception):
    """A run asked with `multitask_strategy="reject"` of a thread that has an active run."""

    def __init__(self, thread_id: str, active: str) -> None:
        super().__init__(
            f"thread {thread_id!r} is busy with run {active!r}; nothing was queued. Wait for it "
            "(join), or ask with multitask_strategy 'enqueue', 'interrupt' or 'rollback'."
        )
        self.active = active


def metadata_matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    """Whether `metadata` holds every key of `wanted` with an equal value."""
    return not wanted or all(k in metadata and metadata[k] == v for k, v in wanted.items())


class ServeDB(ABC):
    """The server's tables. `owner` is the caller's identity ("" when the server has no auth)."""

    async def asetup(self) -> None:  # noqa: B027 - optional hook
        """Create the tables (also done on first use)."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    # -- threads --------------------------------------------------------------------------

    @abstractmethod
    async def create_thread(self, thread: ThreadRecord) -> None:
        """Insert; `ThreadExistsError` if the id is taken."""

    @abstractmethod
    async def get_thread(self, thread_id: str, owner: str | None) -> ThreadRecord | None:
        """The thread, if `owner` owns it (any owner when None: the server's own use)."""

    @abstractmethod
    async def update_thread(
        self,
        thread_id: str,
        owner: str | None,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> ThreadRecord | None:
        """Merge `metadata` into the thread's and/or set its status; None if not found."""

    @abstractmethod
    async def search_threads(
        self,
        owner: str,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
        ids: Sequence[str] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[ThreadRecord]:
        """The owner's threads matching every filter, newest first."""

    async def count_threads(
        self,
        owner: str,
        *,
        metadata: dict[str, Any] | None = None,
        status: ThreadStatus | None = None,
    ) -> int:
        found = await self.search_threads(
            owner, metadata=metadata, status=status, limit=1 << 62, offset=0
        )
        return len(found)

    @abstractmethod
    async def delete_thread(self, thread_id: str, owner: str | None) -> bool:
        """Delete the thread, its runs and their events; False if not found."""

    # -- runs -------------------------------------------------------------------------------

    @abstractmethod
    async def create_run(self, run: RunRecord) -> list[str]:
        """Queue `run`, applying its multitask strategy to the thread's active runs in the same
        transaction: "reject" raises `ThreadBusyError` (nothing written), "interrupt" and
        "rollback" ask them to stop (their ids are returned), "enqueue" lets them be. The
        thread becomes busy."""

    @abstractmethod
    async def get_run(self, run_id: str, owner: str | None) -> RunRecord | None: ...

    async def list_runs(
        self,
        thread_id: str,
        owner: str,
        *,
        status: RunStatus | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[RunRecord]:
        """The thread's runs, newest first."""
        return await self.search_runs(
            owner, thread_id=thread_id, status=status, limit=limit, offset=offset
        )

    @abstractmethod
    async def search_runs(
        self,
        owner: str,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        assistant_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[RunRecord]:
        """`owner`'s runs (on one thread, or on all), newest first: one query (the metadata
        matched as `search_threads` matches it)."""

    @abstractmethod
    async def claim_run(self, worker: str, ttl: float) -> RunRecord | None:
        """Take the oldest runnable run for `worker`, leased for `ttl` seconds: a running run
        whose lease expired (its worker died) first, else the oldest pending run of a thread
        with no other run running or queued before it."""

    @abstractmethod
    async def renew_runs(
        self, worker: str, run_ids: Sequence[str], ttl: float
    ) -> dict[str, str | None]:
        """Extend `worker`'s leases; maps each run it still holds to its cancel request (None
        when none). A run missing from the answer is no longer this worker's."""

    @abstractmethod
    async def set_start_version(self, run_id: str, version: int | None) -> None: ...

    @abstractmethod
    async def finish_run(
        self,
        run_id: str,
        worker: str | None,
        status: RunStatus,
        result: dict[str, Any] | None,
        thread_status: ThreadStatus,
        end: RunEvent | None = None,
    ) -> bool:
        """Record the outcome if `worker` still holds the run (any holder when None), with the
        run's `end` event in the same transaction (a follower that reads `end` finds the
        outcome), and set the thread's status (left "busy" while another run of it is
        active). False, and nothing written, if the run is no longer this worker's."""

    @abstractmethod
    async def request_cancel(self, run_ids: Sequence[str], action: str) -> list[RunRecord]:
        """Ask runs to stop: a pending run is finished at once as "interrupted" (returned; its
        thread idle unless other runs are active), a running one gets the request, which its
        worker reads when it renews its lease."""

    @abstractmethod
    async def delete_run(self, run_id: str, owner: str) -> bool:
        """Delete a finished run and its events; False if not found or still active."""

    # -- events -----------------------------------------------------------------------------

    @abstractmethod
    async def add_events(self, run_id: str, events: Sequence[RunEvent]) -> None: ...

    async def add_events_many(self, rows: Sequence[tuple[str, RunEvent]]) -> None:
        """The events of several runs (`(run_id, event)` in order), in one transaction where
        the backend can: a worker records all its runs' events together."""
        by_run: dict[str, list[RunEvent]] = {}
        for run_id, event in rows:
            by_run.setdefault(run_id, []).append(event)
        for run_id, events in by_run.items():
            await self.add_events(run_id, events)

    @abstractmethod
    async def read_events(self, run_id: str, after: int, limit: int = 500) -> list[RunEvent]:
        """The run's events with `seq > after`, in order."""

    @abstractmethod
    async def last_seq(self, run_id: str) -> int:
        """The highest event seq of the run, 0 if it has none."""


__all__ = ["ServeDB", "ThreadBusyError", "ThreadExistsError", "metadata_matches"]
