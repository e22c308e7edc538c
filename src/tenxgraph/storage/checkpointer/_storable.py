"""What a checkpoint may hold: values that read back equal. Anything else is refused before a
write, with its field's path, so a thread never holds data it cannot load.

Stored data is JSON, and pydantic writes many Python values as JSON that reads back as something
else: NaN and infinity become null (a float field then refuses it, and every later load fails),
a set or a tuple in a loosely typed field (`Any`, `dict[str, Any]`, message metadata...) becomes
a list, a datetime a str, a model a dict, a dict key 1 the key "1"; and a value nested deeper
than the JSON reader allows cannot be read at all.

The checks cost O(what is written), never O(history): a header's own fields are read back and
compared (a header is small, and written anyway); a message's loosely typed slots are walked and
its float fields checked, nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ValidationError

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state._depth import MAX_DEPTH, PathPart, deep_path, format_path, too_deep
from tenxgraph.core.state.message_block import (
    ErrorBlock,
    ImageBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)


@dataclass(slots=True)
class Problem:
    """Why a value cannot be stored: where it is (`path`, outermost first) and what is wrong."""

    path: list[PathPart] = field(default_factory=list)
    reason: str = ""

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
    if cls is dict:
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
    if cls is list:
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


# -- messages -----------------------------------------------------------------------------

# Message's loosely typed slots (all at level 2: the message is level 1) and, per block class,
# the one loosely typed field it has (at level 4: message, content, block). Every other field
# of a message is typed, at most 5 levels deep, and read back by its type, except floats:
# `timestamp` and `ImageBlock.bbox` are checked for NaN and infinity.
_MESSAGE_LOOSE = ("metadata", "raw", "tools_calls")
_BLOCK_LOOSE: dict[type[BaseModel], str] = {
    ToolCallBlock: "args",
    RemoteToolCallBlock: "args",
    ToolResultBlock: "output",
    ErrorBlock: "data",
}
MESSAGE_FIELDS = frozenset(
    {
        "message_id",
        "role",
        "content",
        "delta",
        "tools_calls",
        "reasoning",
        "timestamp",
        "metadata",
        "usages",
        "raw",
        "parsed_content",
    }
)
assert set(Message.model_fields) == MESSAGE_FIELDS, "Message changed: update message_problem"


def message_problem(message: Message) -> Problem | None:
    """Why `message` would not read back equal from its stored JSON; None when it would.

    `parsed_content` holding a model is the one documented exception: it is stored as its
    JSON object and reads back as a dict (model classes are never imported from stored data);
    it must itself read back equal as its own class. A plain text message (the usual one) is
    cleared by the few lookups before the first `return`."""
    fields = message.__dict__
    message_id = fields["message_id"]
    if type(message_id) is str and not message_id.isprintable():
        bad = forbidden_character(message_id)
        if bad is not None:
            return Problem(["message_id"], bad)
    stamp = fields["timestamp"]
    if type(stamp) is float and stamp - stamp != 0.0:
        return Problem(["timestamp"], describe(stamp))
    if fields["metadata"] or fields["raw"] or fields["tools_calls"]:
        found = _loose_problem(fields)
        if found is not None:
            return found
    if fields["parsed_content"] is not None:
        parsed = fields["parsed_content"]
        found = model_problem(parsed) if isinstance(parsed, BaseModel) else plain_problem(parsed, 2)
        if found is not None:
            return found.inside("parsed_content")
    for block in fields["content"]:
        if type(block) is not TextBlock:
            return _blocks_problem(fields["content"])
    return None


def _loose_problem(fields: dict[str, Any]) -> Problem | None:
    for name in _MESSAGE_LOOSE:
        value = fields[name]
        if value:
            found = plain_problem(value, 2)
            if found is not None:
                return found.inside(name)
    return None


def _blocks_problem(blocks: list[Any]) -> Problem | None:
    for index, block in enumerate(blocks):
        cls = type(block)
        slot = _BLOCK_LOOSE.get(cls)
        if slot is not None:
            value = block.__dict__[slot]
            found = None if value is None else plain_problem(value, 4)
            if found is not None:
                return found.inside("content", index, slot)
        elif cls is ImageBlock and block.bbox:
            for position, number in enumerate(block.bbox):
                if isinstance(number, float) and number - number != 0.0:
                    return Problem(["content", index, "bbox", position], describe(number))
    return None


def model_problem(model: BaseModel) -> Problem | None:
    """Why a model would not read back equal as its own class from its JSON; None when it
    would."""
    try:
        back = type(model).model_validate_json(model.model_dump_json())
    except ValidationError as exc:
        return validation_problem(exc, model)
    except ValueError as exc:  # serialisation failed: too deep, or an unknown type
        return Problem([], f"it cannot be written as JSON ({exc})")
    if _same(back, model):
        return None
    return difference_problem(model, back)


# -- headers: a state's own fields, read back and compared --------------------------------------

_RUNTIME_FIELDS = frozenset({"context", "context_summary", "execution_meta"})
_META_LOOSE = ("interrupt_data", "internal_data")  # execution_meta's loosely typed slots
_SHALLOW = 2 * MAX_DEPTH + 1  # JSON this short cannot nest deeper than the limit
_OWN: dict[type[AgentState], tuple[str, ...]] = {}


def own_fields(state_type: type[AgentState]) -> tuple[str, ...]:
    """The fields a state class adds to `AgentState`'s, in declaration order."""
    found = _OWN.get(state_type)
    if found is None:
        found = _OWN[state_type] = tuple(
            name for name in state_type.model_fields if name not in _RUNTIME_FIELDS
        )
    return found


def header_problem(state: AgentState, header: str, names: tuple[str, ...]) -> Problem | None:
    """Why the stored `header` of `state` would not read back to an equal state; None when it
    would. The runtime's loosely typed slots are walked; the state's own fields (`names`, see
    `own_fields`) and extra fields are read back from `header` and compared with the ones in
    memory. A plain `AgentState` costs a dict lookup or two."""
    meta = state.execution_meta.__dict__
    for name in _META_LOOSE:
        value = meta[name]
        if value:
            found = plain_problem(value, 3)
            if found is not None:
                return found.inside("execution_meta", name)
    if len(header) > _SHALLOW and json_deeper_than(header, MAX_DEPTH):
        return depth_problem(state)
    extra = state.__pydantic_extra__
    if not names and not extra:
        return None
    try:
        back = type(state).model_validate_json(header)
    except ValidationError as exc:
        return validation_problem(exc, state)
    fields, back_fields = state.__dict__, back.__dict__
    for name in names:
        if not _same(fields[name], back_fields[name]):
            return difference_problem(fields[name], back_fields[name]).inside(name)
    if extra and not _same(extra, back.__pydantic_extra__):
        return difference_problem(extra, back.__pydantic_extra__ or {})
    return None


def _same(a: object, b: object) -> bool:
    """`a == b`, False when the comparison itself fails (an array-like __eq__, say)."""
    try:
        return bool(a == b)
    except Exception:
        return False


def depth_problem(model: BaseModel, skip: frozenset[str] = frozenset({"context"})) -> Problem:
    """The path to the first container of `model` (a stored document: level 1) nested deeper
    than `MAX_DEPTH`; fields in `skip` are not looked at (a state's history is not in its
    header)."""
    fields = model.__dict__ | (model.__pydantic_extra__ or {})
    for name, value in fields.items():
        found = None if name in skip else deep_path(value, 2)
        if found is not None:
            return Problem([name, *found], too_deep())
    return Problem([], too_deep())


def unwritable_problem(model: BaseModel, exc: Exception, skip: frozenset[str]) -> Problem:
    """What made pydantic fail to write `model` as JSON (too deep, an unknown type, a str that
    is not valid UTF-8): the field, found by writing the fields one at a time."""
    if "depth" in str(exc):
        return depth_problem(model, skip)
    serializer = type(model).__pydantic_serializer__
    for name in model.__dict__:
        if name in skip:
            continue
        try:
            serializer.to_json(model, include={name})
        except ValueError as failed:
            inner = plain_problem(model.__dict__[name], 2)
            if inner is not None:
                return inner.inside(name)
            return Problem([name], f"it cannot be written as JSON ({failed})")
    return Problem([], f"it cannot be written as JSON ({exc})")


# JSON strings (their brackets do not count), everything but brackets, and innermost pairs
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")


def json_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON `text` nests deeper than `limit` levels. Nearly free for a text with few
    brackets; otherwise each pass strips one level of innermost pairs."""
    if len(text) <= 2 * limit + 1 or text.count("{") + text.count("[") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    for _ in range(limit):
        brackets = _INNERMOST.sub("", brackets)
        if not brackets:
            return False
    return True


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
        if _same(a, b):  # 1 and 1.0, a StrEnum and its str
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
    return None if _same(a, b) else Problem([], _unequal(a, b))


def _is_lossy(value: object) -> bool:
    return isinstance(value, (float, set, frozenset, tuple, BaseModel, Enum, *_AS_STR))


def _unequal(original: object, back: object) -> str:
    return (
        f"it would read back as {back!r:.80} instead of {original!r:.80}; store JSON types, or "
        "declare the field with a type that pydantic rebuilds"
    )


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
    "MAX_DEPTH",
    "Problem",
    "describe",
    "forbidden_character",
    "format_path",
    "header_problem",
    "json_deeper_than",
    "message_problem",
    "plain_problem",
    "unwritable_problem",
]
