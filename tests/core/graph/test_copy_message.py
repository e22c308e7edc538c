"""`copy_message`: the copies the engine hands out share nothing mutable with what it keeps."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tenxgraph.core.graph.merge import copy_message
from tenxgraph.core.state import (
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsages,
    ToolCallBlock,
)
from tenxgraph.core.state.message_block import AnnotationRef


def answer(**extra: Any) -> Message:
    return Message(
        message_id="a-1",
        role="assistant",
        content=[
            ReasoningBlock(summary="thinking", details=["step 1"]),
            TextBlock(text="hello", annotations=[AnnotationRef(url="https://example.test/doc")]),
            ToolCallBlock(id="call-1", name="lookup", args={"ids": [1, 2], "filter": {"q": "x"}}),
        ],
        tools_calls=[
            {"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
        reasoning="thinking",
        metadata={"provider": "openai", "nested": {"list": [1, {"deep": True}]}},
        usages=TokenUsages(prompt_tokens=3, completion_tokens=4, total_tokens=7),
        raw={"id": "r-1", "choices": [{"message": {"content": "hello"}}]},
        **extra,
    )


def test_a_copy_equals_the_message_and_keeps_which_fields_were_set() -> None:
    original = answer()
    copy = copy_message(original)
    assert copy == original
    assert copy is not original
    assert copy.model_fields_set == original.model_fields_set
    assert copy.model_dump() == original.model_dump()


def test_changing_anything_in_a_copy_leaves_the_message_as_it_was() -> None:
    original = answer()
    before = original.model_dump()
    copy = copy_message(original)
    copy.content.append(TextBlock(text="more"))
    copy.content[1].text = "changed"  # type: ignore[union-attr]
    copy.content[1].annotations[0].url = "https://elsewhere.test"  # type: ignore[union-attr]
    copy.content[2].args["ids"].append(3)  # type: ignore[union-attr]
    copy.content[2].args["filter"]["q"] = "y"  # type: ignore[union-attr]
    copy.content[0].details.append("step 2")  # type: ignore[union-attr]
    assert copy.tools_calls is not None
    copy.tools_calls[0]["function"]["arguments"] = '{"x": 1}'
    copy.metadata["nested"]["list"][1]["deep"] = False
    copy.metadata["added"] = 1
    assert copy.usages is not None
    assert copy.raw is not None
    copy.usages.prompt_tokens = 99
    copy.raw["choices"][0]["message"]["content"] = "changed"
    copy.model_fields_set.add("delta")
    assert original.model_dump() == before
    assert "delta" not in original.model_fields_set


class Parsed(BaseModel):
    items: list[str]


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str


def test_a_parsed_model_is_copied_too() -> None:
    original = answer(parsed_content=Parsed(items=["a"]))
    copy = copy_message(original)
    assert isinstance(copy.parsed_content, Parsed)
    assert copy.parsed_content == original.parsed_content
    copy.parsed_content.items.append("b")
    assert original.parsed_content.items == ["a"]


def test_a_model_with_extra_fields_is_copied_whole() -> None:
    loose = Loose(name="n", tags=["x"])
    original = answer(parsed_content=loose)
    copy = copy_message(original)
    assert isinstance(copy.parsed_content, Loose)
    assert copy.parsed_content.model_extra == {"tags": ["x"]}
    copy.parsed_content.tags.append("y")  # type: ignore[attr-defined]
    assert loose.tags == ["x"]  # type: ignore[attr-defined]


def test_plain_text_messages_are_copied_and_independent() -> None:
    original = Message.text_message("hi")
    copy = copy_message(original)
    assert copy == original
    assert copy is not original
    copy.content.append(TextBlock(text="more"))
    assert len(original.content) == 1
