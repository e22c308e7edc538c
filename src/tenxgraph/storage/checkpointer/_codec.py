"""A state as stored rows and back: a small JSON *header* (every field but `context`) plus one
JSON row per message.

Writing refuses what would not read back equal (see `_storable`) before anything is written.
Reading parses the header and each message row on its own: a row can only ever be one message
(a hostile row that closes its array cannot reach the header or its neighbours), an unknown
key in a header is an error, and every failure is a `SerializationError` naming the thread
and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, from_json

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import AgentState, ExecutionState, Message
from tenxgraph.core.state._depth import MAX_DEPTH
from tenxgraph.storage.checkpointer._storable import (
    OWN_FIELDS,
    SHALLOW_JSON,
    Problem,
    format_path,
    header_problem,
    own_fields,
    unwritable_problem,
)

S = TypeVar("S", bound=AgentState)

# -- writing ----------------------------------------------------------------------------------

# field names left out of a header (sets, as pydantic takes them; never changed)
_THREAD_ID = {"thread_id"}
_RUNTIME = {"context", "execution_meta"}
_NO_SUMMARY = {"context", "execution_meta", "context_summary"}
_HISTORY = frozenset({"context"})


def encode_header(state: AgentState, thread_id: str | None = None) -> str:
    """The state without its messages, as JSON; `SerializationError` (naming the field) when
    it would not read back equal. A header is written at every step, so it is kept small:
    `execution_meta` leaves out fields at their defaults and the thread id when it is the
    row's own (the runtime owns that class), and an empty `context_summary` is left out.
    `decode_state` puts them back."""
    names = OWN_FIELDS.get(type(state))
    if names is None:
        names = own_fields(type(state))
    try:
        header = _header_text(state, thread_id, names)
    except PydanticSerializationError as exc:
        raise refused(thread_id, state, unwritable_problem(state, exc, _HISTORY)) from exc
    meta = state.execution_meta.__dict__
    if (
        names
        or state.__pydantic_extra__
        or meta["internal_data"]
        or meta["interrupt_data"]
        or len(header) > SHALLOW_JSON
    ):  # else a plain state with nothing loosely typed in it: nothing to check
        problem = header_problem(state, header, names)
        if problem is not None:
            raise refused(thread_id, state, problem)
    return header


def _header_text(state: AgentState, thread_id: str | None, names: tuple[str, ...]) -> str:
    meta_state = state.execution_meta
    serializer = meta_state.__pydantic_serializer__
    if thread_id is not None and meta_state.thread_id == thread_id:
        meta = serializer.to_json(meta_state, exclude_defaults=True, exclude=_THREAD_ID).decode()
    else:
        meta = serializer.to_json(meta_state, exclude_defaults=True).decode()
        if meta_state.thread_id is None:  # say so: an absent id means "the row's"
            meta = meta[:-1] + ("," if meta != "{}" else "") + '"thread_id":null}'
    if state.context_summary is None:
        if not (names or state.__pydantic_extra__):
            # the plain AgentState: nothing else to write
            return '{"execution_meta":' + meta + "}"
        skip = _NO_SUMMARY
    else:
        skip = _RUNTIME
    rest = state.model_dump_json(exclude=skip)
    if rest == "{}":
        return '{"execution_meta":' + meta + "}"
    return rest[:-1] + ',"execution_meta":' + meta + "}"


def stored_text(thread_id: str, field: str, raw: object) -> str:
    """A stored JSON column as text; anything else (NULL, a number, bad UTF-8) is corrupt."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes | bytearray | memoryview):
        try:
            return bytes(raw).decode()
        except UnicodeDecodeError:
            pass
    raise SerializationError(
        f"Thread {thread_id!r}: stored {field} is not JSON text",
        context={"thread_id": thread_id, "field": field},
    )


#: a message's fields a row leaves out when they hold their default (read back as it)
_DEFAULT_NONE = ("tools_calls", "reasoning", "usages", "raw", "parsed_content")


def encode_message(message: Message) -> str:
    """One message row: its JSON without the top-level fields that hold their default (no
    delta flag, no metadata, None), which reading it back fills in again: about 110 bytes
    less a row. (What it holds was checked by the save: `check_messages`.)"""
    fields = message.__dict__
    omitted = {name for name in _DEFAULT_NONE if fields.get(name, 0) is None}
    if fields.get("delta") is False:
        omitted.add("delta")
    if fields.get("metadata") == {}:
        omitted.add("metadata")
    try:
        return message.model_dump_json(exclude=omitted)
    except PydanticSerializationError as exc:
        problem = unwritable_problem(message, exc, frozenset())
        raise SerializationError(
            f"Cannot store message {message.message_id!r}: "
            f"{_where(problem)}{problem.reason}. Nothing was written.",
            context={"message_id": message.message_id, "field": format_path(problem.path)},
        ) from exc


def refused(thread_id: str | None, state: AgentState, problem: Problem) -> SerializationError:
    """The error of a save refused because of `problem` in the state's header."""
    field = format_path(problem.path) or None
    return SerializationError(
        f"Thread {thread_id!r}: cannot store {type(state).__name__}: "
        f"{_where(problem)}{problem.reason}. Nothing was written.",
        context={"thread_id": thread_id, "field": field},
    )


def _where(problem: Problem) -> str:
    return f"field {format_path(problem.path)!r}: " if problem.path else ""


# -- reading ----------------------------------------------------------------------------------


def decode_state(
    state_type: type[S],
    thread_id: str,
    header: str | bytes,
    messages: Sequence[str | bytes],
    offset: int = 0,
) -> S:
    """Rebuild a state from a stored header and message log, validating every field.

    Only JSON of the bound state class is accepted; anything that does not validate raises
    `SerializationError` naming the thread and the field.
    """
    header_text = _text(thread_id, header)
    parsed = _parse_header(state_type, thread_id, header_text)
    try:
        state = state_type.model_validate_json(header_text)
    except ValidationError as exc:
        raise _unfit(state_type, thread_id, exc, "") from exc
    meta = parsed.get("execution_meta")
    if isinstance(meta, dict) and "thread_id" not in meta:
        state.execution_meta.thread_id = thread_id
    state.__dict__["context"] = decode_messages(state_type, thread_id, messages, offset)
    state.__pydantic_fields_set__.add("context")
    return state


def _text(thread_id: str, raw: str | bytes) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return bytes(raw).decode()
    except UnicodeDecodeError as exc:
        raise SerializationError(
            f"Thread {thread_id!r}: the stored state header is not UTF-8 text",
            context={"thread_id": thread_id, "field": None},
        ) from exc


_META_KEYS = frozenset(ExecutionState.model_fields)
_TOO_DEEP_TO_READ = (
    f"it nests deeper than the JSON reader allows, about 200 levels; tenxgraph itself writes "
    f"at most {MAX_DEPTH}"
)


def _parse_header(state_type: type[AgentState], thread_id: str, text: str) -> dict[str, Any]:
    """The header as a dict, after checking that its keys are fields of `state_type` (and of
    `execution_meta`): an unknown key is corrupt data, never silently dropped."""
    try:
        parsed = from_json(text)
    except ValueError as exc:
        limit = f" ({_TOO_DEEP_TO_READ})" if "recursion" in str(exc) else ""
        raise SerializationError(
            f"Thread {thread_id!r}: the stored state header is not valid JSON{limit}: {exc}",
            context={"thread_id": thread_id, "field": None},
        ) from exc
    if not isinstance(parsed, dict):
        raise SerializationError(
            f"Thread {thread_id!r}: the stored state header is not a JSON object",
            context={"thread_id": thread_id, "field": None},
        )
    fields = state_type.model_fields
    allow_extra = state_type.model_config.get("extra") == "allow"
    for key in parsed:
        if key == "context" or (key not in fields and not allow_extra):
            _unknown_key(state_type, thread_id, key)
    meta = parsed.get("execution_meta")
    if isinstance(meta, dict) and not _META_KEYS.issuperset(meta):
        key = next(k for k in meta if k not in _META_KEYS)
        _unknown_key(state_type, thread_id, f"execution_meta.{key}")
    return parsed


def _unknown_key(state_type: type[AgentState], thread_id: str, key: str) -> None:
    where = (
        "the messages are stored as rows of their own, never in the header"
        if key == "context"
        else f"{state_type.__name__} has no such field"
    )
    raise SerializationError(
        f"Thread {thread_id!r}: the stored state header has the key {key!r}, and {where}: the "
        "row is corrupt, or was written for another state class (load it with that class)",
        context={"thread_id": thread_id, "field": key},
    )


RowValidator = Callable[[str | bytes], Any]
_ROW_VALIDATORS: dict[type[AgentState], RowValidator] = {}


def _row_validator(state_type: type[AgentState]) -> RowValidator:
    """Validates one message row: `Message` (or the item type a state class declares for
    `context`)."""
    found = _ROW_VALIDATORS.get(state_type)
    if found is None:
        annotation = state_type.model_fields["context"].annotation
        args = get_args(annotation) if get_origin(annotation) is list else ()
        item = args[0] if len(args) == 1 else Message
        if item is Message:
            found = Message.__pydantic_validator__.validate_json
        else:
            found = TypeAdapter(item).validate_json
        _ROW_VALIDATORS[state_type] = found
    return found


def decode_messages(
    state_type: type[AgentState], thread_id: str, rows: Sequence[str | bytes], offset: int = 0
) -> list[Message]:
    """Each row parsed on its own: one row, one message (`offset`: the first row's position
    in the log, for errors)."""
    validate = _row_validator(state_type)
    try:
        return [validate(row) for row in rows]
    except ValidationError:
        for index, row in enumerate(rows):
            try:
                validate(row)
            except ValidationError as exc:
                raise _unfit(state_type, thread_id, exc, f"context.{offset + index}") from exc
        raise


def _unfit(
    state_type: type[AgentState], thread_id: str, exc: ValidationError, prefix: str
) -> SerializationError:
    first = exc.errors(include_url=False)[0]
    field = ".".join(p for p in (prefix, format_path(first["loc"])) if p) or None
    message = first["msg"]
    if "recursion limit" in message:
        message += f" ({_TOO_DEEP_TO_READ})"
    what = f"stored message {prefix.rpartition('.')[2]}" if prefix else "stored data"
    return SerializationError(
        f"Thread {thread_id!r}: {what} does not fit {state_type.__name__}: "
        f"field {field!r}: {message}",
        context={"thread_id": thread_id, "field": field},
    )


__all__ = ["decode_messages", "decode_state", "encode_header", "encode_message", "refused"]
