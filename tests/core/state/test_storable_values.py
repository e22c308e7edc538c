"""The data model refuses what could not be stored: NaN and infinity in float fields, and a
value too deep to copy gives a clear error (never a bare RecursionError)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from tenxgraph.core.state import AgentState, ImageBlock, MediaRef, Message
from tenxgraph.core.state._construct import copied
from tenxgraph.core.state._depth import MAX_DEPTH, deep_path, format_path


class Scored(AgentState):
    score: float = 0.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_float_fields_refuse_nan_and_infinity(bad: float) -> None:
    with pytest.raises(ValidationError, match="finite number"):
        Scored(score=bad)
    with pytest.raises(ValidationError, match="finite number"):
        Message(role="user", content="x", timestamp=bad)
    with pytest.raises(ValidationError, match="finite number"):
        ImageBlock(media=MediaRef(url="https://example.com/a.png"), bbox=[0.0, bad])
    assert Scored(score=1e308).score == 1e308


def deep(levels: int) -> dict[str, object]:
    top: dict[str, object] = {}
    inner = top
    for _ in range(levels - 1):
        inner["a"] = {}
        inner = inner["a"]  # type: ignore[assignment]
    return top


def test_copying_a_value_nested_past_pythons_limit_names_where() -> None:
    message = Message(role="user", content="x", metadata={"deep": deep(5000)})
    with pytest.raises(ValueError, match=r"field 'metadata\.deep\.a.*deeper than 100 levels"):
        copied(message)
    shallow = Message(role="user", content="x", metadata={"deep": deep(50)})
    assert copied(shallow) == shallow


def test_deep_path_stops_at_the_limit() -> None:
    assert deep_path(deep(MAX_DEPTH)) is None
    path = deep_path(deep(MAX_DEPTH + 1))
    assert path == ["a"] * MAX_DEPTH
    assert deep_path([(1, {2})]) is None
    assert format_path(["a"] * 20) == "a.a.a.a.a.a.<10 more>.a.a.a.a"
