"""How node outputs and in-place changes become one consistent state: diffing a node's view of
the state, merging through reducers, validating assigned fields, copying what is handed out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from tenxgraph.core.exceptions import NodeError
from tenxgraph.core.graph.node import FieldUpdates, NodeOutput
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state._construct import assemble, copied
from tenxgraph.core.state.message import copy_plain_text
from tenxgraph.core.state.reducers import seal_history

if TYPE_CHECKING:
    from tenxgraph.core.graph.program import Program


RUNTIME_FIELDS = frozenset({"context", "execution_meta"})


def context_changes(source: AgentState, before: list[Message], before_len: int) -> list[Message]:
    """Messages in `source.context` that were not in `before[:before_len]`."""
    current = source.context
    if current is before:
        return list(current[before_len:])
    ids = {m.message_id for m in before[:before_len]}
    return [m for m in current if m.message_id not in ids]


def view_changes(
    view: AgentState,
    view_context: list[Message],
    pre: dict[str, Any],
    pre_len: int,
    changes: dict[str, Any],
) -> list[Message]:
    """Collect what a node changed in place on its view into `changes` (assigned fields) and
    the returned list (new messages), then undo those changes on the view."""
    fields = view.__dict__
    extra = context_changes(view, view_context, pre_len)
    if fields["context"] is view_context:
        if len(view_context) > pre_len:  # only then: a deletion drops the history's id index
            del view_context[pre_len:]
    else:
        fields["context"] = view_context
    for key, value in fields.items():
        if key not in RUNTIME_FIELDS and value is not pre[key]:
            changes[key] = value
    for key in changes:
        fields[key] = pre[key]
    return extra


def view_of(state: AgentState) -> tuple[AgentState, list[Message]]:
    """A shallow copy of `state` with its own `context` list, for one of several parallel
    nodes, so each node's in-place changes can be told apart."""
    fields = dict(state.__dict__)
    context = fields["context"] = state.context.copy()
    view = assemble(type(state), fields, set(state.model_fields_set))
    return view, context


def restore(state: AgentState, pre: dict[str, Any], pre_len: int) -> None:
    """Undo a failed step's in-place rebinding of fields and appends to `context`."""
    state.__dict__.update(pre)
    if len(pre["context"]) > pre_len:
        del pre["context"][pre_len:]


def snapshot(state: AgentState) -> AgentState:
    """The state as it is now, for a STATE event: later steps do not change it (they rebind
    fields rather than mutate them; `context` and `execution_meta` are copied)."""
    copy = state.model_copy()
    copy.__dict__["context"] = state.context.copy()
    copy.__dict__["execution_meta"] = state.execution_meta.model_copy(deep=True)
    return copy


def handed_out(state: AgentState) -> AgentState:
    """The kept `state` as a caller may have it: its messages sealed and shared (a list copy),
    its other fields copied, so that nothing done to it changes the kept thread."""
    seal_history(state.context)
    handed = state.model_copy()  # shallow: its own __dict__, private and extra values
    fields = handed.__dict__
    for key, value in fields.items():
        if key != "context":
            fields[key] = copied(value)
    fields["context"] = state.context.copy()
    return handed


def set_fields(model: BaseModel, **values: Any) -> None:
    """Set fields the runtime owns to values known to be valid, without pydantic's
    `__setattr__` (a few microseconds each, several times per run)."""
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values)


def copy_message(message: Message) -> Message:
    """A copy sharing nothing mutable with `message`: plain text messages by the fast path for
    them, others field by field (about half the cost of pydantic's dump and validate)."""
    plain = copy_plain_text(message)
    if plain is not None:
        return plain
    return copied(message)


def tail(before: list[Message], after: list[Message], append_only: bool) -> list[Message] | None:
    """What `after` appended to `before`, or None if it did more than append.

    `append_only` says `after` came from `add_messages(before, ...)`, which only appends.
    """
    if after is before:
        return []
    n = len(before)
    if not append_only and (
        len(after) < n or any(a is not b for a, b in zip(before, after, strict=False))
    ):
        return None
    return list(after[n:])


def log_entries(
    before: list[Message], after: list[Message], append_only: bool, new_thread: bool
) -> list[Message] | None:
    """What a save appends to the thread's message log: every message for a new thread (its
    initial state may come with some), else what `after` appended to `before`; None when the
    history was rewritten, so the log is replaced by `after`."""
    return list(after) if new_thread else tail(before, after, append_only)


def merge_fields(program: Program, state: AgentState, values: dict[str, Any], who: str) -> None:
    """Merge field updates through their reducers; fields without one are replaced."""
    reducers = program.reducers
    for key, value in values.items():
        reducer = reducers.get(key)
        if reducer is None:
            assign(state, key, value, who)
        else:
            # looked up afresh: pydantic's validate_assignment replaces __dict__
            fields = state.__dict__
            if isinstance(value, FieldUpdates):
                for one in value:
                    fields[key] = reducer(fields[key], one)
            else:
                fields[key] = reducer(fields[key], value)


def apply_update(program: Program, state: AgentState, update: NodeOutput, who: str) -> None:
    """Apply one normalised update (messages, then fields) to `state`."""
    if update.messages:
        state.context = program.merge_messages(state.context, update.messages)
    merge_fields(program, state, update.fields, who)


def apply_step(
    program: Program,
    state: AgentState,
    step: Sequence[tuple[str, NodeOutput, AgentState, list[Message]]],
    pre: dict[str, Any],
    pre_len: int,
) -> None:
    """Merge a step's outputs into the state, node by node in graph order. `step` holds, per
    node: its name, its output, its view of the state and the view's `context` list as it
    was before the step.

    Besides what a node returned, it may have changed its view of the state in place
    (assigned a field, appended to `context`) or returned another state object. Those
    changes are found by comparing with the bindings from before the step (`pre`) and merged
    like returned updates: new messages through the context reducer, an assigned field as a
    replacement of its value. A single node's view is the state itself (its in-place changes
    are undone first); parallel nodes each get their own view.
    """
    replaced: list[dict[str, Any]] = []
    for name, out, view, view_context in step:
        changes: dict[str, Any] = {}
        extra = view_changes(view, view_context, pre, pre_len, changes)
        returned = out.state
        if returned is not None and returned is not view:
            if type(returned) is not type(state):
                raise NodeError(
                    f"Node {name!r} returned a {type(returned).__name__}; "
                    f"this graph's state is {type(state).__name__}",
                    "NODE_002",
                    {"node": name},
                )
            extra += context_changes(returned, pre["context"], pre_len)
            for key, value in returned.__dict__.items():
                if key not in RUNTIME_FIELDS and value is not pre[key]:
                    changes[key] = value
        if extra:
            out.messages[:0] = extra
        replaced.append(changes)
    if len(step) == 1:
        messages = step[0][1].messages
    else:
        messages = [m for _, out, _, _ in step for m in out.messages]
    if messages:
        set_fields(state, context=program.merge_messages(state.context, messages))
    for (name, out, _, _), changes in zip(step, replaced, strict=True):
        if changes or out.fields:
            who = f"node {name!r}"
            for key, value in changes.items():
                assign(state, key, value, who)
            merge_fields(program, state, out.fields, who)


def assign(state: AgentState, name: str, value: Any, who: str) -> None:
    """Set one field with validation, so a wrong type fails here and not in storage."""
    try:
        type(state).__pydantic_validator__.validate_assignment(state, name, value)
    except ValidationError as exc:
        raise NodeError(
            f"{who} set field {name!r} of {type(state).__name__} to an invalid value: "
            f"{exc.errors()[0]['msg']} (got {value!r:.200})",
            "NODE_002",
            {"field": name},
        ) from exc


def input_messages(value: Any) -> list[Message]:
    if value is None:
        return []
    if isinstance(value, Message):
        return [value]
    if not isinstance(value, list | tuple):
        raise ValueError("input['messages'] must be a list of Message objects")
    messages = []
    for item in value:
        if isinstance(item, Message):
            messages.append(item)
        elif isinstance(item, dict):
            messages.append(Message.model_validate(item))
        else:
            raise ValueError(
                f"input['messages'] holds a {type(item).__name__}; pass Message objects, "
                "e.g. Message.text_message('Hello')"
            )
    return messages


__all__ = [
    "RUNTIME_FIELDS",
    "apply_step",
    "apply_update",
    "assign",
    "context_changes",
    "copy_message",
    "handed_out",
    "input_messages",
    "log_entries",
    "merge_fields",
    "restore",
    "snapshot",
    "tail",
    "view_changes",
    "view_of",
]
