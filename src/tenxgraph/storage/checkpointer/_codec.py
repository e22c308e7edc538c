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
from pydantic_core import PydanticSerializationError, from_json, to_json

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import AgentState, ExecutionState, Message, TextBlock
from tenxgraph.core.state._depth import MAX_DEPTH
from tenxgraph.core.state.sealed import SealedJSON
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


def encode_header(state: AgentState, thread_id: str | None = None, *, listed: bool = False) -> str:
    """The state without its messages, as JSON; `SerializationError` (naming the field) when
    it would not read back equal. A header is written at every step, so it is kept small:
    `execution_meta` leaves out fields at their defaults and the thread id when it is the
    row's own (the runtime owns that class), and an empty `context_summary` is left out.
    `decode_state` puts them back.

    `listed`: the store keeps the step, status and current node in columns of their own
    (`checkpoint_fields`), so the header leaves them out too, with `execution_meta` first,
    and is "" when nothing else is left; `expand_header` puts them back."""
    names = OWN_FIELDS.get(type(state))
    if names is None:
        names = own_fields(type(state))
    try:
        header = _header_text(state, thread_id, names, listed)
    except PydanticSerializationError as exc:
        raise refused(thread_id, state, unwritable_problem(state, exc, _HISTORY)) from exc
    full = header
    if listed:
        meta_state = state.execution_meta
        status = meta_state.status.value
        full = expand_header(header, meta_state.step, status, meta_state.current_node)
    meta = state.execution_meta.__dict__
    if (
        names
        or state.__pydantic_extra__
        or meta["internal_data"]
        or meta["interrupt_data"]
        or len(header) > SHALLOW_JSON
    ):  # else a plain state with nothing loosely typed in it: nothing to check
        problem = header_problem(state, full, names)
        if problem is not None:
            raise refused(thread_id, state, problem)
    return header


def _header_text(
    state: AgentState, thread_id: str | None, names: tuple[str, ...], listed: bool
) -> str:
    meta_state = state.execution_meta
    serializer = meta_state.__pydantic_serializer__
    left_out = _LISTED if listed else set()
    if thread_id is not None and meta_state.thread_id == thread_id:
        meta = serializer.to_json(
            meta_state, exclude_defaults=True, exclude=left_out | _THREAD_ID
        ).decode()
    else:
        meta = serializer.to_json(meta_state, exclude_defaults=True, exclude=left_out).decode()
        if meta_state.thread_id is None:  # say so: an absent id means "the row's"
            meta = meta[:-1] + ("," if meta != "{}" else "") + '"thread_id":null}'
    rest = "{}"
    if state.context_summary is not None:
        rest = state.model_dump_json(exclude=_RUNTIME)
    elif names or state.__pydantic_extra__:
        rest = state.model_dump_json(exclude=_NO_SUMMARY)
    # (else the plain AgentState: nothing but execution_meta to write)
    if rest == "{}":
        return "" if listed and meta == "{}" else '{"execution_meta":' + meta + "}"
    if listed:  # execution_meta first, where `expand_header` finds it
        return '{"execution_meta":' + meta + "," + rest[1:]
    return rest[:-1] + ',"execution_meta":' + meta + "}"


_LISTED = {"step", "status", "current_node"}  # the fields of `checkpoint_fields`
_META_FIRST = '{"execution_meta":{'
# the start of every header written without `listed` that begins with execution_meta: its
# only key then, and `current_node` (required, the class's first field) comes first
_FULL_META_FIRST = _META_FIRST + '"current_node":'


Listed = tuple[object, object, object]  # a checkpoint row's step, status and node


def expand_header(stored: str, step: object, status: object, node: object) -> str:
    """A header as `encode_header(..., listed=True)` writes it, with the step, status and
    current node of its checkpoint row put back into `execution_meta`; any other header
    that starts with execution_meta (written without `listed`: they are in it) as it is."""
    if (stored and not stored.startswith(_META_FIRST)) or stored.startswith(_FULL_META_FIRST):
        return stored
    fields = (
        f'"current_node":{to_json(node).decode()},"step":{to_json(step).decode()},'
        f'"status":{to_json(status).decode()}'
    )
    if not stored:
        return _META_FIRST + fields + "}}"
    rest = stored[len(_META_FIRST) :]
    return _META_FIRST + fields + ("" if rest.startswith("}") else ",") + rest


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


def encode_message(message: Message, *, id_column: bool = False) -> str:
    """One message row: its JSON without the top-level fields that hold their default (no
    delta flag, no metadata, None), which reading it back fills in again: about 110 bytes
    less a row; and text blocks' empty `annotations`. (What it holds was checked by the save:
    `check_messages`.)

    `id_column`: the store keeps the message's id (`str(message_id)`) in a column of its own,
    so a text id that JSON writes as it is (no character to escape) is left out of the row
    too, and the store's queries put it back in front (`_sql.body_with_id`)."""
    fields = message.__dict__
    omitted = {name for name in _DEFAULT_NONE if fields.get(name, 0) is None}
    if fields.get("delta") is False:
        omitted.add("delta")
    if fields.get("metadata") == {}:
        omitted.add("metadata")
    if id_column and plain_id(fields.get("message_id")):
        omitted.add("message_id")
    raw = fields.get("raw")
    # a model's raw response: its JSON was written when it came
    written = raw.text if type(raw) is SealedJSON else None
    if written is not None:
        omitted.add("raw")
    try:
        text = message.__pydantic_serializer__.to_json(message, exclude=omitted).decode()
        text = _without_bare_annotations(message, text, omitted)
        return text if written is None else text[:-1] + ',"raw":' + written + "}"
    except PydanticSerializationError as exc:
        problem = unwritable_problem(message, exc, frozenset())
        raise SerializationError(
            f"Cannot store message {message.message_id!r}: "
            f"{_where(problem)}{problem.reason}. Nothing was written.",
            context={"message_id": message.message_id, "field": format_path(problem.path)},
        ) from exc


_BARE = ',"annotations":[]}'  # how a text block without annotations ends
_BARE_CUT = len(_BARE) - 1  # what cutting it out of a row saves


def _without_bare_annotations(message: Message, text: str, omitted: set[str]) -> str:
    """A message's row `text` without the empty `annotations` of its text blocks (17 bytes
    each; read back, they are the empty list again). Cut from the text when it is found
    exactly once per bare block that ends with it (no `cache_control` after it): then every
    place it is found is such a block's end (in JSON text a quote is escaped, so a string
    cannot hold it); else dumped again with those blocks' field left out."""
    bare, ends = [], 0
    for i, block in enumerate(message.content):
        if type(block) is TextBlock and not block.annotations:
            bare.append(i)
            ends += block.cache_control is None
    if not bare:
        return text
    if ends == len(bare):
        cut = text.replace(_BARE, "}")
        if len(text) - len(cut) == ends * _BARE_CUT:  # found once per bare block
            return cut
    exclude: dict[str, Any] = dict.fromkeys(omitted, True)
    exclude["content"] = {key: {"annotations"} for key in bare}
    return message.model_dump_json(exclude=exclude)


#: how every row that holds its message's id begins (`message_id` is the class's first field)
ROW_ID_PREFIX = '{"message_id":'


def plain_id(message_id: object) -> bool:
    """Whether `message_id` is text that JSON writes between quotes as it is: then a row
    written without it gets it back as `'{"message_id":"' + id + '",' + row[1:]`."""
    if type(message_id) is not str:
        return False
    return to_json(message_id).decode() == f'"{message_id}"'


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
    listed: Listed | None = None,
) -> S:
    """Rebuild a state from a stored header and message log, validating every field.

    Only JSON of the bound state class is accepted; anything that does not validate raises
    `SerializationError` naming the thread and the field. `listed`: the step, status and
    node of the header's checkpoint row, for a header written without them
    (`encode_header(..., listed=True)`; one that has them is read as it is).
    """
    header_text = _text(thread_id, header)
    if listed is not None and not header_text:
        header_text = expand_header(header_text, *listed)
    parsed = _parse_header(state_type, thread_id, header_text)
    if listed is not None:
        header_text = _with_listed(header_text, parsed, listed)
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


def _with_listed(text: str, parsed: dict[str, Any], listed: Listed) -> str:
    """The header `text` (`parsed`) with its checkpoint row's step, status and node when its
    `execution_meta` was written without them (it has no `current_node`, a required field):
    put in as text when the header is as `encode_header` writes it, else (a header written
    by other means, with other spacing) by writing the parsed header again."""
    meta = parsed.get("execution_meta")
    if not isinstance(meta, dict) or "current_node" in meta:
        return text
    if text.startswith(_META_FIRST):
        return expand_header(text, *listed)
    step, status, node = listed
    meta.update(current_node=node, step=step, status=status)
    try:
        return to_json(parsed).decode()
    except (PydanticSerializationError, ValueError):  # a number JSON cannot write again
        return text  # (read as it is: without current_node it does not validate)


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


__all__ = [
    "ROW_ID_PREFIX",
    "Listed",
    "decode_messages",
    "decode_state",
    "encode_header",
    "encode_message",
    "expand_header",
    "plain_id",
    "refused",
]
