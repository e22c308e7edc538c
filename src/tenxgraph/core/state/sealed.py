"""Sealed messages: the ones a thread keeps, which nothing may change any more.

A run hands its caller the very message objects its thread keeps (a list copy, never a message
copy), so that returning a long conversation costs what copying a list of pointers costs.
Those objects are sealed first: the message, its blocks and every list and dict inside them
refuse changes with `SealedError`. What the caller was given can therefore never change what
the thread keeps or stores. A copy (`model_copy(deep=True)`, `copy.deepcopy`) is an ordinary,
changeable message again.
"""

from __future__ import annotations

import copy
import gc
import sys
from collections.abc import Callable
from typing import Any, NoReturn, SupportsIndex

from pydantic import BaseModel

SEALED_HINT = (
    "it is part of a thread's history, which never changes once kept. Change a copy instead: "
    "message.model_copy(update={...}, deep=True); to edit the stored message, pass the changed "
    "copy to app.update_state(config, [message], replace=True)"
)


class SealedError(TypeError):
    """Something tried to change a sealed (kept, immutable) message."""


def _refuse(what: object, *args: Any, **kwargs: Any) -> NoReturn:
    raise SealedError(f"Cannot change this {type(what).__name__}: {SEALED_HINT}")


class FrozenList(list[Any]):
    """A list that refuses changes; copies of it are plain lists."""

    __slots__ = ()

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(item, memo) for item in self]

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))


class FrozenDict(dict[Any, Any]):
    """A dict that refuses changes; copies of it are plain dicts. Also the `__dict__` of a
    sealed model, so that setting a field fails before anything changes."""

    __slots__ = ()

    pop = popitem = clear = update = setdefault = _refuse
    __setitem__ = __delitem__ = __ior__ = _refuse

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (dict, (dict(self),))


class _SharedFieldsSet(set[str]):
    """The `__pydantic_fields_set__` of sealed models, one object per distinct set of names:
    a sealed model never sets a field, so it needs no set of its own (a copy gets one)."""

    __slots__ = ()

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[str]:
        return set(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (set, (list(self),))


_FIELDS_SETS: dict[frozenset[str], _SharedFieldsSet] = {}
_EMPTY_LIST = FrozenList()
_EMPTY_DICT = FrozenDict()
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__


def _shared_fields_set(names: set[str]) -> set[str]:
    key = frozenset(names)
    found = _FIELDS_SETS.get(key)
    if found is None:
        if len(_FIELDS_SETS) >= 4096:  # models of very many shapes: stop sharing
            return names
        found = _FIELDS_SETS[key] = _SharedFieldsSet(names)
    return found


_SCALARS = frozenset({str, int, float, bool, type(None)})
_set_dict = BaseModel.__dict__["__dict__"].__set__


def seal(model: BaseModel) -> None:
    """Make `model` (a message) and everything inside it refuse changes, in place: the same
    object, now immutable. Costs one pass over the message; nothing for one already sealed."""
    if type(model.__dict__) is not FrozenDict:
        _seal_model(model)


def is_sealed(model: BaseModel) -> bool:
    return type(model.__dict__) is FrozenDict


def _seal_model(model: BaseModel) -> BaseModel:
    fields = model.__dict__
    if type(fields) is FrozenDict:
        return model
    if not _untracking_ready:
        _set_up_untracking()
    frozen = FrozenDict({k: v if type(v) in _SCALARS else _sealed(v) for k, v in fields.items()})
    _set_dict(model, frozen)
    _set_fields_set(model, _shared_fields_set(model.__pydantic_fields_set__))
    if _untracked(frozen) and model.__pydantic_private__ is None:
        _untrack(model)  # holds only a sealed tree and a set of field names
    return model


def _sealed(value: Any) -> Any:
    cls = type(value)
    if cls in _SCALARS or cls is FrozenList or cls is FrozenDict:
        return value
    if cls is list:
        if not value:
            return _EMPTY_LIST  # immutable: one for all
        frozen_list = FrozenList([v if type(v) in _SCALARS else _sealed(v) for v in value])
        _untracked(frozen_list)
        return frozen_list
    if cls is dict:
        if not value:
            return _EMPTY_DICT
        frozen = FrozenDict({k: v if type(v) in _SCALARS else _sealed(v) for k, v in value.items()})
        _untracked(frozen)
        return frozen
    if isinstance(value, BaseModel) and value.__pydantic_extra__ is None:
        return _seal_model(value)
    return value  # immutable (tuples of scalars, enums, datetimes) or not ours to freeze


# A sealed tree cannot be part of a reference cycle: it never changes, and it holds only
# scalars and other sealed (or untracked) objects, none of which can refer back to it. So the
# cyclic garbage collector need not look at it (reference counting frees it): with many
# threads kept in memory, their messages would otherwise make up most of what every full
# collection walks. CPython offers no Python-level call for this; its C API does.
def _gc_untracker() -> Callable[[object], None] | None:
    if sys.implementation.name != "cpython":
        return None
    import ctypes

    untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    return untrack


def _ignore(value: object) -> None:
    """Where the collector cannot be told (not CPython), nothing is untracked."""


#: stops the collector tracking an object: set up by the first seal
_untrack: Callable[[object], None] = _ignore
_untracking_ready = False


def _set_up_untracking() -> None:
    """Before the first seal: the C API's untrack call (ctypes is imported only then) and
    the shared empty containers untracked."""
    global _untrack, _untracking_ready
    _untrack = _gc_untracker() or _ignore
    _untrack(_EMPTY_LIST)
    _untrack(_EMPTY_DICT)
    _untracking_ready = True


def _untracked(container: FrozenList | FrozenDict) -> bool:
    """Stop the collector tracking `container` if all it holds is untracked already (the
    scalars and the sealed trees inside it); whether it is untracked now."""
    values = container.values() if type(container) is FrozenDict else container
    if any(map(gc.is_tracked, values)):
        return False
    _untrack(container)
    return not gc.is_tracked(container)


__all__ = ["SEALED_HINT", "FrozenDict", "FrozenList", "SealedError", "is_sealed", "seal"]
