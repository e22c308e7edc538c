"""What a checkpoint may hold: values that read back equal. Anything else is refused before a
write, with its field's path, so a thread never holds data it cannot load.

Stored data is JSON, and pydantic writes many Python values as JSON that reads back as something
else (NaN becomes null, and a float field then refuses it: every later load fails; a set in a
loosely typed field becomes a list...; see `_json_values`), and a value nested deeper than the
JSON reader allows cannot be read at all.

The checks cost O(what is written), never O(history): a header's own fields are read back and
compared (a header is small, and written anyway); a message's loosely typed slots are walked and
its float fields checked, nothing else.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state._depth import MAX_DEPTH, deep_path, format_path, too_deep
from tenxgraph.core.state.message_block import (
    ErrorBlock,
    ImageBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from tenxgraph.core.state.sealed import FrozenDict, FrozenList
from tenxgraph.storage.checkpointer._json_values import (
    Problem,
    describe,
    difference_problem,
    forbidden_character,
    plain_problem,
    same,
    validation_problem,
)

_LISTS = (list, FrozenList)
_DICTS = (dict, FrozenDict)

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
_MESSAGE_FIELDS = frozenset(
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
assert set(Message.model_fields) == _MESSAGE_FIELDS, "Message changed: update message_problem"


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
    if same(back, model):
        return None
    return difference_problem(model, back)


# -- headers: a state's own fields, read back and compared --------------------------------------

_RUNTIME_FIELDS = frozenset({"context", "context_summary", "execution_meta"})
_META_LOOSE = ("interrupt_data", "internal_data")  # execution_meta's loosely typed slots
SHALLOW_JSON = 2 * MAX_DEPTH + 1  # JSON this short cannot nest deeper than the limit
OWN_FIELDS: dict[type[AgentState], tuple[str, ...]] = {}


def own_fields(state_type: type[AgentState]) -> tuple[str, ...]:
    """The fields a state class adds to `AgentState`'s, in declaration order."""
    found = OWN_FIELDS.get(state_type)
    if found is None:
        found = OWN_FIELDS[state_type] = tuple(
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
    if len(header) > SHALLOW_JSON and json_deeper_than(header, MAX_DEPTH):
        return depth_problem(state)
    extra = state.__pydantic_extra__
    if not names and not extra:
        return None
    if not extra:
        checks = exact_checks(type(state), names)
        fields = state.__dict__
        if checks is not None and all(check(fields[name]) for name, check in checks):
            return None  # plain values of their declared plain types: nothing to read back
    try:
        back = type(state).model_validate_json(header)
    except ValidationError as exc:
        return validation_problem(exc, state)
    fields, back_fields = state.__dict__, back.__dict__
    for name in names:
        if not same(fields[name], back_fields[name]):
            return difference_problem(fields[name], back_fields[name]).inside(name)
    if extra and not same(extra, back.__pydantic_extra__):
        return difference_problem(extra, back.__pydantic_extra__ or {})
    return None


# -- the fast path of a header: values that cannot read back different ---------------------------

Check = Callable[[Any], bool]
EXACT_CHECKS: dict[type[AgentState], tuple[tuple[str, Check], ...] | None] = {}


def exact_checks(
    state_type: type[AgentState], names: tuple[str, ...]
) -> tuple[tuple[str, Check], ...] | None:
    """Per own field, a check that its value surely reads back equal (an int in an `int` field,
    a list of str in a `list[str]` one, ...), or None when a field's type has no such check:
    then the header is read back. The checks look at the values, not only the annotations,
    because a reducer's output is not validated."""
    if state_type not in EXACT_CHECKS:
        checks = []
        for name in names:
            check = _exact_check(state_type.model_fields[name].annotation)
            if check is None:
                EXACT_CHECKS[state_type] = None
                break
            checks.append((name, check))
        else:
            EXACT_CHECKS[state_type] = tuple(checks)
    return EXACT_CHECKS[state_type]


def _exact_check(annotation: Any) -> Check | None:
    if annotation in (int, str, bool):
        kind: type = annotation
        return lambda value: type(value) is kind
    if annotation is float:
        return lambda value: type(value) is float and math.isfinite(value)
    if annotation is type(None):
        return lambda value: value is None
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal and all(type(a) in (int, str, bool) for a in args):
        return lambda value: type(value) in (int, str, bool) and value in args
    if origin in (Union, UnionType):
        found = [_exact_check(arg) for arg in args]
        parts = [part for part in found if part is not None]
        if len(parts) != len(found):
            return None
        return lambda value: any(part(value) for part in parts)
    item = _exact_check(args[-1]) if args else None
    if item is None:
        return None
    if origin is list and len(args) == 1:
        return lambda value: type(value) in _LISTS and all(item(x) for x in value)
    if origin is dict and len(args) == 2 and args[0] is str:

        def items_exact(value: Any) -> bool:
            if type(value) not in _DICTS:
                return False
            return all(type(key) is str and item(x) for key, x in value.items())

        return items_exact
    return None


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
    deep = depth_problem(model, skip)
    if deep.path:
        return deep
    serializer = type(model).__pydantic_serializer__
    for name in model.__dict__:
        if name in skip:
            continue
        try:
            serializer.to_json(model, include={name})
        except ValueError as failed:
            if "surrogate" in str(failed):  # before the guess below, which would blame types
                return Problem([name], "it holds a lone surrogate, text that is not Unicode")
            inner = plain_problem(model.__dict__[name], 2)
            if inner is not None:
                return inner.inside(name)
            return Problem([name], f"it cannot be written as JSON ({failed})")
    return Problem([], f"it cannot be written as JSON ({exc})")


@functools.cache
def _bracket_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """JSON strings (their brackets do not count), everything but brackets, and innermost
    pairs; compiled on first use, not at import."""
    return (
        re.compile(r'"(?:[^"\\]|\\.)*"'),
        re.compile(r"[^\[\]{}]+"),
        re.compile(r"\[\]|\{\}"),
    )


def json_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON `text` nests deeper than `limit` levels. Nearly free for a text with few
    brackets; otherwise each pass strips one level of innermost pairs."""
    if len(text) <= 2 * limit + 1 or text.count("{") + text.count("[") <= limit:
        return False
    strings, not_brackets, innermost = _bracket_patterns()
    brackets = not_brackets.sub("", strings.sub("", text))
    for _ in range(limit):
        brackets = innermost.sub("", brackets)
        if not brackets:
            return False
    return True


__all__ = [
    "MAX_DEPTH",
    "Problem",
    "forbidden_character",
    "format_path",
    "header_problem",
    "json_deeper_than",
    "message_problem",
    "own_fields",
    "unwritable_problem",
]
