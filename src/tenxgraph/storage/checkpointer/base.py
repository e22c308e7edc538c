"""`BaseCheckpointer`: the one interface every thread store implements.

A thread is stored as a small *header* (every state field except `context`, as JSON) plus an
append-only *message log*. Each save adds the messages of one step and replaces the header, so
its cost depends on what changed, never on the length of the history. Saves are versioned: a
writer that loaded version N may only write N+1 (compare-and-swap), otherwise it gets
`StaleStateError` and nothing is written.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer.lease import DEFAULT_LEASE_TTL, Lease, LeaseHolder

S = TypeVar("S", bound=AgentState)


@dataclass(frozen=True, slots=True)
class ThreadSnapshot(Generic[S]):
    """A thread as loaded: its state and the version it was read at."""

    thread_id: str
    version: int
    state: S


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """One saved version of a thread, as listed by `ahistory`."""

    thread_id: str
    version: int
    step: int
    status: str
    node: str | None
    message_count: int
    created_at: float


def checkpoint_fields(state: AgentState) -> tuple[int, str, str | None]:
    """(step, status, current node) of a state, stored beside each version for listings."""
    meta = state.execution_meta
    return meta.step, str(meta.status.value), meta.current_node


def thread_id_of(config: dict[str, Any] | None) -> str:
    """The `thread_id` of a run config, with a clear error when it is missing."""
    thread_id = (config or {}).get("thread_id")
    if thread_id is None:
        raise ValueError("config must contain 'thread_id', e.g. config={'thread_id': 'user-42'}")
    return str(thread_id)


def encode_header(state: AgentState, thread_id: str | None = None) -> str:
    """The state without its messages, as JSON. A header is written at every step, so it is
    kept small: `execution_meta` leaves out fields at their defaults and the thread id when it
    is the row's own (the runtime owns that class), and an empty `context_summary` is left
    out. `decode_state` puts them back."""
    meta_state = state.execution_meta
    serializer = meta_state.__pydantic_serializer__
    if thread_id is not None and meta_state.thread_id == thread_id:
        meta = serializer.to_json(meta_state, exclude_defaults=True, exclude=_THREAD_ID).decode()
    else:
        meta = serializer.to_json(meta_state, exclude_defaults=True).decode()
        if meta_state.thread_id is None:  # say so: an absent id means "the row's"
            meta = meta[:-1] + ("," if meta != "{}" else "") + '"thread_id":null}'
    if state.context_summary is None:
        if not (_has_own_fields(type(state)) or state.__pydantic_extra__):
            # the plain AgentState: nothing else to write
            return '{"execution_meta":' + meta + "}"
        skip = _NO_SUMMARY
    else:
        skip = _RUNTIME
    rest = state.model_dump_json(exclude=skip)
    if rest == "{}":
        return '{"execution_meta":' + meta + "}"
    return rest[:-1] + ',"execution_meta":' + meta + "}"


# field names left out of a header (sets, as pydantic takes them; never changed)
_THREAD_ID = {"thread_id"}
_RUNTIME = {"context", "execution_meta"}
_NO_SUMMARY = {"context", "execution_meta", "context_summary"}
_OWN_FIELDS: dict[type[AgentState], bool] = {}


def _has_own_fields(state_type: type[AgentState]) -> bool:
    """Whether a state class has fields of its own besides the runtime's three."""
    found = _OWN_FIELDS.get(state_type)
    if found is None:
        found = _OWN_FIELDS[state_type] = not _NO_SUMMARY.issuperset(state_type.model_fields)
    return found


def encode_message(message: Message) -> str:
    return message.model_dump_json()


def decode_state(
    state_type: type[S], thread_id: str, header: str | bytes, messages: Sequence[str | bytes]
) -> S:
    """Rebuild a state from a stored header and message log, validating every field.

    Only JSON of the bound state class is accepted; anything that does not validate raises
    `SerializationError` naming the thread and the field.
    """

    def text(raw: str | bytes) -> str:
        return raw.decode() if isinstance(raw, bytes) else raw

    header_text = text(header).strip()
    if not header_text.startswith("{"):
        raise SerializationError(
            f"Thread {thread_id!r}: the stored state header is not a JSON object",
            context={"thread_id": thread_id, "field": None},
        )
    body = header_text[1:].strip()
    document = '{"context":[' + ",".join(map(text, messages)) + "]" + ("," if body != "}" else "")
    try:
        state = state_type.model_validate_json(document + body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        raise SerializationError(
            f"Thread {thread_id!r}: stored data does not fit {state_type.__name__}: "
            f"field {field!r}: {first['msg']}",
            context={"thread_id": thread_id, "field": field},
        ) from exc
    except json.JSONDecodeError as exc:  # pragma: no cover - pydantic reports JSON errors itself
        raise SerializationError(f"Thread {thread_id!r}: stored data is not JSON") from exc
    stored_meta = json.loads(header_text).get("execution_meta")
    if isinstance(stored_meta, dict) and "thread_id" not in stored_meta:
        state.execution_meta.thread_id = thread_id
    if len(state.context) != len(messages):  # a row holding no message, or several
        raise SerializationError(
            f"Thread {thread_id!r}: {len(messages)} stored message rows decoded into "
            f"{len(state.context)} messages; a row is corrupt",
            context={"thread_id": thread_id, "field": "context"},
        )
    return state


class BaseCheckpointer(ABC):
    """Keeps threads: a versioned state header plus an append-only message log per thread,
    and each thread's lease (which run owns it; see `tenxgraph.storage.checkpointer.lease`).
    """

    #: seconds a run's lease lasts past its last save or heartbeat (built-in stores take it as
    #: `lease_ttl=`): how long a thread stays blocked after its owner's process died
    lease_ttl: float = DEFAULT_LEASE_TTL

    def __init__(self) -> None:
        self.state_type: type[AgentState] = AgentState

    def bind_state_type(self, state_type: type[AgentState]) -> None:
        """The state class `aget_state` validates stored data against by default."""
        self.state_type = state_type

    # -- lifecycle -------------------------------------------------------------------------

    async def asetup(self) -> None:  # noqa: B027 - optional hook
        """Create tables, pools or files. Safe to call more than once."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections and files."""

    # -- threads ---------------------------------------------------------------------------

    @abstractmethod
    async def aversion(self, thread_id: str) -> int | None:
        """The current version of a thread, or None if it does not exist. Cheap."""

    @abstractmethod
    async def aload(
        self, thread_id: str, state_type: type[S], version: int | None = None
    ) -> ThreadSnapshot[S] | None:
        """The thread's state at `version` (default: the latest), or None if the thread does
        not exist. An unknown version raises `ResourceNotFoundError`; a version from before a
        history rewrite (`asave(..., rewrite=True)`) raises `StorageError`."""

    @abstractmethod
    async def asave(
        self,
        thread_id: str,
        *,
        expected_version: int | None,
        state: AgentState,
        new_messages: Sequence[Message],
        rewrite: bool = False,
        lease: Lease | None = None,
        release: bool = False,
    ) -> int:
        """Append `new_messages` and replace the header, if the thread is still at
        `expected_version` (None: the thread must not exist yet). Returns the new version;
        raises `StaleStateError` otherwise. With `rewrite=True`, `new_messages` is the whole
        history and replaces the stored log (only when a context reducer rewrote history).

        Leases: while another owner's lease on the thread is live, the save raises
        `ThreadBusyError` and writes nothing (checked before the version). With `lease`, the
        save takes or extends that lease (`lease.ttl` from now), or releases it when
        `release` is true; without one, it leaves the thread unleased. (A run whose lease
        expired and was taken over gets `ThreadBusyError` here; the engine reports it as
        `LeaseLostError`.)"""

    # -- leases: a run owns its thread from its first save to its last ---------------------

    @abstractmethod
    async def arenew_lease(self, thread_id: str, lease: Lease) -> bool:
        """Extend `lease` by `lease.ttl` from now if its owner still holds it, expired or not,
        as long as no other run took it (the heartbeat of a long step). False if the lease
        was taken over or released."""

    @abstractmethod
    async def arelease_lease(self, thread_id: str, owner: str) -> None:
        """Release the thread's lease if `owner` holds it; otherwise do nothing."""

    @abstractmethod
    async def alease_holder(self, thread_id: str) -> LeaseHolder | None:
        """The owner of the thread's live lease and its remaining seconds, or None."""

    @abstractmethod
    async def ahistory(self, thread_id: str, *, limit: int | None = None) -> list[CheckpointInfo]:
        """The saved versions of a thread, newest first (empty for an unknown thread)."""

    @abstractmethod
    async def adelete_thread(self, thread_id: str) -> bool:
        """Delete a thread; True if it existed."""

    @abstractmethod
    async def alist_threads(self, *, offset: int = 0, limit: int | None = None) -> list[str]:
        """Thread ids, oldest first."""

    # -- tool ledger: a finished tool call is recorded once and replayed, never re-run --------

    @abstractmethod
    async def aput_tool_result(
        self, thread_id: str, message_id: str, call_id: str, result: dict[str, Any]
    ) -> bool:
        """Record the result of tool call `call_id` of assistant message `message_id`. The
        first record wins: returns False (and keeps the old one) if there already is one."""

    @abstractmethod
    async def aget_tool_result(
        self, thread_id: str, message_id: str, call_id: str
    ) -> dict[str, Any] | None:
        """The recorded result of a tool call, or None."""

    # -- stop requests (one process asks a run in another to stop) -------------------------

    @abstractmethod
    async def arequest_stop(self, thread_id: str) -> None: ...

    @abstractmethod
    async def ais_stop_requested(self, thread_id: str) -> bool: ...

    @abstractmethod
    async def aclear_stop_request(self, thread_id: str) -> None: ...

    # -- conveniences ----------------------------------------------------------------------

    async def aget_state(
        self, config: dict[str, Any], state_type: type[AgentState] | None = None
    ) -> AgentState | None:
        """The stored state of `config["thread_id"]` (a fresh copy), or None."""
        snapshot = await self.aload(thread_id_of(config), state_type or self.state_type)
        return None if snapshot is None else snapshot.state


__all__ = [
    "BaseCheckpointer",
    "CheckpointInfo",
    "ThreadSnapshot",
    "checkpoint_fields",
    "decode_state",
    "encode_header",
    "encode_message",
    "thread_id_of",
]
