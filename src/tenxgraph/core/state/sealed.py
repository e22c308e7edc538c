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


class SealedJSON(FrozenDict):
    """A sealed dict known, when it was made, to hold JSON's own types only: str keys; str,
    int, finite float, bool and None, and sealed dicts and lists of them, at most
    `JSON_DEPTH` deep. It reads back from JSON equal, so a save need not walk it again (a
    model's raw response: see `tenxgraph.core.llm.wire_in`). Internal: nothing else may make
    one. `text` is its JSON as pydantic writes it, for the stores: pydantic writes the frozen
    containers inside it several times slower than plain ones."""

    __slots__ = ("text",)

    text: str


#: how deep a `SealedJSON` may nest (dicts and lists inside it)
JSON_DEPTH = 16


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


_LAST_SHARED: dict[type[BaseModel], _SharedFieldsSet] = {}  # per class, the last one given


def _shared_fields_set(cls: type[BaseModel], names: set[str]) -> set[str]:
    last = _LAST_SHARED.get(cls)
    if last is not None and last == names:  # the usual case: a class's models set alike
        return last
    key = frozenset(names)
    found = _FIELDS_SETS.get(key)
    if found is None:
        if len(_FIELDS_SETS) >= 4096:  # models of very many shapes: stop sharing
            return names
        found = _FIELDS_SETS[key] = _SharedFieldsSet(names)
    if len(_LAST_SHARED) < 4096 or cls in _LAST_SHARED:  # (classes made at run time: bounded)
        _LAST_SHARED[cls] = found
    return found


_SCALARS = frozenset({str, int, float, bool, type(None)})
_get_dict = BaseModel.__dict__["__dict__"].__get__  # the slot itself, whatever `__dict__` is


def kept_dict(model: BaseModel) -> dict[str, Any]:
    """The dict `model` holds in its `__dict__` slot: every field, except for a compact sealed
    model (see `compact`), whose `__dict__` is made from its parts when read."""
    return _get_dict(model)  # type: ignore[no-any-return]


_set_dict = BaseModel.__dict__["__dict__"].__set__


# -- compact sealed models ----------------------------------------------------------------------
#
# A sealed message is kept for as long as its thread is, so what it takes in memory counts. Its
# `__dict__` of 11 fields was its largest part (464 bytes; a dict of even one key takes 184, and
# its text block's 184 more). So a class registered with `compact` (`Message`, `TextBlock`)
# keeps, in a sealed instance, the fields named for slots (a message's id, role, content and
# timestamp; a block's text) in slots of the class, and in its dict slot only the other fields
# not at their default: a plain text message and its block have no dict of their own (one empty
# one is shared). Nothing public sees the difference: reading a field finds it in the slot or
# its default through a descriptor on the class (about 0.1 us more than a dict look-up), and
# the class's `__dict__` (`fields_property`) hands pydantic (dumps, `==`, copies, pickling) and
# everyone else the full, sealed dict, made from the parts when read.


class CompactFields(FrozenDict):
    """A compact sealed model's dict slot: the fields it keeps there (see `compact`)."""

    __slots__ = ()


class _Default:
    """On a compact class, a field a sealed instance may leave out: its default then. (A
    non-data descriptor: an instance's own dict, when it has the field, comes first.)"""

    __slots__ = ("name", "value")

    def __init__(self, name: str, value: Any) -> None:
        self.name, self.value = name, value

    def __get__(self, model: object, owner: type | None = None) -> Any:
        if model is None:  # as pydantic answers for a field read on the class
            raise AttributeError(self.name)
        return self.value


class _InSlot:
    """On a compact class, the field a sealed instance keeps in a slot of its own."""

    __slots__ = ("name", "read")

    def __init__(self, name: str, read: Callable[[object], Any]) -> None:
        self.name, self.read = name, read

    def __get__(self, model: object, owner: type | None = None) -> Any:
        if model is None:
            raise AttributeError(self.name)
        return self.read(model)


_KEEP = object()  # the "default" of a field always kept in the dict: no value is it
_IN_SLOT = object()  # the "default" of a field kept in a slot


class _Layout:
    """How a compact class's sealed instances keep their fields."""

    __slots__ = ("defaults", "others", "readers", "slotted", "template")

    def __init__(self, cls: type[BaseModel], kept: frozenset[str], slots: dict[str, str]):
        # per field: its default (left out of the dict at it), `_KEEP` or `_IN_SLOT`
        self.defaults: dict[str, Any] = {}
        self.template: dict[str, Any] = {}  # every field, in order; defaults where left out
        for name, info in cls.model_fields.items():
            self.template[name] = None
            if name in kept or name in slots:
                self.defaults[name] = _KEEP if name in kept else _IN_SLOT
                continue
            default = info.get_default(call_default_factory=True)
            default = _sealed(default) if type(default) in (list, dict) else default
            if (
                type(default) not in _SCALARS
                and default is not _EMPTY_LIST
                and (default is not _EMPTY_DICT)
            ):
                raise TypeError(f"{cls.__name__}.{name}: compact needs a scalar default")
            self.defaults[name] = self.template[name] = default
        # the fields not in slots, with their defaults (`_KEEP`: none), in order
        self.others: tuple[tuple[str, Any], ...] = tuple(
            (name, default) for name, default in self.defaults.items() if default is not _IN_SLOT
        )
        members = {field: cls.__dict__[slot] for field, slot in slots.items()}
        self.readers: dict[str, Callable[[object], Any]] = {
            field: member.__get__ for field, member in members.items()
        }
        self.slotted: tuple[tuple[str, Callable[[object, Any], None]], ...] = tuple(
            (field, member.__set__) for field, member in members.items()
        )

    def left_out(self) -> dict[str, Any]:
        """The fields a sealed instance may leave out of its dict, with their defaults."""
        return {k: v for k, v in self.defaults.items() if v is not _KEEP and v is not _IN_SLOT}


_LAYOUTS: dict[type[BaseModel], _Layout] = {}
_NO_FIELDS = CompactFields()


def compact(
    cls: type[BaseModel], kept: frozenset[str] = frozenset(), slots: dict[str, str] | None = None
) -> None:
    """Keep sealed instances of `cls` compact: each field named in `slots` in that slot of the
    class, and in the dict slot only the fields named in `kept` and the others not at their
    default. `cls` must use `fields_property` as its `__dict__`."""
    if cls.__dict__.get("__dict__") is not fields_property:
        raise TypeError(f"{cls.__name__} needs `__dict__ = fields_property` to be compact")
    layout = _LAYOUTS[cls] = _Layout(cls, kept, slots or {})
    for name, value in layout.left_out().items():
        setattr(cls, name, _Default(name, value))
    for name, read in layout.readers.items():
        setattr(cls, name, _InSlot(name, read))


def _full_fields(model: BaseModel) -> dict[str, Any]:
    """A model's fields: its dict slot, or, for a compact sealed model, the full sealed dict
    made from its parts (what pydantic and every reader of `__dict__` gets)."""
    fields = _get_dict(model)
    if type(fields) is not CompactFields:
        return fields  # type: ignore[no-any-return]
    layout = _LAYOUTS[type(model)]
    full = layout.template.copy()
    full.update(fields)
    for name, read in layout.readers.items():
        full[name] = read(model)
    return FrozenDict(full)


#: `__dict__` of a class that may be `compact`: reads give every field, writes go to the slot
fields_property = property(_full_fields, _set_dict)


def _compacted(model: BaseModel, layout: _Layout, fields: dict[str, Any]) -> FrozenDict | None:
    """The compact dict slot of `model` (its slotted fields written to their slots), or None
    when it cannot be compact: a slotted field missing (a `model_construct` without it), or
    a slotted value the collector must still track."""
    for name, write in layout.slotted:
        value = fields.get(name, _IN_SLOT)
        if value is _IN_SLOT:
            return None
        if type(value) not in _SCALARS:
            value = _sealed(value)
            if gc.is_tracked(value):
                return None
        write(model, value)
    kept: dict[str, Any] = {}
    for name, default in layout.others:
        value = fields.get(name, default)  # a field left out (`model_construct`): its default
        if value is default:
            continue
        kind = type(value)
        if kind in _SCALARS:
            if kind is type(default) and value == default:
                continue
        elif not value and (
            (default is _EMPTY_LIST and kind is list) or (default is _EMPTY_DICT and kind is dict)
        ):
            continue
        else:
            value = _sealed(value)
        kept[name] = value
    return CompactFields(kept) if kept else _NO_FIELDS


def seal(model: BaseModel) -> None:
    """Make `model` (a message) and everything inside it refuse changes, in place: the same
    object, now immutable. Costs one pass over the message; nothing for one already sealed."""
    kind = type(_get_dict(model))
    if kind is not FrozenDict and kind is not CompactFields:
        _seal_model(model)


def is_sealed(model: BaseModel) -> bool:
    kind = type(_get_dict(model))
    return kind is FrozenDict or kind is CompactFields


def _seal_model(model: BaseModel) -> BaseModel:
    fields = _get_dict(model)
    if type(fields) is FrozenDict or type(fields) is CompactFields:
        return model
    if not _untracking_ready:
        _set_up_untracking()
    layout = _LAYOUTS.get(type(model))
    frozen = None
    if layout is not None and model.__pydantic_extra__ is None:
        frozen = _compacted(model, layout, fields)
        if frozen is not None and frozen is not _NO_FIELDS:
            _untracked(frozen)
    if frozen is None:
        frozen = _frozen_dict(fields)  # untracked when all it holds is
    _set_dict(model, frozen)
    _set_fields_set(model, _shared_fields_set(type(model), model.__pydantic_fields_set__))
    if not gc.is_tracked(frozen) and model.__pydantic_private__ is None:
        _untrack(id(model))  # holds only a sealed tree (in slots too) and a set of field names
    return model


def _sealed(value: Any) -> Any:
    cls = type(value)
    if cls in _SCALARS or cls is FrozenList or cls is FrozenDict or cls is SealedJSON:
        return value
    if cls is dict:
        return _frozen_dict(value) if value else _EMPTY_DICT  # the empty one is shared
    if cls is list:
        if not value:
            return _EMPTY_LIST
        if _SCALARS.issuperset(map(type, value)):
            frozen_list = FrozenList(value)
            _untrack(id(frozen_list))  # scalars only: nothing in it for the collector
            return frozen_list
        frozen_list = FrozenList([v if type(v) in _SCALARS else _sealed(v) for v in value])
        _untracked(frozen_list)
        return frozen_list
    if isinstance(value, BaseModel) and value.__pydantic_extra__ is None:
        return _seal_model(value)
    return value  # immutable (tuples of scalars, enums, datetimes) or not ours to freeze


def _frozen_dict(value: dict[str, Any]) -> FrozenDict:
    """A sealed copy of `value`, untracked by the collector when all it holds is."""
    if _SCALARS.issuperset(map(type, value.values())):  # the usual leaf: one C-level pass
        frozen = FrozenDict(value)
        _untrack(id(frozen))
        return frozen
    frozen = FrozenDict({k: v if type(v) in _SCALARS else _sealed(v) for k, v in value.items()})
    _untracked(frozen)
    return frozen


# A sealed tree cannot be part of a reference cycle: it never changes, and it holds only
# scalars and other sealed (or untracked) objects, none of which can refer back to it. So the
# cyclic garbage collector need not look at it (reference counting frees it): with many
# threads kept in memory, their messages would otherwise make up most of what every full
# collection walks. CPython offers no Python-level call for this; its C API does. It is called
# with the object's address (`id()` in CPython), which ctypes passes on in half the time it
# takes to convert an object argument; the caller holds the object, so the address is live.
def _gc_untracker() -> Callable[[int], None] | None:
    if sys.implementation.name != "cpython":
        return None
    import ctypes

    signature = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)  # holds the GIL, as the C API needs
    return signature(("PyObject_GC_UnTrack", ctypes.pythonapi))


def _ignore(address: int) -> None:
    """Where the collector cannot be told (not CPython), nothing is untracked."""


#: stops the collector tracking the object at an address (`_untrack(id(obj))`): set up by
#: the first seal
_untrack: Callable[[int], None] = _ignore
_untracking_ready = False


def _set_up_untracking() -> None:
    """Before the first seal: the C API's untrack call (ctypes is imported only then) and
    the shared empty containers untracked."""
    global _untrack, _untracking_ready
    _untrack = _gc_untracker() or _ignore
    _untrack(id(_EMPTY_LIST))
    _untrack(id(_EMPTY_DICT))
    _untrack(id(_NO_FIELDS))
    _untracking_ready = True


def untracker() -> Callable[[int], None]:
    """The call that stops the collector tracking the object at an address (`id(obj)`), for
    code that builds sealed trees itself; its caller must hold the object, and the object
    must hold nothing the collector still tracks."""
    if not _untracking_ready:
        _set_up_untracking()
    return _untrack


def untrack_history(history: list[Any]) -> None:
    """Stop the collector tracking a history's list (`add_messages`' result, a lazy
    history). The collector would otherwise walk every slot of each new one (a turn makes
    two), which at 50,000 messages costs more than the rest of the turn; the messages in it
    stay tracked or not on their own. It is left to reference counting: a history is not in
    a reference cycle unless a message in it is made to hold the history itself (such a
    cycle is then never freed), and leaving an object untracked never frees anything early."""
    untracker()(id(history))


def _untracked(container: FrozenList | FrozenDict) -> bool:
    """Stop the collector tracking `container` if all it holds is untracked already (the
    scalars and the sealed trees inside it); whether it is untracked now."""
    values = container.values() if isinstance(container, dict) else container
    if any(map(gc.is_tracked, values)):
        return False
    _untrack(id(container))
    return not gc.is_tracked(container)


__all__ = [
    "JSON_DEPTH",
    "SEALED_HINT",
    "CompactFields",
    "FrozenDict",
    "FrozenList",
    "SealedError",
    "SealedJSON",
    "compact",
    "fields_property",
    "is_sealed",
    "kept_dict",
    "seal",
    "untrack_history",
    "untracker",
]
