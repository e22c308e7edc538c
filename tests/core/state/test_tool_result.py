"""ToolResult: message/state/is_error, the content alias, argument checks, eq/hash/repr."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import pytest

from tenxgraph.core.state import Message, ToolResult


def test_fields_and_defaults() -> None:
    empty = ToolResult()
    assert (empty.message, empty.state, empty.is_error) == (None, None, False)
    result = ToolResult("City updated.", {"selected_city": "Paris"}, True)
    assert result.message == "City updated."
    assert result.state == {"selected_city": "Paris"}
    assert result.is_error is True


def test_keyword_arguments() -> None:
    result = ToolResult(message="m", state={"a": 1}, is_error=False)
    assert (result.message, result.state, result.is_error) == ("m", {"a": 1}, False)


def test_content_is_an_alias_of_message() -> None:
    by_alias = ToolResult(content="hello", state={"x": 1})
    assert by_alias.message == "hello"
    assert by_alias.content == "hello"
    assert by_alias == ToolResult(message="hello", state={"x": 1})
    assert ToolResult(message="direct").content == "direct"


def test_message_can_be_any_value() -> None:
    reply = Message.text_message("done", "tool")
    assert ToolResult(reply).message is reply
    assert ToolResult({"rows": [1, 2]}).content == {"rows": [1, 2]}


def test_message_and_content_together_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not both"):
        ToolResult(message="a", content="b")


@pytest.mark.parametrize("state", [["selected_city", "Paris"], "selected_city", 3, ("a", 1)])
def test_non_dict_state_is_a_type_error(state: Any) -> None:
    with pytest.raises(TypeError, match="state"):
        ToolResult("m", state=state)


def test_is_not_assignable_beyond_its_slots() -> None:
    result = ToolResult("m")
    with pytest.raises(AttributeError):
        result.extra = 1  # type: ignore[attr-defined]


def test_equality() -> None:
    assert ToolResult("m", {"a": 1}) == ToolResult("m", {"a": 1})
    assert ToolResult("m", {"a": 1}) != ToolResult("m", {"a": 2})
    assert ToolResult("m") != ToolResult("n")
    assert ToolResult("m") != ToolResult("m", is_error=True)
    assert ToolResult("m", {}) != ToolResult("m", None)
    assert ToolResult("m") != "m"
    assert ToolResult("m").__eq__("m") is NotImplemented


class Word(StrEnum):
    YES = "yes"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (ToolResult("m", {"a": 1, "b": 2}), ToolResult("m", {"b": 2, "a": 1})),
        (ToolResult(1), ToolResult(1.0)),
        (ToolResult(Word.YES), ToolResult("yes")),
        (ToolResult([1, 2], {"k": [3]}), ToolResult([1, 2], {"k": [3]})),
        (ToolResult(True, is_error=True), ToolResult(1, is_error=True)),
    ],
)
def test_equal_results_have_equal_hashes(first: ToolResult, second: ToolResult) -> None:
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_hash_works_for_unhashable_messages_and_states() -> None:
    result = ToolResult({"rows": [1]}, {"items": [1, 2]})
    assert isinstance(hash(result), int)
    assert result in {result}


def test_repr() -> None:
    assert repr(ToolResult("ok", {"a": 1}, True)) == (
        "ToolResult(message='ok', state={'a': 1}, is_error=True)"
    )
    assert repr(ToolResult()) == "ToolResult(message=None, state=None, is_error=False)"
