"""to_wire: our Messages -> the OpenAI chat messages litellm takes for every provider."""

from __future__ import annotations

import json

import pytest

from tenxgraph.core.llm import to_wire
from tenxgraph.core.llm.wire_out import UNANSWERED_CALL
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DocumentBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)


def assistant(*blocks: object, tools_calls: list[dict[str, object]] | None = None) -> Message:
    return Message(role="assistant", content=list(blocks), tools_calls=tools_calls)


def openai_call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- plain and multimodal content -----------------------------------------------------------


def test_text_only_messages_become_plain_strings() -> None:
    wire = to_wire(
        [Message.text_message("Be brief.", "system"), Message.text_message("Hi there", "user")]
    )
    assert wire == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi there"},
    ]


def test_image_by_url_and_inline_become_image_url_parts() -> None:
    by_url = Message.image_message(image_url="https://img.example/cat.png", text="What is it?")
    inline = Message.image_message(image_base64="iVBORw0K", mime_type="image/png")
    wire = to_wire([by_url, inline])
    assert wire[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is it?"},
            {"type": "image_url", "image_url": {"url": "https://img.example/cat.png"}},
        ],
    }
    assert wire[1]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}}
    ]


def test_documents_become_file_parts_or_their_text() -> None:
    inline = DocumentBlock(
        media=MediaRef(
            kind="data", data_base64="JVBERi0x", mime_type="application/pdf", filename="a.pdf"
        )
    )
    uploaded = DocumentBlock(media=MediaRef(kind="file_id", file_id="file-123"))
    fetched = DocumentBlock(media=MediaRef(kind="url", url="https://x.test/d.pdf"), text="Body")
    by_url = DocumentBlock(media=MediaRef(kind="url", url="https://x.test/e.pdf"))
    message = Message.multimodal_message([TextBlock(text="Read these"), inline, uploaded, fetched])
    parts = to_wire([message])[0]["content"]
    assert parts == [
        {"type": "text", "text": "Read these"},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBERi0x", "filename": "a.pdf"},
        },
        {"type": "file", "file": {"file_id": "file-123"}},
        {"type": "text", "text": "Body"},
    ]
    # a document known only by its URL: a file reference for Anthropic (litellm's convention
    # for a URL document), which OpenAI chat cannot take (see test_wire_media.py)
    assert to_wire([Message.multimodal_message([by_url])], "anthropic")[0]["content"] == [
        {"type": "file", "file": {"file_id": "https://x.test/e.pdf"}}
    ]


@pytest.mark.parametrize(
    ("mime", "fmt"),
    [("audio/wav", "wav"), ("audio/x-wav", "wav"), ("audio/mpeg", "mp3"), ("audio/mp3", "mp3")],
)
def test_audio_becomes_input_audio_with_an_openai_format_name(mime: str, fmt: str) -> None:
    clip = AudioBlock(media=MediaRef(kind="data", data_base64="UklGRg==", mime_type=mime))
    parts = to_wire([Message.multimodal_message([TextBlock(text="Transcribe"), clip])])[0][
        "content"
    ]
    assert parts[1] == {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": fmt}}


# -- assistant turns and tool results ---------------------------------------------------------


def test_assistant_tool_calls_keep_the_argument_string_the_model_sent() -> None:
    raw = '{"city":  "Paris" }'  # odd spacing: echoed back byte for byte
    broken = '{"city": "Par'
    message = assistant(
        TextBlock(text="Checking."),
        ToolCallBlock(id="call_1", name="weather", args={"city": "Paris"}),
        ToolCallBlock(id="call_2", name="weather", args={}),
        tools_calls=[
            openai_call("call_1", "weather", raw),
            openai_call("call_2", "weather", broken),
        ],
    )
    assert to_wire([message])[:1] == [  # then a stand-in result: see the pairing tests
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                openai_call("call_1", "weather", raw),
                openai_call("call_2", "weather", broken),
            ],
        }
    ]


def test_assistant_tool_calls_without_raw_arguments_are_serialised_from_args() -> None:
    message = assistant(ToolCallBlock(id="c1", name="add", args={"a": 1, "b": [2, 3]}))
    wire = to_wire([message])[0]
    assert wire["content"] is None
    (call,) = wire["tool_calls"]
    assert call["id"] == "c1"
    assert call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 1, "b": [2, 3]}


def test_openai_format_tools_calls_alone_are_sent_with_string_arguments() -> None:
    message = Message(
        role="assistant",
        content=[],
        tools_calls=[{"id": "c9", "function": {"name": "f", "arguments": {"x": 1}}}],
    )
    wire = to_wire([message])[0]
    assert wire["tool_calls"] == [openai_call("c9", "f", '{"x": 1}')]


def test_an_empty_assistant_turn_has_empty_string_content() -> None:
    assert to_wire([assistant()]) == [{"role": "assistant", "content": ""}]


def test_each_tool_result_becomes_its_own_tool_message_paired_by_id() -> None:
    call_message = assistant(
        ToolCallBlock(id="a", name="one", args={}),
        ToolCallBlock(id="b", name="two", args={}),
        ToolCallBlock(id="c", name="three", args={}),
    )
    results = Message.tool_message(
        [
            ToolResultBlock(call_id="a", output={"temp": 21, "unit": "°C"}),
            ToolResultBlock(call_id="b", output="plain text"),
            ToolResultBlock(call_id="c", output=None, is_error=True),
        ]
    )
    wire = to_wire([call_message, results])
    assert [w["id"] for w in wire[0]["tool_calls"]] == ["a", "b", "c"]
    assert wire[1:] == [
        {"role": "tool", "tool_call_id": "a", "content": '{"temp": 21, "unit": "°C"}'},
        {"role": "tool", "tool_call_id": "b", "content": "plain text"},
        {"role": "tool", "tool_call_id": "c", "content": ""},
    ]


def test_a_tool_message_without_result_blocks_answers_the_call_in_its_metadata() -> None:
    call = assistant(ToolCallBlock(id="call_7", name="f", args={}))
    message = Message.tool_message("42", meta={"tool_call_id": "call_7"})
    assert to_wire([call, message])[1:] == [
        {"role": "tool", "tool_call_id": "call_7", "content": "42"}
    ]


def test_a_call_left_without_result_gets_a_stand_in_error_before_the_next_turn() -> None:
    """A crash between the model's call and the tool's result leaves a dangling call; the
    provider would reject the history, so the call is answered with an error it can read."""
    history = [
        Message.text_message("refund order 7"),
        assistant(
            ToolCallBlock(id="a", name="refund", args={}), ToolCallBlock(id="b", name="x", args={})
        ),
        Message.tool_message([ToolResultBlock(call_id="b", output="ok")]),
        Message.text_message("hello again?"),
    ]
    wire = to_wire(history)
    assert [(w["role"], w.get("tool_call_id")) for w in wire] == [
        ("user", None),
        ("assistant", None),
        ("tool", "b"),
        ("tool", "a"),
        ("user", None),
    ]
    assert wire[3]["content"] == UNANSWERED_CALL
    assert [m.role for m in history] == ["user", "assistant", "tool", "user"]  # untouched


def test_a_call_at_the_end_of_the_history_is_answered_too() -> None:
    wire = to_wire(
        [Message.text_message("go"), assistant(ToolCallBlock(id="z", name="f", args={}))]
    )
    assert wire[-1] == {"role": "tool", "tool_call_id": "z", "content": UNANSWERED_CALL}


def test_a_tool_result_that_answers_no_call_is_not_sent() -> None:
    orphan = Message.tool_message([ToolResultBlock(call_id="ghost", output="?")])
    late = Message.tool_message([ToolResultBlock(call_id="a", output="late")])
    history = [
        Message.text_message("hi"),
        orphan,
        assistant(ToolCallBlock(id="a", name="f", args={})),
        Message.text_message("next"),
        late,  # answers a call of an earlier turn: out of place
    ]
    wire = to_wire(history)
    assert [(w["role"], w.get("tool_call_id")) for w in wire] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("user", None),
    ]
    assert wire[2]["content"] == UNANSWERED_CALL


# -- thinking, deltas, remote calls -----------------------------------------------------------


def thinking_turn() -> Message:
    return assistant(
        ReasoningBlock(summary="weigh the options", signature="sig=="),
        ReasoningBlock(summary="unsigned, not replayable"),
        TextBlock(text="Answer"),
    )


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "vertex_ai"])
def test_signed_thinking_is_replayed_to_providers_that_need_it(provider: str) -> None:
    (wire,) = to_wire([thinking_turn()], provider)
    assert wire["content"] == "Answer"
    assert wire["thinking_blocks"] == [
        {"type": "thinking", "thinking": "weigh the options", "signature": "sig=="}
    ]


@pytest.mark.parametrize("provider", ["openai", "gemini", None])
def test_thinking_is_not_sent_to_other_providers(provider: str | None) -> None:
    (wire,) = to_wire([thinking_turn()], provider)
    assert wire == {"role": "assistant", "content": "Answer"}


def test_delta_messages_and_remote_tool_calls_are_skipped() -> None:
    remote = assistant(RemoteToolCallBlock(id="r1", name="web_search", args={"q": "x"}))
    delta = Message.text_message("partial", "assistant", delta=True)
    kept = Message.text_message("kept", "user")
    assert to_wire([delta, remote, kept]) == [{"role": "user", "content": "kept"}]


def test_to_wire_does_not_change_the_messages() -> None:
    message = assistant(
        ToolCallBlock(id="c1", name="f", args={"x": 1}),
        tools_calls=[{"id": "c1", "function": {"name": "f", "arguments": {"x": 1}}}],
    )
    before = message.model_dump()
    to_wire([message], "anthropic")
    assert message.model_dump() == before


def test_arguments_known_to_be_invalid_go_back_as_an_empty_object() -> None:
    # cut short by max_tokens: wire_in kept the raw text and recorded the parse error
    message = assistant(
        ToolCallBlock(id="cut", name="weather", args={}),
        ToolCallBlock(id="fine", name="weather", args={"city": "Rome"}),
        tools_calls=[
            openai_call("cut", "weather", '{"city": "Par'),
            openai_call("fine", "weather", '{"city":  "Rome"}'),
        ],
    )
    message.metadata["tool_call_errors"] = {"cut": "arguments are not valid JSON (...)"}
    calls = to_wire([message])[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", '{"city":  "Rome"}']
    assert message.tools_calls is not None  # the stored message keeps what the model sent
    assert message.tools_calls[0]["function"]["arguments"] == '{"city": "Par'


def test_hand_built_calls_whose_arguments_do_not_parse_go_out_as_an_empty_object() -> None:
    message = Message(
        role="assistant",
        content=[],
        tools_calls=[
            openai_call("c1", "f", '{"x": '),
            openai_call("c2", "f", "[1, 2]"),
            openai_call("c3", "f", '{"x": 1}'),
        ],
    )
    calls = to_wire([message])[0]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ["{}", "{}", '{"x": 1}']


def test_media_in_an_assistant_turn_is_named_not_dropped() -> None:
    # providers take text only in assistant turns: an image a model made earlier is replaced
    # by a note saying so, never silently left out
    from tenxgraph.core.state.message_block import ImageBlock, MediaRef, TextBlock

    image = ImageBlock(media=MediaRef(kind="url", url="https://images.example/made.png"))
    answer = Message(role="assistant", content=[TextBlock(text="Here it is."), image])
    for provider in ("openai", "anthropic", "gemini"):
        (sent,) = to_wire([answer], provider)
        assert sent["role"] == "assistant"
        assert (
            sent["content"]
            == "Here it is.\n[1 image part(s) of this earlier answer are not shown again]"
        )
