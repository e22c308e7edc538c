"""litellm answers -> Messages: whole responses (message_from_response) and streams
(StreamAssembler), in the shapes litellm gives for openai, anthropic and gemini."""

from __future__ import annotations

import copy
import gc
import json
import sys
from typing import Any

import pytest

from tenxgraph.core.llm.litellm_client import load_litellm
from tenxgraph.core.llm.wire_in import (
    StreamAssembler,
    message_from_response,
    parse_arguments,
    scrub,
    token_usages,
)
from tenxgraph.core.llm.wire_out import to_wire
from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.core.state._depth import MAX_DEPTH
from tenxgraph.core.state.message_block import ReasoningBlock, TextBlock, ToolCallBlock
from tenxgraph.core.state.sealed import JSON_DEPTH, SealedError, SealedJSON, is_sealed
from tenxgraph.storage.checkpointer._codec import encode_message
from tenxgraph.storage.checkpointer._json_values import plain_problem
from tenxgraph.storage.checkpointer._storable import message_problem

load_litellm()  # sets the offline cost map before litellm is imported

from litellm.types.utils import (  # noqa: E402
    Delta,
    ModelResponse,
    ModelResponseStream,
    StreamingChoices,
    Usage,
)


def call(call_id: str | None, name: str, arguments: str, index: int = 0) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "index": index,
        "function": {"name": name, "arguments": arguments},
    }


def response(message: dict[str, Any], finish: str = "stop", **extra: Any) -> ModelResponse:
    return ModelResponse(
        id=extra.pop("id", "chatcmpl-1"),
        model=extra.pop("model", "gpt-4o-mini"),
        choices=[
            {"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}}
        ],
        **extra,
    )


def nested(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    for _ in range(levels):
        leaf = {"a": leaf}
    return leaf


# -- whole responses ------------------------------------------------------------------------


def test_openai_text_answer() -> None:
    usage = Usage(
        prompt_tokens=12,
        completion_tokens=5,
        total_tokens=17,
        prompt_tokens_details={"cached_tokens": 8},
        completion_tokens_details={"reasoning_tokens": 2},
    )
    message = message_from_response(
        response({"content": "Hello"}, usage=usage, system_fingerprint="fp_1"),
        "openai",
        "openai/gpt-4o-mini",
        response_cost=4.2e-6,
    )
    assert message.role == "assistant"
    assert not message.delta
    assert message.content == [TextBlock(text="Hello")]
    assert message.tools_calls is None
    assert message.reasoning is None
    assert message.metadata == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "finish_reason": "stop",
        "response_id": "chatcmpl-1",
        "cost": 4.2e-6,
        "system_fingerprint": "fp_1",
    }
    assert message.usages == TokenUsages(
        prompt_tokens=12,
        completion_tokens=5,
        total_tokens=17,
        reasoning_tokens=2,
        cache_read_input_tokens=8,
    )
    assert message.raw is not None
    assert message.raw["id"] == "chatcmpl-1"
    assert message.raw["choices"][0]["message"]["content"] == "Hello"
    json.dumps(message.raw)  # a plain, JSON-ready dict


def test_no_cost_key_when_litellm_does_not_know_the_price() -> None:
    message = message_from_response(response({"content": "x"}), "openai", "m")
    assert "cost" not in message.metadata


def test_parallel_tool_calls_become_blocks_and_openai_tools_calls() -> None:
    wire = {
        "content": None,
        "tool_calls": [
            call("call_1", "get_weather", '{"city": "Paris"}'),
            call("call_2", "get_time", '{"tz":"CET"}', index=1),
        ],
    }
    message = message_from_response(response(wire, "tool_calls"), "openai", "m")
    assert message.content == [
        ToolCallBlock(id="call_1", name="get_weather", args={"city": "Paris"}),
        ToolCallBlock(id="call_2", name="get_time", args={"tz": "CET"}),
    ]
    assert message.tools_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        },
        {
            "id": "call_2",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
        },
    ]
    assert message.metadata["finish_reason"] == "tool_calls"
    assert "tool_call_errors" not in message.metadata


def test_invalid_json_arguments_are_kept_raw_and_reported() -> None:
    wire = {
        "tool_calls": [
            call("bad", "get_weather", '{"city": "Par'),
            call("list", "get_weather", "[1, 2]", index=1),
            call("good", "get_weather", '{"city": "Rome"}', index=2),
        ]
    }
    message = message_from_response(response(wire, "tool_calls"), "openai", "m")
    blocks = message.tool_call_blocks()
    assert [(b.id, b.args) for b in blocks] == [
        ("bad", {}),
        ("list", {}),
        ("good", {"city": "Rome"}),
    ]
    assert message.tools_calls is not None
    assert [c["function"]["arguments"] for c in message.tools_calls] == [
        '{"city": "Par',
        "[1, 2]",
        '{"city": "Rome"}',
    ]
    errors = message.metadata["tool_call_errors"]
    assert set(errors) == {"bad", "list"}
    assert "not valid JSON" in errors["bad"]
    assert '{"city": "Par' in errors["bad"]
    assert "must be a JSON object" in errors["list"]
    # the next turn sends valid JSON for the broken ones (servers refuse a history holding
    # invalid arguments; the tool result tells the model what was wrong), the rest as sent
    wire_calls = to_wire([message])[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in wire_calls] == ["{}", "{}", '{"city": "Rome"}']


def test_anthropic_thinking_with_signature_text_and_tool_use() -> None:
    wire = {
        "content": "Let me check the weather.",
        "reasoning_content": "The user wants weather; call the tool.",
        "thinking_blocks": [
            {
                "type": "thinking",
                "thinking": "The user wants weather; call the tool.",
                "signature": "sig_abc==",
            }
        ],
        "tool_calls": [call("toolu_01", "get_weather", '{"city": "Paris"}', index=2)],
    }
    usage = Usage(
        prompt_tokens=180,
        completion_tokens=50,
        total_tokens=230,
        cache_creation_input_tokens=20,
        cache_read_input_tokens=60,
        completion_tokens_details={"reasoning_tokens": 9, "text_tokens": 41},
        prompt_tokens_details={
            "cached_tokens": 60,
            "cache_creation_tokens": 20,
            "text_tokens": 100,
        },
    )
    message = message_from_response(
        response(wire, "tool_calls", model="claude-sonnet-4-5", usage=usage),
        "anthropic",
        "anthropic/claude-sonnet-4-5",
        response_cost=0.001143,
    )
    assert message.content == [
        ReasoningBlock(summary="The user wants weather; call the tool.", signature="sig_abc=="),
        TextBlock(text="Let me check the weather."),
        ToolCallBlock(id="toolu_01", name="get_weather", args={"city": "Paris"}),
    ]
    assert message.reasoning == "The user wants weather; call the tool."
    assert message.usages == TokenUsages(
        prompt_tokens=180,
        completion_tokens=50,
        total_tokens=230,
        reasoning_tokens=9,
        cache_read_input_tokens=60,
        cache_creation_input_tokens=20,
    )
    assert message.metadata["provider"] == "anthropic"
    assert message.metadata["model"] == "claude-sonnet-4-5"
    assert message.metadata["cost"] == 0.001143
    # and the signed thinking goes back to Anthropic on the next turn
    replay = to_wire([message], "anthropic")[0]
    assert replay["thinking_blocks"] == [
        {
            "type": "thinking",
            "thinking": "The user wants weather; call the tool.",
            "signature": "sig_abc==",
        }
    ]
    assert replay["tool_calls"][0]["id"] == "toolu_01"


def test_redacted_thinking_is_kept_and_sent_back_as_it_came() -> None:
    wire = {
        "content": "Done.",
        "thinking_blocks": [
            {"type": "thinking", "thinking": "plain part", "signature": "sig_1"},
            {"type": "redacted_thinking", "data": "ENCRYPTED=="},
        ],
    }
    message = message_from_response(response(wire), "anthropic", "anthropic/claude-sonnet-4-5")
    assert message.content[:2] == [
        ReasoningBlock(summary="plain part", signature="sig_1"),
        ReasoningBlock(summary="", details=["redacted_thinking"], signature="ENCRYPTED=="),
    ]
    restored = Message.model_validate_json(message.model_dump_json())  # survives storage
    assert to_wire([restored], "anthropic")[0]["thinking_blocks"] == [
        {"type": "thinking", "thinking": "plain part", "signature": "sig_1"},
        {"type": "redacted_thinking", "data": "ENCRYPTED=="},
    ]


def test_gemini_thought_and_function_call() -> None:
    wire = {
        "content": "Calling the tool.",
        "reasoning_content": "I should call get_weather.",
        "thinking_blocks": [{"type": "thinking", "thinking": "I should call get_weather."}],
        "tool_calls": [call("call_ae29", "get_weather", '{"city": "Paris"}')],
    }
    usage = Usage(
        prompt_tokens=80,
        completion_tokens=40,
        total_tokens=120,
        completion_tokens_details={"reasoning_tokens": 25, "text_tokens": 15},
        prompt_tokens_details={"cached_tokens": 40},
    )
    message = message_from_response(
        response(wire, "tool_calls", model="gemini-2.5-flash", usage=usage),
        "gemini",
        "gemini/gemini-2.5-flash",
    )
    assert message.content[0] == ReasoningBlock(summary="I should call get_weather.")
    assert message.tool_call_blocks() == [
        ToolCallBlock(id="call_ae29", name="get_weather", args={"city": "Paris"})
    ]
    assert message.usages is not None
    assert message.usages.cache_read_input_tokens == 40
    assert message.usages.reasoning_tokens == 25
    assert message.usages.cache_creation_input_tokens == 0


def test_reasoning_without_thinking_blocks_becomes_one_reasoning_block() -> None:
    message = message_from_response(
        response({"content": "4", "reasoning_content": "2+2 is 4"}), "deepseek", "m"
    )
    assert message.content == [ReasoningBlock(summary="2+2 is 4"), TextBlock(text="4")]
    assert message.reasoning == "2+2 is 4"


def test_a_plain_dict_response_with_content_parts() -> None:
    raw = {
        "id": "r1",
        "model": "some-model",
        "choices": [
            {
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    message = message_from_response(raw, "openai", "fallback-name")
    assert message.text() == "Hello"
    assert message.metadata["model"] == "some-model"
    assert message.usages is not None
    assert message.usages.total_tokens == 5  # computed when the provider leaves it out


def test_raw_never_keeps_a_credential() -> None:
    raw = {
        "id": "r1",
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "api_key": "sk-top-secret",
        "_hidden": {
            "headers": {"Authorization": "Bearer sk-top-secret", "X-Request-Id": "req-1"},
            "items": [{"x-api-key": "k1", "X-Goog-Api-Key": "k2", "keep": 1}],
        },
    }
    message = message_from_response(raw, "openai", "m")
    assert message.raw is not None
    assert "sk-top-secret" not in json.dumps(message.raw)
    assert message.raw["_hidden"] == {
        "headers": {"X-Request-Id": "req-1"},
        "items": [{"keep": 1}],
    }
    assert raw["api_key"] == "sk-top-secret"  # the caller's dict is not changed


def test_a_plain_json_raw_is_sealed_once_and_not_walked_again_by_a_save() -> None:
    answer = response({"content": "hi"}, usage=Usage(prompt_tokens=3, completion_tokens=2))
    message = message_from_response(answer, "openai", "m")
    raw = message.raw
    assert type(raw) is SealedJSON
    assert raw == answer.model_dump()
    with pytest.raises(SealedError):
        raw["choices"][0]["message"]["content"] = "changed"  # type: ignore[index]
    with pytest.raises(SealedError):
        raw["usage"]["prompt_tokens"] = 0  # type: ignore[index]
    mine = copy.deepcopy(raw)  # a copy is the caller's own, plain and changeable
    mine["usage"]["prompt_tokens"] = 0
    assert type(mine) is dict
    assert raw["usage"]["prompt_tokens"] == 3
    if sys.implementation.name == "cpython":  # nothing in it for the cycle collector
        assert not gc.is_tracked(raw)
        assert not gc.is_tracked(raw["choices"][0])
    assert message_problem(message) is None
    # its JSON, kept from when it was made, is what the serializer writes for the plain dict
    plain = message.model_copy(update={"raw": json.loads(json.dumps(raw))})
    assert encode_message(message) == encode_message(plain)
    assert encode_message(message, id_column=True) == encode_message(plain, id_column=True)
    # the message itself is not sealed yet: a node may still change its own answer
    message.metadata["seen"] = True
    assert not is_sealed(message)


@pytest.mark.parametrize(
    "bad",
    [
        {"n": float("nan")},  # a NaN would be stored as null
        {"when": (1, 2)},  # a tuple would read back as a list
        {1: "an int key"},  # would read back as "1"
        {"deep": nested(JSON_DEPTH + 2, {"n": float("inf")})},  # deeper than a seal checks
    ],
)
def test_a_raw_that_is_not_plain_json_is_left_to_the_save_check(bad: dict[Any, Any]) -> None:
    raw = {"id": "r1", "choices": [{"message": {"role": "assistant", "content": "ok"}}], **bad}
    message = message_from_response(raw, "openai", "m")
    assert type(message.raw) is not SealedJSON
    problem = message_problem(message)
    assert problem is not None
    assert problem.path[0] == "raw"


def test_a_sealed_json_deeper_in_a_value_than_its_own_depth_allows_is_walked() -> None:
    made = message_from_response(response({"content": "x"}), "openai", "m").raw
    assert type(made) is SealedJSON
    assert plain_problem(made, 2) is None
    # kept where its own levels would pass the stored depth limit: walked again (and refused)
    too_deep = plain_problem(made, MAX_DEPTH)
    assert too_deep is not None
    assert "deep" in too_deep.reason


def test_credential_keys_are_dropped_every_time_the_same_keys_come_again() -> None:
    for _ in range(3):
        raw = {"id": "r", "choices": [], "meta": {"Authorization": "Bearer s", "ok": 1}}
        message = message_from_response(raw, "openai", "m")
        assert type(message.raw) is SealedJSON
        assert message.raw["meta"] == {"ok": 1}
        row = encode_message(message)
        assert "Bearer" not in row
        assert json.loads(row)["raw"]["meta"] == {"ok": 1}


@pytest.mark.parametrize(
    "key", ["authorization", "Authorization", "api_key", "API-KEY", "proxy-authorization"]
)
def test_scrub_drops_credential_keys_at_any_depth(key: str) -> None:
    assert scrub([{"a": {key: "secret", "b": 1}}]) == [{"a": {"b": 1}}]


def test_scrub_gives_the_same_verdict_for_a_key_seen_before() -> None:
    # each key's verdict is remembered after its first sighting; later responses rely on it
    for _ in range(3):
        response = {1: "int key", "n": 2.5, "ok": None, "list": ["x", {"Api_Key": "s"}]}
        assert scrub(response) == {1: "int key", "n": 2.5, "ok": None, "list": ["x", {}]}
        clean = {"id": "a", "choices": [{"message": {"content": "hi"}}]}
        assert scrub(clean) is clean  # nothing to drop: not copied


# -- pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "args", "error"),
    [
        (None, {}, None),
        ("", {}, None),
        ("   ", {}, None),
        ('{"a": 1}', {"a": 1}, None),
        ('{"a": ', {}, "not valid JSON"),
        ('"just a string"', {}, "must be a JSON object, got str"),
        ("null", {}, "must be a JSON object, got NoneType"),
        # a hostile or broken model: what Python's json would read but nothing can store
        ('{"a": NaN}', {}, "NaN is not a JSON value"),
        ('{"a": -Infinity}', {}, "-Infinity is not a JSON value"),
        ("[" * 100_000 + "]" * 100_000, {}, "not valid JSON (maximum recursion depth"),
        ('{"a": ' + "1" * 5_000 + "}", {}, "not valid JSON (Exceeds the limit"),
    ],
    ids=lambda v: repr(v)[:30],
)
def test_parse_arguments(text: str | None, args: dict[str, Any], error: str | None) -> None:
    parsed, problem = parse_arguments(text)
    assert parsed == args
    if error is None:
        assert problem is None
    else:
        assert problem is not None
        assert error in problem
        assert text is not None
        assert problem.endswith(text[:200])  # what the model sent, or its first 200 characters


def test_token_usages_from_dicts_objects_and_nothing() -> None:
    assert token_usages(None) is None
    assert token_usages({}) is None
    from_dict = token_usages(
        {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6, "image_tokens": 2, "audio_tokens": 1},
            "completion_tokens_details": {"reasoning_tokens": True},  # not a count
        }
    )
    assert from_dict == TokenUsages(
        prompt_tokens=10,
        completion_tokens=4,
        total_tokens=14,
        cache_read_input_tokens=6,
        image_tokens=2,
        audio_tokens=1,
    )
    assert token_usages(Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)) == (
        TokenUsages(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    )


# -- streams --------------------------------------------------------------------------------


def chunk(
    *,
    content: str | None = None,
    role: str | None = None,
    reasoning: str | None = None,
    thinking: list[dict[str, Any]] | None = None,
    calls: list[dict[str, Any]] | None = None,
    finish: str | None = None,
    model: str = "gpt-4o-mini",
) -> ModelResponseStream:
    delta = Delta(
        content=content,
        role=role,
        reasoning_content=reasoning,
        thinking_blocks=thinking,
        tool_calls=calls,
    )
    return ModelResponseStream(
        id="chatcmpl-s",
        model=model,
        choices=[StreamingChoices(index=0, delta=delta, finish_reason=finish)],
    )


def usage_chunk(prompt: int, completion: int, cost: float | None = None) -> ModelResponseStream:
    usage = Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        prompt_tokens_details={"cached_tokens": 1},
    )
    if cost is not None:
        usage.cost = cost  # type: ignore[attr-defined]
    return ModelResponseStream(id="chatcmpl-s", model="gpt-4o-mini", choices=[], usage=usage)


def fragment(index: int, call_id: str | None, name: str | None, args: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def assemble(
    chunks: list[ModelResponseStream], provider: str = "openai"
) -> tuple[list[Message], Message]:
    assembler = StreamAssembler(provider, f"{provider}/the-model")
    deltas = [d for d in map(assembler.add, chunks) if d is not None]
    return deltas, assembler.finish()


def test_text_stream_deltas_then_the_complete_message_with_usage() -> None:
    deltas, final = assemble(
        [
            chunk(content="", role="assistant"),
            chunk(content="Hel"),
            chunk(content="lo"),
            chunk(finish="stop"),
            usage_chunk(3, 2, cost=1.5e-6),
        ]
    )
    assert [(d.text(), d.delta, d.role) for d in deltas] == [
        ("Hel", True, "assistant"),
        ("lo", True, "assistant"),
    ]
    assert {d.message_id for d in deltas} == {final.message_id}
    assert not final.delta
    assert final.content == [TextBlock(text="Hello")]
    assert final.usages == TokenUsages(
        prompt_tokens=3, completion_tokens=2, total_tokens=5, cache_read_input_tokens=1
    )
    assert final.metadata == {
        "provider": "openai",
        "model": "gpt-4o-mini",  # the provider's name for it, as in a whole response
        "finish_reason": "stop",
        "response_id": "chatcmpl-s",
        "cost": 1.5e-6,
    }
    assert final.raw is not None
    assert final.raw["object"] == "chat.completion"
    assert final.raw["choices"][0]["message"]["content"] == "Hello"
    assert final.raw["usage"]["prompt_tokens"] == 3


def test_the_usage_chunk_has_no_choices_and_no_delta() -> None:
    assembler = StreamAssembler("openai", "m")
    assert assembler.add(usage_chunk(7, 1)) is None
    assert assembler.finish().usages == TokenUsages(
        prompt_tokens=7, completion_tokens=1, total_tokens=8, cache_read_input_tokens=1
    )


def test_openai_tool_call_fragments_are_assembled_by_index() -> None:
    deltas, final = assemble(
        [
            chunk(reasoning="thinking about weather..."),
            chunk(calls=[fragment(0, "call_1", "get_weather", "")]),
            chunk(calls=[fragment(0, None, None, '{"ci')]),
            chunk(calls=[fragment(0, None, None, 'ty": "Paris"}')]),
            chunk(calls=[fragment(1, "call_2", "get_time", '{"tz":')]),
            chunk(calls=[fragment(1, None, None, ' "CET"}')]),
            chunk(finish="tool_calls"),
            usage_chunk(40, 25),
        ]
    )
    assert deltas[0].content == [ReasoningBlock(summary="thinking about weather...")]
    assert deltas[0].reasoning == "thinking about weather..."
    assert [d.tools_calls for d in deltas[1:]] == [
        [{"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}],
        [{"index": 0, "id": None, "function": {"name": None, "arguments": '{"ci'}}],
        [{"index": 0, "id": None, "function": {"name": None, "arguments": 'ty": "Paris"}'}}],
        [{"index": 1, "id": "call_2", "function": {"name": "get_time", "arguments": '{"tz":'}}],
        [{"index": 1, "id": None, "function": {"name": None, "arguments": ' "CET"}'}}],
    ]
    assert final.tool_call_blocks() == [
        ToolCallBlock(id="call_1", name="get_weather", args={"city": "Paris"}),
        ToolCallBlock(id="call_2", name="get_time", args={"tz": "CET"}),
    ]
    assert final.tools_calls is not None
    assert [c["function"]["arguments"] for c in final.tools_calls] == [
        '{"city": "Paris"}',
        '{"tz": "CET"}',
    ]
    assert final.reasoning == "thinking about weather..."
    assert final.metadata["finish_reason"] == "tool_calls"
    assert final.text() == ""


def test_gemini_whole_calls_all_at_index_zero_stay_separate() -> None:
    _, final = assemble(
        [
            chunk(calls=[fragment(0, "call_a", "get_weather", '{"city": "Paris"}')]),
            chunk(calls=[fragment(0, "call_b", "get_weather", '{"city": "Rome"}')]),
            chunk(
                calls=[
                    fragment(0, "call_c", "get_time", "{}"),
                    fragment(0, "call_d", "get_time", '{"tz": "UTC"}'),
                ]
            ),
            chunk(finish="tool_calls"),
        ],
        "gemini",
    )
    assert [(c.id, c.name, c.args) for c in final.tool_call_blocks()] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Rome"}),
        ("call_c", "get_time", {}),
        ("call_d", "get_time", {"tz": "UTC"}),
    ]


def test_a_repeated_id_on_every_fragment_is_still_one_call() -> None:
    _, final = assemble(
        [
            chunk(calls=[fragment(0, "call_1", "f", '{"a"')]),
            chunk(calls=[fragment(0, "call_1", None, ": 1}")]),
        ]
    )
    assert final.tool_call_blocks() == [ToolCallBlock(id="call_1", name="f", args={"a": 1})]


def test_anthropic_thinking_signature_arrives_in_its_own_chunk() -> None:
    deltas, final = assemble(
        [
            chunk(
                reasoning="The user wants ",
                thinking=[{"type": "thinking", "thinking": "The user wants ", "index": 0}],
                model="claude-sonnet-4-5",
            ),
            chunk(
                reasoning="weather.",
                thinking=[{"type": "thinking", "thinking": "weather.", "index": 0}],
                model="claude-sonnet-4-5",
            ),
            chunk(thinking=[{"thinking": "", "signature": "sig_xyz==", "index": 0}]),
            chunk(content="Checking."),
            # tool-call deltas re-indexed from 0 although the content block index was 2
            chunk(calls=[fragment(0, "toolu_01", "get_weather", "")]),
            chunk(calls=[fragment(0, None, None, '{"city": ')]),
            chunk(calls=[fragment(0, None, None, '"Paris"}')]),
            chunk(finish="tool_calls"),
        ],
        "anthropic",
    )
    assert [d.reasoning for d in deltas[:2]] == ["The user wants ", "weather."]
    assert deltas[2].text() == "Checking."  # the signature-only chunk shows nothing
    assert final.content == [
        ReasoningBlock(summary="The user wants weather.", signature="sig_xyz=="),
        TextBlock(text="Checking."),
        ToolCallBlock(id="toolu_01", name="get_weather", args={"city": "Paris"}),
    ]
    assert final.reasoning == "The user wants weather."
    assert final.metadata["model"] == "claude-sonnet-4-5"
    replay = to_wire([final], "anthropic")[0]
    assert replay["thinking_blocks"] == [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig_xyz=="}
    ]
    assert replay["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'


def test_streamed_invalid_arguments_and_missing_ids() -> None:
    _, final = assemble(
        [
            chunk(calls=[fragment(0, None, "lookup", '{"q": ')]),
            chunk(calls=[fragment(0, None, None, '"unterminated')]),
        ]
    )
    (block,) = final.tool_call_blocks()
    assert block.args == {}
    assert block.id.startswith("call_")
    assert final.tools_calls is not None
    (wire_call,) = final.tools_calls
    assert wire_call["id"] == block.id
    assert wire_call["function"]["arguments"] == '{"q": "unterminated'
    assert set(final.metadata["tool_call_errors"]) == {block.id}
    assert '{"q": "unterminated' in final.metadata["tool_call_errors"][block.id]


def test_stream_without_usage_has_no_usages() -> None:
    _, final = assemble([chunk(content="hi"), chunk(finish="stop")])
    assert final.usages is None
    assert final.text() == "hi"


def test_an_empty_opening_argument_piece_makes_no_delta() -> None:
    deltas, final = assemble(
        [
            chunk(calls=[fragment(0, "toolu_1", "get_weather", "")]),
            chunk(calls=[fragment(0, None, None, "")]),  # Anthropic's empty first partial_json
            chunk(calls=[fragment(0, None, None, '{"city": "Oslo"}')]),
        ],
        "anthropic",
    )
    assert len(deltas) == 2
    assert [d.tools_calls[0]["function"]["arguments"] for d in deltas if d.tools_calls] == [
        "",
        '{"city": "Oslo"}',
    ]
    assert final.tool_call_blocks()[0].args == {"city": "Oslo"}
