"""The state updates a tool returns in `ToolResult(state=...)`: checked against the state's
fields before they are applied, written to the tool ledger as JSON, and turned back into the
fields' types when replayed."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from tenxgraph.core.graph.merge import RUNTIME_FIELDS
from tenxgraph.core.state import AgentState

_adapters: dict[tuple[type[AgentState], str, bool], TypeAdapter[Any] | None] = {}


def brief(exc: ValidationError) -> str:
    """pydantic's errors in one line a model (or a person) can act on."""
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _adapter(state_type: type[AgentState], name: str, item: bool) -> TypeAdapter[Any] | None:
    """A validator for field `name`, or with `item` for one element of a list field (what a
    reducer like `append_items` may be given)."""
    key = (state_type, name, item)
    if key not in _adapters:
        annotation: Any = state_type.model_fields[name].annotation
        if item:
            args = typing.get_args(annotation)
            annotation = args[0] if typing.get_origin(annotation) is list and args else None
        _adapters[key] = None if annotation is None else TypeAdapter(annotation)
    return _adapters[key]


def refused(state_type: type[AgentState], updates: dict[str, Any]) -> str | None:
    """Why the state would refuse a tool's updates, or None. A field with a reducer takes
    what its reducer takes, so only its name is checked."""
    fields = state_type.model_fields
    reducers = state_type.field_reducers()
    for name, value in updates.items():
        if name not in fields or name in RUNTIME_FIELDS:
            known = sorted(set(fields) - RUNTIME_FIELDS)
            return f"its ToolResult updates {name!r}, which is not a field it can set ({known})."
        adapter = None if name in reducers else _adapter(state_type, name, False)
        if adapter is not None:
            try:
                adapter.validate_python(value)
            except ValidationError as exc:
                return f"its ToolResult gives {name!r} an invalid value: {brief(exc)}."
    return None


def encoded(updates: dict[str, Any]) -> dict[str, Any] | str:
    """`updates` as JSON data for the ledger, or why they cannot be (a str)."""
    try:
        data: dict[str, Any] = to_jsonable_python(updates, fallback=str)
    except Exception as exc:  # bytes that are not UTF-8, cycles, nesting too deep
        return (
            f"its ToolResult's state updates cannot be recorded as JSON ({type(exc).__name__}: "
            f"{exc}); give those fields JSON-ready values."
        )
    return data


def revived(state_type: type[AgentState], updates: dict[str, Any]) -> dict[str, Any]:
    """Updates read back from the ledger as JSON, turned into the fields' types again (models,
    enums); a value that fits neither the field nor one of its list items stays as it is."""
    result = {}
    for name, value in updates.items():
        result[name] = value
        if name not in state_type.model_fields:
            continue
        for item in (False, True):
            adapter = _adapter(state_type, name, item)
            if adapter is None:
                continue
            try:
                result[name] = adapter.validate_python(value)
                break
            except ValidationError:
                continue
    return result


__all__ = ["brief", "encoded", "refused", "revived"]
