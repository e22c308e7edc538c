"""A thread's version as its store gives it, and whether what was kept of it is still current
(apart from the stores' base, so that a run can check it without importing them)."""

from __future__ import annotations


class Version(int):
    """A thread's version number as a store that tells threads apart gives it (`aversion`,
    `asave`, a snapshot's `version`): an int in every respect, which also names the thread
    it is a version of. A thread deleted and made again under the same id counts its
    versions from 1 again; `incarnation` (a key no other thread of the store ever had) tells
    the two apart, so that what was kept of the old one is not taken for the new one."""

    incarnation: int | None

    def __new__(cls, version: int, incarnation: int | None = None) -> Version:
        made = super().__new__(cls, version)
        made.incarnation = incarnation
        return made


def same_version(kept: int | None, head: int | None) -> bool:
    """Whether the thread is still at version `kept`, now that its store says `head`: the
    same number, and the same thread where both name theirs (`Version.incarnation`)."""
    if kept != head:
        return False
    then, now = getattr(kept, "incarnation", None), getattr(head, "incarnation", None)
    return then is None or now is None or then == now


__all__ = ["Version", "same_version"]
