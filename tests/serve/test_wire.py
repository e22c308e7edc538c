"""tenxgraph messages and state <-> LangGraph/LangChain wire dicts (`tenxgraph.serve.wire`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.message import Message, TokenUsages
from tenxgraph.core.state.message_block import (
    AnnotationBlock,
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.serve.wire import WireError, chunk_to_wire, message_to_wire, values_to_wire
from tenxgraph.serve.wire_in import input_from_wire, message_from_wire, messages_from_wire

PNG_URL = "https://example.com/cat.png"


def _assistant(**fields: Any) -> Message:
    return Message(message_id="m1", role="assistant", **fields)


def _same(a: Message, b: Message) -> None:
    """Equal in everything the wire must keep."""
    assert (a.role, a.text(), a.message_id) == (b.role, b.text(), b.message_id)
    assert [c.model_dump() for c in a.tool_call_blocks()] == [
        c.model_dump() for c in b.tool_call_blocks()
    ]
    assert a.reasoning == b.reasoning
    # an image goes out as image_url, which holds the reference (a URL) and nothing else
    refs = [
        (x.media.kind, x.media.url, x.media.data_base64, x.media.file_id)
        for m in (a, b)
        for x in m.content
        if isinstance(x, ImageBlock)
    ]
    assert refs[: len(refs) // 2] == refs[len(refs) // 2 :]
    for kind in (ReasoningBlock, AudioBlock, VideoBlock, DocumentBlock):
        assert [x for x in a.content if isinstance(x, kind)] == [
            x for x in b.content if isinstance(x, kind)
        ]
    calls_a = [x.call_id for x in a.content if isinstance(x, ToolResultBlock)]
    assert calls_a == [x.call_id for x in b.content if isinstance(x, ToolResultBlock)]


# -- out ------------------------------------------------------------------------------------


def test_text_message_goes_out_as_a_langchain_human_message() -> None:
    wire = message_to_wire(Message.text_message("hi", message_id="u1"))
    assert wire == {
        "type": "human",
        "content": "hi",
        "id": "u1",
        "name": None,
        "additional_kwargs": {},
        "response_metadata": {},
    }
    assert json.loads(json.dumps(wire)) == wire


def test_roles_map_to_langchain_types() -> None:
    types = {r: message_to_wire(Message.text_message("x", role=r))["type"] for r in ("system",)}
    assert types == {"system": "system"}
    assert message_to_wire(Message.text_message("x", role="assistant"))["type"] == "ai"


def test_assistant_message_carries_tool_calls_usage_and_reasoning() -> None:
    message = _assistant(
        content=[
            ReasoningBlock(summary="think", signature="sig"),
            TextBlock(text="calling"),
            ToolCallBlock(id="c1", name="weather", args={"city": "Paris"}),
        ],
        reasoning="think",
        usages=TokenUsages(
            prompt_tokens=3, completion_tokens=4, total_tokens=7, reasoning_tokens=2
        ),
        metadata={"model": "gpt-x", "finish_reason": "tool_calls"},
    )
    wire = message_to_wire(message)
    assert wire["type"] == "ai"
    assert wire["content"] == [
        {"type": "reasoning", "reasoning": "think", "extras": {"signature": "sig"}},
        {"type": "text", "text": "calling"},
    ]
    assert wire["additional_kwargs"] == {"reasoning_content": "think"}
    assert wire["tool_calls"] == [
        {"name": "weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    ]
    assert wire["invalid_tool_calls"] == []
    assert wire["usage_metadata"] == {
        "input_tokens": 3,
        "output_tokens": 4,
        "total_tokens": 7,
        "output_token_details": {"reasoning": 2},
    }
    assert wire["response_metadata"] == {"model_name": "gpt-x", "finish_reason": "tool_calls"}


def test_hand_built_openai_tools_calls_go_out_valid_and_invalid() -> None:
    message = _assistant(
        content=[],
        tools_calls=[
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{oops"}},
        ],
    )
    wire = message_to_wire(message)
    assert wire["tool_calls"] == [{"name": "f", "args": {"x": 1}, "id": "a", "type": "tool_call"}]
    assert wire["invalid_tool_calls"][0]["args"] == "{oops"
    assert wire["invalid_tool_calls"][0]["type"] == "invalid_tool_call"


def test_remote_tool_call_goes_out_as_a_tool_call() -> None:
    wire = message_to_wire(_assistant(content=[RemoteToolCallBlock(id="r", name="ui", args={})]))
    assert wire["tool_calls"] == [{"name": "ui", "args": {}, "id": "r", "type": "tool_call"}]


def test_tool_message_carries_call_id_status_and_output_text() -> None:
    ok = Message.tool_message([ToolResultBlock(call_id="c1", output={"t": 22})], message_id="t1")
    wire = message_to_wire(ok)
    assert (wire["type"], wire["content"], wire["tool_call_id"], wire["status"]) == (
        "tool",
        '{"t": 22}',
        "c1",
        "success",
    )
    failed = Message.tool_message([ToolResultBlock(call_id="c2", output="boom", is_error=True)])
    assert message_to_wire(failed)["status"] == "error"


def test_images_go_out_as_image_url_parts() -> None:
    message = Message(
        role="user",
        content=[
            TextBlock(text="look"),
            ImageBlock(media=MediaRef(url=PNG_URL)),
            ImageBlock(media=MediaRef(kind="data", data_base64="AAAA", mime_type="image/jpeg")),
            ImageBlock(media=MediaRef(kind="file_id", file_id="f-1", mime_type="image/png")),
        ],
    )
    assert message_to_wire(message)["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
        {"type": "image", "file_id": "f-1", "mime_type": "image/png", "extras": {}},
    ]


def test_other_media_go_out_as_v1_standard_blocks() -> None:
    pdf = MediaRef(kind="data", data_base64="JVBE", mime_type="application/pdf", filename="a.pdf")
    message = Message(
        role="user",
        content=[
            AudioBlock(
                media=MediaRef(url="https://x/a.mp3", mime_type="audio/mpeg"), transcript="hi"
            ),
            VideoBlock(media=MediaRef(kind="file_id", file_id="v-1")),
            DocumentBlock(media=pdf),
            DataBlock(mime_type="application/zip", data_base64="UEs="),
        ],
    )
    assert message_to_wire(message)["content"] == [
        {
            "type": "audio",
            "url": "https://x/a.mp3",
            "mime_type": "audio/mpeg",
            "extras": {"transcript": "hi"},
        },
        {"type": "video", "file_id": "v-1", "extras": {}},
        {
            "type": "file",
            "base64": "JVBE",
            "mime_type": "application/pdf",
            "extras": {"filename": "a.pdf"},
        },
        {"type": "file", "base64": "UEs=", "mime_type": "application/zip"},
    ]


def test_blocks_without_a_langchain_shape_go_out_as_non_standard() -> None:
    error = ErrorBlock(message="refused", code="x")
    wire = message_to_wire(_assistant(content=[error, AnnotationBlock()]))
    assert wire["content"][0] == {"type": "non_standard", "value": error.model_dump(mode="json")}
    assert wire["content"][1]["value"]["type"] == "annotation"
    assert message_from_wire(wire).content == [error, AnnotationBlock()]


def test_langchain_core_accepts_what_goes_out() -> None:
    messages = pytest.importorskip("langchain_core.messages")
    call = ToolCallBlock(id="c1", name="f", args={"a": 1})
    for message in (
        Message.text_message("hi"),
        _assistant(
            content=[TextBlock(text="x"), call],
            usages=TokenUsages(prompt_tokens=1, completion_tokens=1, total_tokens=2),
        ),
        Message.tool_message([ToolResultBlock(call_id="c1", output="ok")]),
    ):
        wire = message_to_wire(message)
        (parsed,) = messages.messages_from_dict([{"type": wire["type"], "data": wire}])
        assert parsed.id == wire["id"]
        assert parsed.content == wire["content"]


# -- chunks ---------------------------------------------------------------------------------


def test_text_chunk_is_an_ai_message_chunk_with_the_final_id() -> None:
    delta = Message.text_message("Hel", role="assistant", message_id="m9", delta=True)
    wire = chunk_to_wire(delta)
    assert wire["type"] == "AIMessageChunk"
    assert (wire["content"], wire["id"], wire["tool_call_chunks"]) == ("Hel", "m9", [])


def test_tool_call_fragments_become_tool_call_chunks() -> None:
    delta = _assistant(
        content=[],
        delta=True,
        reasoning="hmm",
        tools_calls=[
            {"index": 0, "id": "c1", "function": {"name": "f", "arguments": '{"a"'}},
            {"index": 1, "id": None, "function": {"name": None, "arguments": ": 1}"}},
        ],
    )
    wire = chunk_to_wire(delta)
    assert wire["content"] == ""
    assert wire["additional_kwargs"] == {"reasoning_content": "hmm"}
    assert wire["tool_call_chunks"] == [
        {"name": "f", "args": '{"a"', "id": "c1", "index": 0, "type": "tool_call_chunk"},
        {"name": None, "args": ": 1}", "id": None, "index": 1, "type": "tool_call_chunk"},
    ]


def test_whole_tool_calls_in_a_delta_become_chunks() -> None:
    delta = _assistant(content=[ToolCallBlock(id="c", name="f", args={"a": 1})], delta=True)
    assert chunk_to_wire(delta)["tool_call_chunks"] == [
        {"name": "f", "args": '{"a": 1}', "id": "c", "index": 0, "type": "tool_call_chunk"}
    ]


def test_chunks_add_up_in_langchain() -> None:
    messages = pytest.importorskip("langchain_core.messages")
    fragments = ['{"ci', 'ty": "Paris"}']
    total = None
    for i, piece in enumerate(fragments):
        call = {"index": 0, "id": "c1" if i == 0 else None, "function": {"arguments": piece}}
        call["function"]["name"] = "weather" if i == 0 else None
        wire = chunk_to_wire(
            _assistant(content=[TextBlock(text=str(i))], delta=True, tools_calls=[call])
        )
        wire.pop("type")
        chunk = messages.AIMessageChunk(**wire)
        total = chunk if total is None else total + chunk
    assert total is not None
    assert total.content == "01"
    assert total.tool_calls == [
        {"name": "weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    ]


# -- in -------------------------------------------------------------------------------------


def test_bare_string_is_a_user_message() -> None:
    message = message_from_wire("hello")
    assert (message.role, message.text()) == ("user", "hello")


@pytest.mark.parametrize(
    ("given", "role"),
    [
        ("human", "user"),
        ("user", "user"),
        ("ai", "assistant"),
        ("assistant", "assistant"),
        ("system", "system"),
        ("developer", "system"),
    ],
)
def test_type_or_role_names_the_role(given: str, role: str) -> None:
    assert message_from_wire({"type": given, "content": "x"}).role == role
    assert message_from_wire({"role": given, "content": "x"}).role == role


def test_wire_id_becomes_message_id() -> None:
    assert message_from_wire({"type": "human", "content": "x", "id": "abc"}).message_id == "abc"
    assert message_from_wire({"type": "human", "content": "x"}).message_id


def test_langchain_content_parts_come_in() -> None:
    message = message_from_wire(
        {
            "type": "human",
            "content": [
                "plain ",
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": PNG_URL}},
                {"type": "image_url", "image_url": "data:image/png;base64,AAAA"},
                {"type": "image", "base64": "BBBB", "mime_type": "image/gif"},
                {"type": "file", "url": "https://x/doc.pdf", "mime_type": "application/pdf"},
                {"type": "audio", "file_id": "a-1"},
            ],
        }
    )
    assert message.text() == "plain look"
    assert message.content[2] == ImageBlock(media=MediaRef(url=PNG_URL))
    assert message.content[3] == ImageBlock(
        media=MediaRef(kind="data", data_base64="AAAA", mime_type="image/png")
    )
    assert message.content[4] == ImageBlock(
        media=MediaRef(kind="data", data_base64="BBBB", mime_type="image/gif")
    )
    assert message.content[5] == DocumentBlock(
        media=MediaRef(url="https://x/doc.pdf", mime_type="application/pdf")
    )
    assert message.content[6] == AudioBlock(media=MediaRef(kind="file_id", file_id="a-1"))


def test_agent_chat_ui_v0_data_blocks_come_in() -> None:
    message = message_from_wire(
        {
            "type": "human",
            "content": [
                {
                    "type": "image",
                    "source_type": "base64",
                    "mime_type": "image/png",
                    "data": "AAAA",
                    "metadata": {"name": "cat.png"},
                },
                {
                    "type": "file",
                    "source_type": "base64",
                    "mime_type": "application/pdf",
                    "data": "JVBE",
                    "metadata": {"filename": "a.pdf"},
                },
                {"type": "image", "source_type": "url", "url": PNG_URL},
            ],
        }
    )
    image, pdf, linked = message.content
    assert image == ImageBlock(
        media=MediaRef(kind="data", data_base64="AAAA", mime_type="image/png", filename="cat.png")
    )
    assert pdf == DocumentBlock(
        media=MediaRef(
            kind="data", data_base64="JVBE", mime_type="application/pdf", filename="a.pdf"
        )
    )
    assert linked == ImageBlock(media=MediaRef(url=PNG_URL))


def test_ai_message_tool_calls_come_in_in_both_shapes() -> None:
    message = message_from_wire(
        {
            "type": "ai",
            "content": None,
            "tool_calls": [
                {"name": "f", "args": {"a": 1}, "id": "c1", "type": "tool_call"},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
            "additional_kwargs": {"reasoning_content": "why"},
            "usage_metadata": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
        }
    )
    assert message.tool_call_blocks() == [
        ToolCallBlock(id="c1", name="f", args={"a": 1}),
        ToolCallBlock(id="c2", name="g", args={}),
    ]
    assert message.reasoning == "why"
    assert message.usages == TokenUsages(prompt_tokens=1, completion_tokens=2, total_tokens=3)


def test_tool_message_comes_in_as_a_tool_result() -> None:
    message = message_from_wire(
        {"type": "tool", "content": "fail", "tool_call_id": "c1", "status": "error"}
    )
    assert message.content == [
        ToolResultBlock(call_id="c1", output="fail", is_error=True, status="failed")
    ]


def test_own_message_dump_comes_in_unchanged() -> None:
    original = Message(
        role="user",
        content=[TextBlock(text="hi"), ImageBlock(media=MediaRef(url=PNG_URL), alt_text="cat")],
        metadata={"k": 1},
    )
    assert message_from_wire(original.model_dump(mode="json")) == original


def test_own_blocks_in_a_role_dict_come_in() -> None:
    part = {"type": "image", "media": {"kind": "url", "url": PNG_URL}}
    message = message_from_wire({"role": "user", "content": [part]})
    assert message.content == [ImageBlock(media=MediaRef(url=PNG_URL))]


def test_messages_from_wire_takes_a_list_or_one() -> None:
    assert [m.text() for m in messages_from_wire(["a", {"type": "ai", "content": "b"}])] == [
        "a",
        "b",
    ]
    assert [m.text() for m in messages_from_wire({"type": "human", "content": "c"})] == ["c"]
    assert [m.text() for m in messages_from_wire("d")] == ["d"]


# -- round trip -----------------------------------------------------------------------------


def _every_block_message() -> list[Message]:
    pdf = MediaRef(kind="data", data_base64="JVBE", mime_type="application/pdf", filename="a.pdf")
    return [
        Message.text_message("hi", message_id="u1"),
        Message(
            message_id="u2",
            role="user",
            content=[
                TextBlock(text="see"),
                ImageBlock(media=MediaRef(url=PNG_URL, mime_type="image/png")),
                ImageBlock(media=MediaRef(kind="data", data_base64="AAAA", mime_type="image/png")),
                AudioBlock(media=MediaRef(kind="file_id", file_id="a1"), transcript="hey"),
                VideoBlock(media=MediaRef(url="https://x/v.mp4", mime_type="video/mp4")),
                DocumentBlock(media=pdf, pages=[1, 2]),
            ],
        ),
        _assistant(
            content=[
                ReasoningBlock(summary="hmm", signature="s"),
                TextBlock(text="ok"),
                ToolCallBlock(id="c1", name="f", args={"a": [1, {"b": None}]}),
            ],
            reasoning="hmm",
        ),
        Message.tool_message([ToolResultBlock(call_id="c1", output="done")], message_id="t1"),
        Message.text_message("be brief", role="system", message_id="s1"),
    ]


@pytest.mark.parametrize("message", _every_block_message(), ids=lambda m: m.role)
def test_round_trip_keeps_what_langchain_can_hold(message: Message) -> None:
    wire = json.loads(json.dumps(message_to_wire(message)))
    _same(message_from_wire(wire), message)


@given(text=st.text(), role=st.sampled_from(["user", "assistant", "system"]))
def test_round_trip_keeps_any_text(text: str, role: Any) -> None:
    message = Message.text_message(text, role=role, message_id="x")
    back = message_from_wire(message_to_wire(message))
    assert (back.role, back.text(), back.message_id) == (role, text, "x")


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "path", "accepted"),
    [
        (42, "message:", "a string"),
        ({"content": "x"}, "message.type: missing", "human, user, ai"),
        ({"type": "remove", "content": "x"}, "message.type: 'remove'", "human, user, ai"),
        ({"role": "robot", "content": "x"}, "message.role: 'robot'", "assistant"),
        ({"type": "human", "content": 3}, "message.content:", "a string or parts"),
        ({"type": "human", "content": [3]}, "message.content[0]:", "an object or a string"),
        ({"type": "human", "content": [{"type": "x"}]}, "message.content[0].type", "image_url"),
        ({"type": "human", "content": [{"type": "text"}]}, "message.content[0].text", "a string"),
        (
            {
                "type": "human",
                "content": [{"type": "image_url", "image_url": {"url": "file:///etc"}}],
            },
            "message.content[0].image_url.url",
            "http(s) URL",
        ),
        (
            {"type": "human", "content": [{"type": "image_url", "image_url": "data:image/png,AA"}]},
            "message.content[0]: a data: URL must be base64",
            "data:<mime>;base64",
        ),
        ({"type": "human", "content": [{"type": "file"}]}, "message.content[0]: 0 sources", "url"),
        (
            {"type": "human", "content": [{"type": "image", "url": PNG_URL, "file_id": "f"}]},
            "message.content[0]: 2 sources",
            "base64",
        ),
        (
            {"type": "human", "content": [{"type": "image", "source_type": "s3"}]},
            "message.content[0].source_type",
            "url, base64, id",
        ),
        ({"type": "human", "content": "x", "id": [1]}, "message.id", "a string"),
        ({"type": "ai", "content": "", "tool_calls": {}}, "message.tool_calls:", "'args'"),
        ({"type": "ai", "content": "", "tool_calls": [1]}, "message.tool_calls[0]:", "'name'"),
        (
            {"type": "ai", "content": "", "tool_calls": [{"args": {}, "id": "c"}]},
            "message.tool_calls[0].name",
            "'function'",
        ),
        (
            {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": [], "id": "c"}]},
            "message.tool_calls[0].args",
            "a JSON object",
        ),
        (
            {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {}}]},
            "message.tool_calls[0].id",
            "non-empty string",
        ),
        (
            {
                "type": "ai",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}],
            },
            "message.tool_calls[0].function.arguments",
            "a JSON object",
        ),
        ({"type": "ai", "content": "", "usage_metadata": 5}, "message.usage_metadata", "usage"),
        (
            {"type": "ai", "content": "", "usage_metadata": {"input_tokens": 1}},
            "message.usage_metadata.completion_tokens",
            "TokenUsages",
        ),
        ({"type": "tool", "content": "x"}, "message.tool_call_id: missing", "tool call"),
        (
            {"type": "tool", "content": "x", "tool_call_id": "c", "status": "meh"},
            "message.status",
            "success, error",
        ),
        ({"message_id": "m", "role": "user"}, "message.content", "Message dump"),
        (
            {"type": "human", "content": [{"type": "non_standard", "value": {"type": "error"}}]},
            "message.content[0].value.error.message",
            "tenxgraph content block",
        ),
    ],
)
def test_bad_messages_say_where_and_what_is_accepted(data: Any, path: str, accepted: str) -> None:
    with pytest.raises(WireError) as caught:
        message_from_wire(data)
    text = str(caught.value)
    assert text.startswith(path), text
    assert "accepted:" in text
    assert accepted in text.split("accepted:", 1)[1], text


def test_error_path_counts_from_the_given_where() -> None:
    with pytest.raises(WireError, match=r"^input\.messages\[1\]\.type: 'bogus'"):
        input_from_wire({"messages": ["ok", {"type": "bogus"}]})


def test_messages_from_wire_refuses_a_number() -> None:
    with pytest.raises(WireError, match=r"^messages: expected a list of messages, got int"):
        messages_from_wire(7)


# -- input ----------------------------------------------------------------------------------


def test_input_none_is_none() -> None:
    assert input_from_wire(None) is None


def test_input_messages_and_state_fields() -> None:
    converted = input_from_wire({"messages": [{"type": "human", "content": "hi"}], "city": "Paris"})
    assert converted is not None
    assert [m.text() for m in converted["messages"]] == ["hi"]
    assert isinstance(converted["messages"][0], Message)
    assert converted["state"] == {"city": "Paris"}


def test_input_without_extra_fields_has_no_state_key() -> None:
    converted = input_from_wire({"messages": "hi"})
    assert converted is not None
    assert set(converted) == {"messages"}


@pytest.mark.parametrize("data", [[1], "hi", 3])
def test_input_must_be_an_object(data: Any) -> None:
    with pytest.raises(WireError, match=r"^input: expected an object.*accepted: null, or an"):
        input_from_wire(data)


@pytest.mark.parametrize("field", ["context", "context_summary", "execution_meta"])
def test_input_cannot_set_runtime_fields(field: str) -> None:
    with pytest.raises(WireError, match=rf"^input\.{field}: .*accepted: 'messages' for new turns"):
        input_from_wire({field: []})


# -- values ---------------------------------------------------------------------------------


class TripState(AgentState):
    city: str = ""
    stops: list[int] = []


def test_values_hold_messages_and_custom_fields_but_not_bookkeeping() -> None:
    state = TripState(
        city="Paris", stops=[1, 2], context=[Message.text_message("hi", message_id="a")]
    )
    values = values_to_wire(state)
    assert values == {
        "messages": [message_to_wire(state.context[0])],
        "context_summary": None,
        "city": "Paris",
        "stops": [1, 2],
    }
    assert json.loads(json.dumps(values)) == values


def test_values_refuse_a_field_named_messages() -> None:
    class Clash(AgentState):
        messages: list[str] = []

    with pytest.raises(WireError, match=r"^Clash\.messages: .*accepted: any other field name"):
        values_to_wire(Clash())
