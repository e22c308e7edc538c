"""Message: ids, timestamps, content coercion, factories, readers, and TokenUsages."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tenxgraph.core.state import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    Message,
    ReasoningBlock,
    TextBlock,
    TokenUsages,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tenxgraph.core.state.message_block import RemoteToolCallBlock

# -- ids and timestamps ----------------------------------------------------------------------


def test_generated_message_ids_are_unique_strings() -> None:
    ids = {Message.text_message("x").message_id for _ in range(10_000)}
    ids |= {Message(role="user", content="x").message_id for _ in range(10_000)}
    assert len(ids) == 20_000
    assert all(isinstance(i, str) and i for i in ids)


@pytest.mark.parametrize("given", ["msg-1", "123", 123, 0])
def test_given_message_id_is_kept_with_its_type(given: str | int) -> None:
    for message in (
        Message(message_id=given, role="user", content="x"),
        Message.text_message("x", message_id=given),
        Message.tool_message("x", message_id=given),
        Message.multimodal_message([TextBlock(text="x")], message_id=given),
        Message.image_message(image_url="https://x/i.png", message_id=given),
    ):
        assert message.message_id == given
        assert type(message.message_id) is type(given)


def test_timestamp_is_set_at_creation() -> None:
    before = time.time()
    built = Message(role="user", content="x")
    fast = Message.text_message("x")
    after = time.time()
    for message in (built, fast):
        assert message.timestamp is not None
        assert before <= message.timestamp <= after


# -- content ---------------------------------------------------------------------------------


def test_content_accepts_a_list_of_blocks() -> None:
    blocks = [TextBlock(text="a"), ToolCallBlock(id="c", name="n")]
    assert Message(role="assistant", content=blocks).content == blocks


def test_content_accepts_a_list_of_dicts() -> None:
    message = Message(role="user", content=[{"type": "text", "text": "a"}])
    assert message.content == [TextBlock(text="a")]


def test_content_accepts_a_plain_string_as_one_text_block() -> None:
    message = Message(role="user", content="hello")
    assert message.content == [TextBlock(text="hello")]
    assert message.text() == "hello"


def test_content_accepts_a_single_block() -> None:
    block = ToolResultBlock(call_id="c", output="r")
    assert Message(role="tool", content=block).content == [block]


def test_content_accepts_a_single_block_dict() -> None:
    message = Message(role="user", content={"type": "text", "text": "a"})
    assert message.content == [TextBlock(text="a")]


def test_content_accepts_a_tuple_of_blocks() -> None:
    blocks = (TextBlock(text="a"), TextBlock(text="b"))
    message = Message(role="user", content=blocks)
    assert message.content == list(blocks)
    assert isinstance(message.content, list)


def test_content_rejects_non_block_items() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content=[42])
    assert info.value.errors()[0]["loc"][0] == "content"


def test_unknown_role_is_a_validation_error_naming_role() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="robot", content="x")  # type: ignore[arg-type]
    (error,) = info.value.errors()
    assert error["loc"] == ("role",)


def test_role_is_required() -> None:
    with pytest.raises(ValidationError) as info:
        Message(content="x")  # type: ignore[call-arg]
    assert info.value.errors()[0]["loc"] == ("role",)


def test_message_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError) as info:
        Message(role="user", content="x", sender="me")  # type: ignore[call-arg]
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_message_field_defaults() -> None:
    message = Message(role="user", content="x")
    assert message.delta is False
    assert message.tools_calls is None
    assert message.reasoning is None
    assert message.metadata == {}
    assert message.usages is None
    assert message.raw is None
    assert message.parsed_content is None


def test_metadata_default_is_not_shared() -> None:
    first, second = Message(role="user", content="a"), Message.text_message("b")
    first.metadata["k"] = 1
    assert second.metadata == {}


# -- factories -------------------------------------------------------------------------------


def test_text_message_defaults_to_a_user_message_with_one_text_block() -> None:
    message = Message.text_message("hi")
    assert message.role == "user"
    assert message.content == [TextBlock(text="hi")]


@pytest.mark.parametrize("role", ["user", "assistant", "system", "tool"])
def test_text_message_takes_role_positionally_and_by_keyword(role: Any) -> None:
    assert Message.text_message("hi", role).role == role
    assert Message.text_message("hi", role=role).role == role


def test_text_message_rejects_an_unknown_role() -> None:
    with pytest.raises(ValidationError) as info:
        Message.text_message("hi", "robot")  # type: ignore[arg-type]
    assert info.value.errors()[0]["loc"] == ("role",)


def test_text_message_rejects_an_unhashable_role_with_a_validation_error() -> None:
    with pytest.raises(ValidationError):
        Message.text_message("hi", ["user"])  # type: ignore[arg-type]


def test_tool_message() -> None:
    result = ToolResultBlock(call_id="call_123", output="Sunny, 22C", status="completed")
    message = Message.tool_message([result], message_id="m1", meta={"tool": "weather"})
    assert message.role == "tool"
    assert message.content == [result]
    assert message.message_id == "m1"
    assert message.metadata == {"tool": "weather"}


def test_tool_message_positional_content_and_defaults() -> None:
    message = Message.tool_message("plain output")
    assert message.role == "tool"
    assert message.content == [TextBlock(text="plain output")]
    assert message.metadata == {}
    assert isinstance(message.message_id, str)


def test_image_message_by_url_with_text_puts_text_first() -> None:
    message = Message.image_message(image_url="https://x/cat.png", text="What is this?")
    assert message.role == "user"
    assert [type(b) for b in message.content] == [TextBlock, ImageBlock]
    assert message.content[0] == TextBlock(text="What is this?")
    image = message.content[1]
    assert isinstance(image, ImageBlock)
    assert image.media == MediaRef(kind="url", url="https://x/cat.png", mime_type="image/png")


def test_image_message_by_base64_without_text() -> None:
    message = Message.image_message(
        image_base64="aGVsbG8=", mime_type="image/jpeg", role="assistant"
    )
    assert message.role == "assistant"
    (image,) = message.content
    assert isinstance(image, ImageBlock)
    assert image.media.kind == "data"
    assert image.media.data_base64 == "aGVsbG8="
    assert image.media.mime_type == "image/jpeg"


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"image_url": "https://x/i.png", "image_base64": "aGk="}],
    ids=["neither", "both"],
)
def test_image_message_needs_exactly_one_source(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="image_url or image_base64"):
        Message.image_message(**kwargs)


def test_multimodal_message_takes_blocks_and_dicts() -> None:
    message = Message.multimodal_message(
        [TextBlock(text="a"), {"type": "image", "media": {"url": "https://x/i.png"}}],
        role="assistant",
        message_id=7,
    )
    assert [type(b) for b in message.content] == [TextBlock, ImageBlock]
    assert message.role == "assistant"
    assert message.message_id == 7


def test_multimodal_message_defaults_to_user() -> None:
    assert Message.multimodal_message([TextBlock(text="a")]).role == "user"


@pytest.mark.parametrize(
    ("name", "block_type"),
    [
        ("pic.png", ImageBlock),
        ("sound.wav", AudioBlock),
        ("song.mp3", AudioBlock),
        ("clip.mp4", VideoBlock),
        ("paper.pdf", DocumentBlock),
        ("notes.txt", DocumentBlock),
        ("blob.unknownext", DocumentBlock),
    ],
)
def test_from_file_picks_the_block_from_the_mime_type(
    tmp_path: Path, name: str, block_type: type[BaseModel]
) -> None:
    data = bytes(range(256)) + name.encode()
    path = tmp_path / name
    path.write_bytes(data)
    message = Message.from_file(path)
    assert message.role == "user"
    (block,) = message.content
    assert type(block) is block_type
    media = block.media  # type: ignore[attr-defined]
    assert media.kind == "data"
    assert base64.b64decode(media.data_base64) == data
    assert media.size_bytes == len(data)
    assert media.sha256 == hashlib.sha256(data).hexdigest()
    assert media.filename == name
    assert media.mime_type


def test_from_file_mime_types(tmp_path: Path) -> None:
    (tmp_path / "a.png").write_bytes(b"png")
    (tmp_path / "a.unknownext").write_bytes(b"???")
    png = Message.from_file(tmp_path / "a.png").content[0]
    other = Message.from_file(str(tmp_path / "a.unknownext")).content[0]
    assert png.media.mime_type == "image/png"  # type: ignore[union-attr]
    assert other.media.mime_type == "application/octet-stream"  # type: ignore[union-attr]


def test_from_file_explicit_mime_type_wins(tmp_path: Path) -> None:
    path = tmp_path / "actually_an_image.txt"
    path.write_bytes(b"\x89PNG")
    message = Message.from_file(path, mime_type="image/png")
    (block,) = message.content
    assert isinstance(block, ImageBlock)
    assert block.media.mime_type == "image/png"


def test_from_file_with_text_role_and_id(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(b"%PDF-1.4")
    message = Message.from_file(path, text="Summarise", role="system", message_id="f1")
    assert [type(b) for b in message.content] == [TextBlock, DocumentBlock]
    assert message.content[0] == TextBlock(text="Summarise")
    assert (message.role, message.message_id) == ("system", "f1")


def test_from_file_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "missing.png"
    with pytest.raises(FileNotFoundError) as info:
        Message.from_file(missing)
    assert str(missing) in str(info.value)


def test_from_file_on_a_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="not a regular file") as info:
        Message.from_file(tmp_path)
    assert not isinstance(info.value, FileNotFoundError)


# -- reading ---------------------------------------------------------------------------------


def test_text_joins_text_blocks_and_tool_outputs_and_ignores_other_blocks() -> None:
    message = Message(
        role="assistant",
        content=[
            TextBlock(text="Hello "),
            ImageBlock(media=MediaRef(url="https://x/i.png")),
            ReasoningBlock(summary="IGNORED-reasoning"),
            ToolCallBlock(id="c", name="IGNORED-call", args={"q": "IGNORED"}),
            RemoteToolCallBlock(id="r", name="IGNORED-remote"),
            ToolResultBlock(call_id="c", output="sunny"),
            ErrorBlock(message="IGNORED-error"),
            DataBlock(mime_type="text/plain", data_base64="SUdOT1JFRA=="),
            TextBlock(text=" world"),
        ],
    )
    assert message.text() == "Hello sunny world"


@pytest.mark.parametrize(
    "output", [{"temp": 22, "city": "Zürich"}, [1, "two", {"three": 3}], 3.5, True]
)
def test_text_renders_non_string_tool_outputs_as_json(output: Any) -> None:
    message = Message.tool_message([ToolResultBlock(call_id="c", output=output)])
    assert json.loads(message.text()) == output


def test_text_renders_a_model_tool_output_as_its_json() -> None:
    class Weather(BaseModel):
        temp: int
        city: str

    message = Message.tool_message(
        [ToolResultBlock(call_id="c", output=Weather(temp=1, city="Oslo"))]
    )
    assert json.loads(message.text()) == {"temp": 1, "city": "Oslo"}


def test_text_skips_tool_results_without_output() -> None:
    message = Message.tool_message([ToolResultBlock(call_id="c"), TextBlock(text="done")])
    assert message.text() == "done"


def test_text_of_a_message_without_text_is_empty() -> None:
    assert Message(role="assistant", content=[ToolCallBlock(id="c", name="n")]).text() == ""


def test_tool_call_blocks_and_has_tool_calls() -> None:
    first, second = ToolCallBlock(id="c1", name="a"), ToolCallBlock(id="c2", name="b")
    message = Message(role="assistant", content=[TextBlock(text="t"), first, second])
    assert message.tool_call_blocks() == [first, second]
    assert message.has_tool_calls() is True


def test_has_tool_calls_sees_openai_tools_calls_dicts() -> None:
    message = Message(
        role="assistant",
        content=[],
        tools_calls=[
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )
    assert message.has_tool_calls() is True
    assert message.tool_call_blocks() == []


def test_message_without_tool_calls() -> None:
    assert Message.text_message("hi", "assistant").has_tool_calls() is False
    assert Message(role="assistant", content="x", tools_calls=[]).has_tool_calls() is False
    remote_only = Message(role="assistant", content=[RemoteToolCallBlock(id="r", name="n")])
    assert remote_only.tool_call_blocks() == []


@pytest.mark.parametrize(
    ("as_type", "cls"),
    [
        ("image", ImageBlock),
        ("audio", AudioBlock),
        ("video", VideoBlock),
        ("document", DocumentBlock),
    ],
)
def test_attach_media_appends_the_right_block(as_type: Any, cls: type[BaseModel]) -> None:
    message = Message.text_message("see attached")
    media = MediaRef(kind="file_id", file_id="file-9")
    message.attach_media(media, as_type)
    assert len(message.content) == 2
    assert message.content[0] == TextBlock(text="see attached")
    assert type(message.content[1]) is cls
    assert message.content[1].media == media  # type: ignore[union-attr]


def test_attach_media_rejects_a_bad_type() -> None:
    message = Message.text_message("x")
    with pytest.raises(ValueError, match="as_type"):
        message.attach_media(MediaRef(url="https://x"), "pdf")  # type: ignore[arg-type]
    assert len(message.content) == 1


# -- parsed_content --------------------------------------------------------------------------


class Answer(BaseModel):
    city: str
    temperature: float
    tags: list[str] = []


def test_parsed_content_accepts_a_dict() -> None:
    message = Message(role="assistant", content="x", parsed_content={"city": "Oslo"})
    assert message.parsed_content == {"city": "Oslo"}
    assert message.model_dump()["parsed_content"] == {"city": "Oslo"}


def test_parsed_content_accepts_a_model_and_serializes_its_fields() -> None:
    answer = Answer(city="Oslo", temperature=3.5, tags=["cold"])
    message = Message(role="assistant", content="x", parsed_content=answer)
    assert message.parsed_content is answer
    expected = {"city": "Oslo", "temperature": 3.5, "tags": ["cold"]}
    assert message.model_dump()["parsed_content"] == expected
    assert json.loads(message.model_dump_json())["parsed_content"] == expected
    restored = Message.model_validate_json(message.model_dump_json())
    assert restored.parsed_content == expected


# -- the text_message fast path --------------------------------------------------------------


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class Tag(str):
    pass


def _field_types(model: BaseModel) -> dict[str, type]:
    return {name: type(getattr(model, name)) for name in type(model).model_fields}


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("hello",), {}),
        (("hello", "assistant"), {}),
        (("hello",), {"role": "system", "message_id": "id-1"}),
        (("hello",), {"role": "tool", "message_id": 42}),
        (("",), {}),
        (("hello", Role.ASSISTANT), {}),
        (("hello", Tag("user")), {}),
        ((Tag("tagged text"),), {}),
    ],
)
def test_text_message_equals_its_validated_round_trip_with_the_same_field_types(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    fast = Message.text_message(*args, **kwargs)
    validated = Message.model_validate(fast.model_dump())
    assert fast == validated
    assert _field_types(fast) == _field_types(validated)
    assert [type(b) for b in fast.content] == [type(b) for b in validated.content]
    for fast_block, valid_block in zip(fast.content, validated.content, strict=True):
        assert _field_types(fast_block) == _field_types(valid_block)
    assert fast.model_dump() == validated.model_dump()
    assert fast.model_dump_json() == validated.model_dump_json()


def test_text_message_matches_the_constructor() -> None:
    fast = Message.text_message("hi", "assistant", message_id="m")
    built = Message(message_id="m", role="assistant", content=[TextBlock(text="hi")])
    built.timestamp = fast.timestamp
    assert fast == built


def test_text_message_on_a_subclass_builds_the_subclass() -> None:
    class TracedMessage(Message):
        trace_id: str = "none"

    message = TracedMessage.text_message("hi", "assistant")
    assert type(message) is TracedMessage
    assert message.trace_id == "none"
    assert message.role == "assistant"
    assert message.content == [TextBlock(text="hi")]


# -- TokenUsages -----------------------------------------------------------------------------


def test_token_usages_required_fields() -> None:
    with pytest.raises(ValidationError) as info:
        TokenUsages()  # type: ignore[call-arg]
    missing = {e["loc"][0] for e in info.value.errors() if e["type"] == "missing"}
    assert missing == {"completion_tokens", "prompt_tokens", "total_tokens"}


def test_token_usages_defaults() -> None:
    usage = TokenUsages(completion_tokens=5, prompt_tokens=10, total_tokens=15)
    assert usage.model_dump() == {
        "completion_tokens": 5,
        "prompt_tokens": 10,
        "total_tokens": 15,
        "reasoning_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "image_tokens": 0,
        "audio_tokens": 0,
    }
    assert (
        TokenUsages(
            completion_tokens=1, prompt_tokens=1, total_tokens=2, image_tokens=None
        ).image_tokens
        is None
    )


def test_message_carries_usages_from_a_dict() -> None:
    message = Message(
        role="assistant",
        content="x",
        usages={
            "completion_tokens": 1,
            "prompt_tokens": 2,
            "total_tokens": 3,
            "reasoning_tokens": 4,
        },
    )
    assert message.usages == TokenUsages(
        completion_tokens=1, prompt_tokens=2, total_tokens=3, reasoning_tokens=4
    )


def test_copy_plain_text_is_an_equal_copy_sharing_nothing_mutable() -> None:
    from tenxgraph.core.state.message import copy_plain_text

    original = Message.text_message("hello", "user", "m-1")
    copy = copy_plain_text(original)
    assert copy is not None
    assert copy == original
    assert copy.model_fields_set == original.model_fields_set
    assert copy.content is not original.content
    assert copy.content[0] is not original.content[0]
    assert copy.metadata is not original.metadata
    copy.content[0].text = "changed"  # type: ignore[union-attr]
    copy.metadata["k"] = 1
    assert original.text() == "hello"
    assert original.metadata == {}


def test_copy_plain_text_declines_anything_but_plain_text() -> None:
    from tenxgraph.core.state.message import copy_plain_text

    with_meta = Message.text_message("hi")
    with_meta.metadata["provider"] = "x"
    usage = Message.text_message("hi")
    usage.usages = TokenUsages(prompt_tokens=1, completion_tokens=1, total_tokens=2)
    calls = Message(role="assistant", content=[ToolCallBlock(id="c", name="f")])
    for message in (with_meta, usage, calls):
        assert copy_plain_text(message) is None
