"""`Record`/`FrozenRecord` (the internal records on the import path) behave as the dataclasses
they replaced: repr, equality, hashing, immutability, copies and pattern matching; and the
public `Tracing` and `CustomEvent` (dataclasses) keep that behaviour too."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from tenxgraph.core.graph.node import NodeOutput
from tenxgraph.core.state import CustomEvent
from tenxgraph.observability import Tracing
from tenxgraph.utils.record import FrozenRecord


class Point(FrozenRecord):
    __match_args__ = ("x", "y")
    __slots__ = __match_args__
    x: int
    y: int

    def __init__(self, x: int, y: int) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)


def test_a_frozen_record_is_a_frozen_dataclass_in_all_but_name() -> None:
    point = Point(1, 2)
    assert repr(point) == "Point(x=1, y=2)"
    assert point == Point(1, 2)
    assert point != Point(2, 1)
    assert hash(point) == hash(Point(1, 2))
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 3
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del point.y
    assert pickle.loads(pickle.dumps(point)) == point
    assert copy.deepcopy(point) == point
    match point:
        case Point(x, y):
            assert (x, y) == (1, 2)
        case _:
            pytest.fail("Point did not match positionally")


def test_repr_lists_the_fields_in_declaration_order() -> None:
    assert repr(Tracing(record_content=True)) == (
        "Tracing(tracer_provider=None, record_content=True, enabled=True)"
    )
    assert repr(CustomEvent({"a": 1})) == "CustomEvent(data={'a': 1})"
    assert repr(NodeOutput()) == "NodeOutput(messages=[], fields={}, goto=None, state=None)"


def test_equality_is_by_class_and_fields() -> None:
    assert Tracing(None, True) == Tracing(record_content=True, enabled=True)
    assert Tracing(enabled=False) != Tracing()
    not_a_record: object = 1
    assert CustomEvent(1) != not_a_record
    assert NodeOutput(goto=["a"]) == NodeOutput(goto=["a"])
    assert NodeOutput(goto=["a"]) != NodeOutput(goto=["b"])


def test_frozen_records_hash_by_fields_and_refuse_assignment() -> None:
    assert hash(Tracing(enabled=False)) == hash(Tracing(None, None, False))
    assert len({CustomEvent("x"), CustomEvent("x")}) == 1
    with pytest.raises(TypeError, match="unhashable"):
        hash(CustomEvent({"not": "hashable"}))
    tracing = Tracing()
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'enabled'"):
        tracing.enabled = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'data'"):
        del CustomEvent(1).data


def test_mutable_records_are_unhashable_like_a_dataclass() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(NodeOutput())


def test_frozen_records_copy_and_pickle() -> None:
    event = CustomEvent({"items": [1, 2]})
    deep = copy.deepcopy(event)
    assert deep == event
    assert deep.data is not event.data
    assert copy.copy(event).data is event.data
    tracing = Tracing(record_content=False, enabled=False)
    assert pickle.loads(pickle.dumps(tracing)) == tracing


def test_records_match_positionally_in_field_order() -> None:
    match Tracing(None, True, False):
        case Tracing(provider, content, enabled):
            assert (provider, content, enabled) == (None, True, False)
        case _:
            pytest.fail("Tracing did not match positionally")
    match CustomEvent("progress"):
        case CustomEvent(data):
            assert data == "progress"
        case _:
            pytest.fail("CustomEvent did not match positionally")
