"""The offline models: TestModel and FunctionModel, whole and streamed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from tenxgraph.core.llm import FunctionModel, ModelClient, ModelInfo, ModelRequest, TestModel
from tenxgraph.core.llm.offline import example_for_schema
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import TextBlock, ToolCallBlock, ToolResultBlock

# -- tools with schemas ---------------------------------------------------------------------


class Address(BaseModel):
    street: str
    number: int = Field(ge=1)


class WeatherArgs(BaseModel):
    city: str = Field(min_length=3)
    days: int = Field(ge=2)
    unit: Literal["metric", "imperial"]
    detailed: bool
    ratio: float = Field(ge=0.5)


class ShipArgs(BaseModel):
    to: Address
    tags: list[str] = Field(min_length=2)
    note: str | None = None
    priority: int = 3


def tool(name: str, args: type[BaseModel]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": name, "parameters": args.model_json_schema()},
    }


TOOLS = [tool("weather", WeatherArgs), tool("ship", ShipArgs)]
ARGS = {"weather": WeatherArgs, "ship": ShipArgs}


def ask(
    *messages: Message,
    tools: list[dict[str, Any]] | None = None,
    schema: type[BaseModel] | None = None,
    **settings: Any,
) -> ModelRequest:
    return ModelRequest(
        model="test",
        messages=list(messages) or [Message.text_message("What is the weather?")],
        tools=tools or [],
        output_schema=schema,
        settings=settings,
    )


def results_for(call_message: Message, outputs: dict[str, Any]) -> Message:
    return Message.tool_message(
        [
            ToolResultBlock(call_id=c.id, output=outputs[c.name])
            for c in call_message.tool_call_blocks()
        ]
    )


async def pieces(model: ModelClient, request: ModelRequest) -> tuple[list[Message], Message]:
    out = [m async for m in model.astream(request)]
    *deltas, final = out
    assert all(d.delta for d in deltas)
    assert not final.delta
    return deltas, final


# -- TestModel ------------------------------------------------------------------------------


def test_test_model_is_a_model_client() -> None:
    assert isinstance(TestModel(), ModelClient)
    assert isinstance(FunctionModel(lambda m, i: "x"), ModelClient)


async def test_test_model_calls_each_offered_tool_once_with_schema_valid_arguments() -> None:
    answer = await TestModel().acomplete(ask(tools=TOOLS))
    calls = answer.tool_call_blocks()
    assert sorted(c.name for c in calls) == ["ship", "weather"]
    assert len({c.id for c in calls}) == 2
    for call in calls:
        ARGS[call.name].model_validate(call.args)  # raises if the arguments break the schema
    assert answer.tools_calls is not None
    assert [json.loads(c["function"]["arguments"]) for c in answer.tools_calls] == [
        c.args for c in calls
    ]
    assert answer.metadata["finish_reason"] == "tool_calls"
    assert answer.text() == ""


async def test_test_model_then_answers_with_a_summary_of_the_results() -> None:
    question = Message.text_message("Plan my trip")
    model = TestModel()
    calls = await model.acomplete(ask(question, tools=TOOLS))
    results = results_for(calls, {"weather": {"temp": 21}, "ship": "shipped"})
    answer = await model.acomplete(ask(question, calls, results, tools=TOOLS))
    assert answer.tool_call_blocks() == []
    assert answer.text().startswith("Tool results: ")
    assert json.loads(answer.text().removeprefix("Tool results: ")) == {
        "weather": {"temp": 21},
        "ship": "shipped",
    }
    assert answer.metadata["finish_reason"] == "stop"


async def test_test_model_calls_tools_again_for_a_new_user_turn() -> None:
    model = TestModel()
    first = await model.acomplete(ask(tools=TOOLS))
    results = results_for(first, {"weather": 1, "ship": 2})
    history = [Message.text_message("one"), first, results, Message.text_message("two")]
    again = await model.acomplete(ask(*history, tools=TOOLS))
    assert sorted(c.name for c in again.tool_call_blocks()) == ["ship", "weather"]


async def test_test_model_without_tools_answers_the_question() -> None:
    answer = await TestModel().acomplete(ask(Message.text_message("ping?")))
    assert answer.text() == "test answer to: ping?"
    fixed = await TestModel(text="pong", call_tools=False).acomplete(ask(tools=TOOLS))
    assert fixed.text() == "pong"
    assert fixed.tool_call_blocks() == []


async def test_test_model_call_tools_picks_tools_by_name() -> None:
    answer = await TestModel(call_tools=["ship"]).acomplete(ask(tools=TOOLS))
    assert [c.name for c in answer.tool_call_blocks()] == ["ship"]
    none = await TestModel(call_tools=False).acomplete(ask(tools=TOOLS))
    assert none.tool_call_blocks() == []


class Forecast(BaseModel):
    city: str
    highs: list[int]
    sunny: bool = True


async def test_test_model_answers_an_output_schema_with_a_valid_object() -> None:
    answer = await TestModel().acomplete(ask(schema=Forecast))
    assert isinstance(answer.parsed_content, Forecast)
    assert Forecast.model_validate_json(answer.text()) == answer.parsed_content


async def test_test_model_streams_pieces_that_add_up_to_the_final_text() -> None:
    request = ask(Message.text_message("a fairly long question with many words in it"))
    deltas, final = await pieces(TestModel(), request)
    assert len(deltas) > 2
    assert "".join(d.text() for d in deltas) == final.text()
    assert {d.message_id for d in deltas} == {final.message_id}
    assert final.text() == (await TestModel().acomplete(request)).text()


async def test_test_model_streams_tool_arguments_in_fragments() -> None:
    deltas, final = await pieces(TestModel(), ask(tools=TOOLS))
    by_index: dict[int, list[str]] = {}
    ids: dict[int, str] = {}
    for delta in deltas:
        for fragment in delta.tools_calls or ():
            by_index.setdefault(fragment["index"], []).append(fragment["function"]["arguments"])
            if fragment["id"]:
                ids[fragment["index"]] = fragment["id"]
    assert all(len(parts) == 2 for parts in by_index.values())
    calls = final.tool_call_blocks()
    assert [json.loads("".join(by_index[i])) for i in range(len(calls))] == [c.args for c in calls]
    assert [ids[i] for i in range(len(calls))] == [c.id for c in calls]


async def test_test_model_counts_usage() -> None:
    answer = await TestModel(text="one two three").acomplete(ask(Message.text_message("a b")))
    assert answer.usages is not None
    assert answer.usages.completion_tokens == 3
    assert answer.usages.prompt_tokens == 3
    assert answer.usages.total_tokens == 6


# -- example_for_schema ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "default": "d"}, "d"),
        ({"const": 7}, 7),
        ({"enum": ["b", "a"]}, "b"),
        ({"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 4}]}, 4),
        ({"type": ["null", "boolean"]}, False),
        (
            {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 2},
            ["aa", "aa"],
        ),
        ({"type": "number", "minimum": 1.5}, 1.5),
        ({"type": "object", "properties": {"x": {"type": "integer"}}}, {"x": 0}),
        ({}, None),
    ],
)
def test_example_for_schema(schema: dict[str, Any], value: Any) -> None:
    assert example_for_schema(schema) == value


def test_example_for_schema_follows_refs() -> None:
    example = example_for_schema(ShipArgs.model_json_schema())
    assert ShipArgs.model_validate(example).to == Address(street="a", number=1)


# -- FunctionModel --------------------------------------------------------------------------


async def test_function_model_sync_function_returning_text() -> None:
    seen: list[tuple[list[str], ModelInfo]] = []

    def reply(messages: list[Message], info: ModelInfo) -> str:
        seen.append(([m.text() for m in messages], info))
        return "sync answer"

    request = ask(Message.text_message("hi"), tools=TOOLS, schema=None, temperature=0.3)
    answer = await FunctionModel(reply).acomplete(request)
    assert answer.role == "assistant"
    assert answer.content == [TextBlock(text="sync answer")]
    ((texts, info),) = seen
    assert texts == ["hi"]
    assert info == ModelInfo(
        model="test", tools=TOOLS, output_schema=None, settings={"temperature": 0.3}
    )


async def test_function_model_async_function_returning_tool_calls() -> None:
    async def reply(messages: list[Message], info: ModelInfo) -> list[ToolCallBlock]:
        return [
            ToolCallBlock(id="c1", name="weather", args={"city": "Oslo"}),
            ToolCallBlock(id="c2", name="ship", args={}),
        ]

    answer = await FunctionModel(reply).acomplete(ask())
    assert [c.id for c in answer.tool_call_blocks()] == ["c1", "c2"]
    assert answer.tools_calls == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
        },
        {"id": "c2", "type": "function", "function": {"name": "ship", "arguments": "{}"}},
    ]
    assert answer.metadata["finish_reason"] == "tool_calls"
    single = await FunctionModel(lambda m, i: ToolCallBlock(id="c3", name="x")).acomplete(ask())
    assert [c.id for c in single.tool_call_blocks()] == ["c3"]


async def test_function_model_returning_a_message_keeps_it() -> None:
    mine = Message(
        role="assistant",
        content=[TextBlock(text="mine"), ToolCallBlock(id="k", name="weather", args={"a": 1})],
        metadata={"custom": True},
    )
    answer = await FunctionModel(lambda m, i: mine).acomplete(ask())
    assert answer is mine
    assert answer.metadata == {"custom": True}
    assert answer.tools_calls is not None
    assert answer.tools_calls[0]["function"] == {"name": "weather", "arguments": '{"a": 1}'}


async def test_function_model_must_answer_as_the_assistant() -> None:
    with pytest.raises(ValueError, match="assistant"):
        await FunctionModel(lambda m, i: Message.text_message("x", "user")).acomplete(ask())


async def test_function_model_returning_a_pydantic_object_or_dict() -> None:
    forecast = Forecast(city="Oslo", highs=[3, 4])
    answer = await FunctionModel(lambda m, i: forecast).acomplete(ask(schema=Forecast))
    assert answer.parsed_content == forecast
    assert Forecast.model_validate_json(answer.text()) == forecast
    from_dict = await FunctionModel(lambda m, i: {"city": "Rome", "highs": []}).acomplete(
        ask(schema=Forecast)
    )
    assert from_dict.parsed_content == Forecast(city="Rome", highs=[])
    no_schema = await FunctionModel(lambda m, i: {"k": 1}).acomplete(ask())
    assert no_schema.parsed_content is None
    assert json.loads(no_schema.text()) == {"k": 1}


async def test_function_model_rejects_other_return_values() -> None:
    with pytest.raises(TypeError, match="got int"):
        await FunctionModel(lambda m, i: 42).acomplete(ask())


async def test_function_model_streams_its_answer_in_pieces() -> None:
    text = "one two three four five"
    deltas, final = await pieces(FunctionModel(lambda m, i: text), ask())
    assert [d.text() for d in deltas] == ["one two ", "three four ", "five"]
    assert final.text() == text
    assert {d.message_id for d in deltas} == {final.message_id}


async def test_function_model_stream_function() -> None:
    async def stream(
        messages: list[Message], info: ModelInfo
    ) -> AsyncIterator[str | ToolCallBlock]:
        yield "Let me "
        yield "look."
        yield ToolCallBlock(id="c1", name="weather", args={"city": "Oslo"})

    def unused(messages: list[Message], info: ModelInfo) -> str:
        raise AssertionError("astream uses stream_function")

    deltas, final = await pieces(FunctionModel(unused, stream_function=stream), ask())
    assert [d.text() for d in deltas] == ["Let me ", "look."]
    assert final.text() == "Let me look."
    assert final.tool_call_blocks() == [
        ToolCallBlock(id="c1", name="weather", args={"city": "Oslo"})
    ]
    assert {d.message_id for d in deltas} == {final.message_id}


async def test_function_model_stream_function_yields_only_text_and_tool_calls() -> None:
    async def stream(messages: list[Message], info: ModelInfo) -> AsyncIterator[Any]:
        yield 3

    model = FunctionModel(lambda m, i: "x", stream_function=stream)
    with pytest.raises(TypeError, match="not int"):
        await pieces(model, ask())
