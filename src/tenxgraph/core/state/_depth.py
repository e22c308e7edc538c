"""How deep stored data may nest, and where a value nests deeper.

JSON readers stop at a fixed depth (pydantic's at about 200 levels) and Python's own recursion
at about 1,000, so a value nested without bound can neither be stored nor copied. The limit is
counted in lists, dicts, tuples, sets and models, from the message or the state a value belongs
to (level 1).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

#: How deep one stored document (a message, or a state's header) may nest.
MAX_DEPTH = 100

PathPart = str | int


def deep_path(value: object, level: int = 1) -> list[PathPart] | None:
    """Where `value`, at nesting `level`, first holds a container deeper than `MAX_DEPTH`
    (keys and indexes, outermost first), or None. Recursion stops at the limit, so this is
    safe on values nested far deeper."""
    items: Iterable[tuple[Any, object]]
    if isinstance(value, BaseModel):
        items = (value.__dict__ | (value.__pydantic_extra__ or {})).items()
    elif isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        return None
    if level > MAX_DEPTH:
        return []
    for key, item in items:
        found = deep_path(item, level + 1)
        if found is not None:
            return [key if isinstance(key, str | int) else repr(key), *found]
    return None


def format_path(path: Iterable[object]) -> str:
    """`a.b.0.c`, shortened in the middle when very long (a 5,000-level path, say)."""
    parts = [str(p) for p in path]
    if len(parts) > 12:
        parts = [*parts[:6], f"<{len(parts) - 10} more>", *parts[-4:]]
    return ".".join(parts)


def too_deep() -> str:
    """Why a value nested deeper than `MAX_DEPTH` is refused, and what to do."""
    return (
        f"it nests deeper than {MAX_DEPTH} levels, the limit for stored data (lists, dicts and "
        "models, counted from the message or the state they belong to); flatten it, or store "
        "it as a JSON str"
    )


__all__ = ["MAX_DEPTH", "deep_path", "format_path", "too_deep"]
