"""Which Python values JSON gives back equal, and why the others do not: the reasons a save
is refused, with the path to the value, in words a user can act on.

pydantic writes many values as JSON that reads back as something else: NaN and infinity become
null, a set or a tuple in a loosely typed slot a list, a datetime a str, a model a dict, a dict
key 1 the key "1". `plain_problem` finds such a value in a loosely typed slot (only JSON's own
types pass); `difference_problem` and `validation_problem` explain why a value read back from
its JSON differs from the one in memory.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError

from tenxgraph.core.state._depth import MAX_DEPTH, PathPart, too_deep
from tenxgraph.core.state.sealed import JSON_DEPTH, FrozenDict, FrozenList, SealedJSON
from tenxgraph.utils.record import Record


class Problem(Record):
    """Why a value cannot be stored: where it is (`path`, outermost first) and what is wrong."""

    __match_args__ = ("path", "reason")
    __slots__ = __match_args__

    def __init__(self, path: list[PathPart] | None = None, reason: str = "") -> None:
        self.path: list[PathPart] = [] if path is None else path
        self.reason = reason

    def inside(self, *parts: PathPart) -> Problem:
        self.path[:0] = parts
        return self


# -- plain JSON: what a loosely typed slot may hold -------------------------------------------

_LEAVES = frozenset({str, int, bool, type(None)})


def plain_problem(value: Any, level: int) -> Problem | None:
    """Why `value`, kept in a loosely typed slot at nesting `level`, would not read back equal
    from JSON; None when it would. Only JSON's own types pass: dicts with str keys, lists,
    str, int, bool, None and finite floats (and str/int subclasses, which compare equal to
    the plain value they read back as)."""
    cls = type(value)
    if cls is SealedJSON and level + JSON_DEPTH <= MAX_DEPTH:
        return None  # checked when it was made
    if cls is dict or cls is FrozenDict or cls is SealedJSON:
        if level > MAX_DEPTH:
            return Problem([], too_deep())
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                return Problem([repr(key)], key_reason(key))
            kind = type(item)
            if kind in _LEAVES or (kind is float and item - item == 0.0):
                continue
            found = plain_problem(item, level + 1)
            if found is not None:
                return found.inside(key)
        return None
    if cls is list or cls is FrozenList:
        if level > MAX_DEPTH:
            return Problem([], too_deep())
        for index, item in enumerate(value):
            kind = type(item)
            if kind in _LEAVES or (kind is float and item - item == 0.0):
                continue
            found = plain_problem(item, level + 1)
            if found is not None:
                return found.inside(index)
        return None
    if cls in _LEAVES:
        return None
    if isinstance(value, float):
        return None if value - value == 0.0 else Problem([], describe(value))
    if isinstance(value, str | int):
        return None  # a subclass (StrEnum, IntEnum...): equal to the plain value read back
    return Problem([], describe(value))


def key_reason(key: object) -> str:
    return (
        f"its dict key {key!r} is a {type(key).__name__}: JSON object keys are strings, so it "
        "would read back as a str; use str keys, or declare the field as dict[<key type>, ...] "
        "so that the keys are rebuilt"
    )


_AS_STR = (datetime, date, time, timedelta, Decimal, UUID, bytes, bytearray, PurePath)


def describe(value: object) -> str:
    """Why one value does not read back equal, and what to do instead."""
    name = type(value).__name__
    if isinstance(value, float):
        return (
            f"{value!r} is not a JSON number: it would be stored as null, which does not read "
            "back; store None, a finite number or a str"
        )
    if isinstance(value, set | frozenset | tuple):
        return (
            f"a {name} is stored as a JSON array and would read back as a list; store a list, or "
            f"declare the field as {name}[...] so that it is rebuilt"
        )
    if isinstance(value, BaseModel):
        return (
            f"a {name} model is stored as a JSON object and would read back as a dict; declare "
            f"the field as {name} so that it is rebuilt, or store its model_dump(mode='json')"
        )
    if isinstance(value, Enum):
        return (
            f"{value!r} is stored as its value {value.value!r} and would read back as that; "
            f"store the value, or declare the field as {name} so that it is rebuilt"
        )
    if isinstance(value, _AS_STR):
        return (
            f"a {name} is stored as a JSON string and would read back as a str; store the str "
            f"yourself, or declare the field as {name} so that it is rebuilt"
        )
    return (
        f"a {name} is not a JSON value and would not read back; store JSON types (dicts with "
        "str keys, lists, str, int, float, bool, None), or declare the field with a type that "
        "pydantic rebuilds"
    )


# -- naming what differs --------------------------------------------------------------------

_MISSING = object()


def validation_problem(exc: ValidationError, original: object) -> Problem:
    """A value that does not even validate when read back: name it by pydantic's location,
    explained by what it is in memory when that can be found."""
    first = exc.errors(include_url=False)[0]
    path: list[PathPart] = [p for p in first["loc"] if isinstance(p, str | int)]
    value = _at(original, path)
    if isinstance(value, float) and value - value != 0.0:
        return Problem(path, describe(value))
    return Problem(path, f"it does not read back: {first['msg']}")


def _at(value: object, path: list[PathPart]) -> object:
    for part in path:
        if isinstance(value, BaseModel):
            value = value.__dict__.get(str(part), _MISSING)
        elif isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, list | tuple) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return _MISSING
    return value


def difference_problem(original: object, back: object) -> Problem:
    """Where `back` (read back from JSON) first differs from `original`, and why."""
    found = _difference(original, back)
    if found is None:  # equal piece by piece, unequal as a whole (private attributes, __eq__)
        return Problem([], _unequal(original, back))
    return found


def _difference(a: object, b: object) -> Problem | None:
    if type(a) is not type(b):
        if same(a, b):  # 1 and 1.0, a StrEnum and its str
            return None
        if isinstance(a, BaseModel) and isinstance(b, BaseModel):  # a subclass of the declared
            mine, declared = type(a).__name__, type(b).__name__
            return Problem(
                [],
                f"a {mine} would read back as the declared {declared} ({b!r:.80}); declare the "
                f"field as {mine}, or as a union of the classes it may hold",
            )
        return Problem([], describe(a) if _is_lossy(a) else _unequal(a, b))
    if isinstance(a, BaseModel):
        assert isinstance(b, BaseModel)
        for name, value in a.__dict__.items():
            found = _difference(value, b.__dict__.get(name, _MISSING))
            if found is not None:
                return found.inside(name)
        extra_a, extra_b = a.__pydantic_extra__ or {}, b.__pydantic_extra__ or {}
        return None if extra_a == extra_b else _difference(extra_a, extra_b)
    if isinstance(a, dict):
        assert isinstance(b, dict)
        for key, value in a.items():
            if key not in b:
                return Problem([repr(key)], key_reason(key))
            found = _difference(value, b[key])
            if found is not None:
                return found.inside(key if isinstance(key, str | int) else repr(key))
        return None if len(a) == len(b) else Problem([], _unequal(a, b))
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        if len(a) != len(b):
            return Problem([], _unequal(a, b))
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _difference(x, y)
            if found is not None:
                return found.inside(index)
        return None
    if isinstance(a, float) and a - a != 0.0:
        return Problem([], describe(a))
    return None if same(a, b) else Problem([], _unequal(a, b))


def _is_lossy(value: object) -> bool:
    return isinstance(value, (float, set, frozenset, tuple, BaseModel, Enum, *_AS_STR))


def _unequal(original: object, back: object) -> str:
    return (
        f"it would read back as {back!r:.80} instead of {original!r:.80}; store JSON types, or "
        "declare the field with a type that pydantic rebuilds"
    )


def same(a: object, b: object) -> bool:
    """`a == b`, False when the comparison itself fails (an array-like __eq__, say)."""
    try:
        return bool(a == b)
    except Exception:
        return False


# -- thread and message ids -------------------------------------------------------------------


def forbidden_character(text: str) -> str | None:
    """Why `text` cannot be a stored id (a control character or an unpaired surrogate), or
    None. Control characters are U+0000-U+001F and U+007F-U+009F; PostgreSQL refuses NUL."""
    for position, char in enumerate(text):
        code = ord(char)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return (
                f"it contains the control character {char!r} at position {position}; ids may "
                "not contain control characters (U+0000-U+001F, U+007F-U+009F)"
            )
        if 0xD800 <= code <= 0xDFFF:
            return (
                f"it contains an unpaired surrogate {char!r} at position {position}, which is "
                "not valid UTF-8"
            )
    return None


__all__ = [
    "Problem",
    "describe",
    "difference_problem",
    "forbidden_character",
    "key_reason",
    "plain_problem",
    "same",
    "validation_problem",
]
