"""Thread leases: a run owns its thread from its first write to its last.

The first save of a run takes the thread's lease (in the same transaction as the save), each
later save and a periodic heartbeat extend it, and the run's last save releases it. While a
lease is live, every other writer fails before writing anything (`ThreadBusyError`). A lease
whose owner died simply expires after `ttl` seconds, and the thread can be continued.
"""

from __future__ import annotations

import os
import socket

from tenxgraph.core.exceptions import LeaseLostError, ThreadBusyError
from tenxgraph.utils.record import FrozenRecord

#: How long a lease lasts past its last save or heartbeat: how long a thread stays blocked
#: after its owner's process died. Runs renew it every third of this while they work.
DEFAULT_LEASE_TTL = 30.0


class Lease(FrozenRecord):
    """A run's claim on a thread. `owner` is unique per run; the claim lasts `ttl` seconds
    past the save or renewal that set it."""

    __match_args__ = ("owner", "ttl")
    __slots__ = __match_args__
    owner: str
    ttl: float

    def __init__(self, owner: str, ttl: float) -> None:
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "ttl", ttl)


class LeaseHolder(FrozenRecord):
    """Who holds a thread's live lease, and for how many more seconds."""

    __match_args__ = ("owner", "expires_in")
    __slots__ = __match_args__
    owner: str
    expires_in: float

    def __init__(self, owner: str, expires_in: float) -> None:
        object.__setattr__(self, "owner", owner)
        object.__setattr__(self, "expires_in", expires_in)


def new_owner(run_id: str) -> str:
    """A lease owner id for one run: unique, and it says where the run lives (host, process,
    and the process-id namespace, so a container's pid is never mistaken for the host's)."""
    return f"{run_id}@{_HOST}:{os.getpid()}:{_PID_NAMESPACE}"


def owner_is_dead(owner: str) -> bool:
    """Whether `owner` ran in a process of this machine (same host name and pid namespace)
    that no longer exists: its lease can be taken at once instead of waiting for it to
    expire. False whenever that cannot be known for sure."""
    host, _, rest = owner.rpartition("@")[2].partition(":")
    pid_text, _, namespace = rest.partition(":")
    if host != _HOST or namespace != _PID_NAMESPACE or namespace == "?":
        return False
    if not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, but not ours to signal
        return False
    return _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A killed child its parent has not reaped yet still answers `kill(pid, 0)`."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # not Linux: never declare another process dead
        return "?"


_HOST = socket.gethostname()
_PID_NAMESPACE = _pid_namespace()


def check_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
        raise ValueError(f"lease_ttl must be a positive number of seconds, got {ttl!r}")
    return float(ttl)


def busy_error(thread_id: str, holder: str, expires_in: float | None) -> ThreadBusyError:
    """Another run holds the thread; `expires_in` is its lease's remaining life, if known."""
    left = "" if expires_in is None else f" (its lease expires in {max(expires_in, 0.0):.1f}s)"
    return ThreadBusyError(
        f"Thread {thread_id!r} is busy: run {holder} holds it{left}. Nothing was written. "
        "Retry once it is done, or pass config['multitask_strategy'] = 'enqueue' (wait for "
        "it) or 'interrupt' (stop it, then run)",
        context={"thread_id": thread_id, "holder": holder, "expires_in": expires_in},
    )


def waited_error(thread_id: str, holder: str, waited: float | None) -> ThreadBusyError:
    """A run that chose to wait (`enqueue`) for a busy thread, and waited `waited` seconds."""
    return ThreadBusyError(
        f"Thread {thread_id!r} is still busy after waiting {waited}s "
        f"(config['enqueue_timeout']) for run {holder} to finish. Nothing was written; retry "
        "later or wait longer",
        context={"thread_id": thread_id, "holder": holder, "waited": waited},
    )


def lost_error(thread_id: str, owner: str) -> LeaseLostError:
    return LeaseLostError(
        f"Thread {thread_id!r}: run {owner} lost its lease (it expired, and another run took "
        "the thread) before saving; nothing was written. The other run now owns the thread",
        context={"thread_id": thread_id, "owner": owner},
    )


__all__ = [
    "DEFAULT_LEASE_TTL",
    "Lease",
    "LeaseHolder",
    "busy_error",
    "check_ttl",
    "lost_error",
    "new_owner",
    "owner_is_dead",
    "waited_error",
]
