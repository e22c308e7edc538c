"""Build pydantic models from values already known to be valid, skipping validation.

Hot paths (text messages, streaming deltas, stream chunks) create many small models whose field
values the runtime itself produced. Validating them again costs several microseconds each; this
fills the same fields (defaults and factories included) directly. Only trusted callers use it,
with values of the declared types; anything from users goes through normal validation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from tenxgraph.core.state._depth import deep_path, format_path, too_deep
from tenxgraph.core.state.sealed import FrozenDict, FrozenList, SealedJSON

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_IMMUTABLE = (type(None), bool, int, float, str, bytes, tuple, frozenset, Enum)


class _Plan:
    """Per class: a template of the constant defaults, the factories, the required names."""

    __slots__ = ("factories", "required", "template")

    def __init__(self, cls: type[BaseModel]) -> None:
        self.template: dict[str, Any] = {}
        self.factories: list[tuple[str, Callable[[], Any]]] = []
        required: list[str] = []
        for name, info in cls.model_fields.items():
            self.template[name] = None
            if info.default_factory is not None:
                self.factories.append((name, info.default_factory))  # type: ignore[arg-type]
            elif info.default is PydanticUndefined:
                required.append(name)
            elif isinstance(info.default, _IMMUTABLE):
                self.template[name] = info.default
            else:
                raise TypeError(f"{cls.__name__}.{name}: mutable default; use a default_factory")
        self.required = frozenset(required)


_plans: dict[type[BaseModel], _Plan] = {}


def trusted(cls: type[M], **values: Any) -> M:
    """An instance of `cls` holding `values` plus the defaults of the other fields."""
    plan = _plans.get(cls)
    if plan is None:
        plan = _plans[cls] = _Plan(cls)
    if not plan.required <= values.keys():
        missing = sorted(plan.required - values.keys())
        raise TypeError(f"{cls.__name__}: required fields missing: {missing}")
    fields = plan.template.copy()
    fields.update(values)
    for name, factory in plan.factories:
        if name not in values:
            fields[name] = factory()
    return assemble(cls, fields, set(values))


def template(cls: type[BaseModel], **values: Any) -> dict[str, Any]:
    """Every field of `cls` with its default (factories called), overridden by `values`; for
    callers that build many instances from one template with `assemble`."""
    return dict(trusted(cls, **values).__dict__)


_set_dict = BaseModel.__dict__["__dict__"].__set__  # the slot itself: no attribute lookup
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_new = object.__new__


def assemble(cls: type[M], fields: dict[str, Any], fields_set: set[str]) -> M:
    """An instance of `cls` whose `__dict__` is `fields`: every field, already valid."""
    model = _new(cls)
    _set_dict(model, fields)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copied(value: T) -> T:
    """A deep copy of JSON-like data and of pydantic models made of it, built without
    validation (the values are valid already); anything else goes through `copy.deepcopy`.
    About half the cost of a model's dump and validate. A value nested too deeply to copy
    raises `ValueError` saying where (never a bare `RecursionError`)."""
    try:
        return _copied(value)
    except RecursionError:
        path = deep_path(value)
        where = f"field {format_path(path)!r}: " if path else ""
        raise ValueError(f"Cannot copy this {type(value).__name__}: {where}{too_deep()}") from None


def _copied(value: T) -> T:
    cls = type(value)
    if cls in _SCALARS:
        return value
    # scalars are shared, not passed to a call of their own: most leaves are scalars
    if cls is dict or cls is FrozenDict or cls is SealedJSON:
        return {  # type: ignore[return-value]
            k: v if type(v) in _SCALARS else _copied(v)
            for k, v in value.items()  # type: ignore[attr-defined]
        }
    if cls is list or cls is FrozenList:
        return [v if type(v) in _SCALARS else _copied(v) for v in value]  # type: ignore[attr-defined,return-value]
    if (
        isinstance(value, BaseModel)
        and value.__pydantic_extra__ is None
        and value.__pydantic_private__ is None
    ):
        fields = {k: v if type(v) in _SCALARS else _copied(v) for k, v in value.__dict__.items()}
        return assemble(cls, fields, set(value.__pydantic_fields_set__))  # type: ignore[type-var]
    if isinstance(value, Enum):  # members are singletons
        return value
    return copy.deepcopy(value)
