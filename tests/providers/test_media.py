"""Media on the wire: every content block, for every provider folder, as the request BODY the
provider receives (litellm's translation included), or an `UnsupportedContentError` raised before
any request is sent. Also tool results carrying images (and documents).

The endpoints are the providers' own (respx, as in test_transcripts.py). For Gemini litellm
fetches a media URL and sends its bytes inline; that fetch is replaced here by a stub
(`litellm` checks the host's DNS before any HTTP client is involved, so respx cannot serve it).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import base64
import json
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import ModelError, UnsupportedContentError
from tenxgraph.core.graph.tool_calls import ToolCall
from tenxgraph.core.graph.tool_results import result_outcome
from tenxgraph.core.llm import LiteLLMClient, ModelRequest, to_wire
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DataBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from tests.providers.test_transcripts import Provider, providers

# tiny payloads: a 1x1 PNG, an empty 8 kHz WAV, a one-line PDF
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
PDF = "JVBERi0xLjAKdHJhaWxlcjw8Pj4KJSVFT0YK"
FETCHED = "ZmV0Y2hlZA=="  # what the stub "downloads" for any URL
CSV = "YSxiCjEsMgo="  # "a,b\n1,2\n"
FILES = "https://generativelanguage.googleapis.com/v1beta/files/"

PROVIDERS = {p.name: p for p in providers()}
OPENAI_LIKE = ("openai", "local_openai_compatible")


def media(kind: str, value: str, mime: str, **more: Any) -> MediaRef:
    field = {"url": "url", "file_id": "file_id", "data": "data_base64"}[kind]
    return MediaRef(kind=kind, mime_type=mime, **{field: value}, **more)  # type: ignore[arg-type]


BLOCKS: dict[str, Any] = {
    "image_url": ImageBlock(media=media("url", "https://media.example/cat.png", "image/png")),
    "image_data": ImageBlock(media=media("data", PNG, "image/png")),
    "image_file_id": ImageBlock(media=media("file_id", "files/img1", "image/png")),
    "audio_data": AudioBlock(media=media("data", WAV, "audio/wav")),
    "audio_data_ogg": AudioBlock(media=media("data", FETCHED, "audio/ogg")),
    "audio_url": AudioBlock(media=media("url", "https://media.example/talk.mp3", "audio/mpeg")),
    "audio_file_id": AudioBlock(media=media("file_id", "files/aud1", "audio/mpeg")),
    "video_data": VideoBlock(media=media("data", FETCHED, "video/mp4")),
    "video_url": VideoBlock(media=media("url", "https://media.example/clip.mp4", "video/mp4")),
    "video_file_id": VideoBlock(media=media("file_id", "files/vid1", "video/mp4")),
    "document_data": DocumentBlock(
        media=media("data", PDF, "application/pdf", filename="tiny.pdf")
    ),
    "document_url": DocumentBlock(
        media=media("url", "https://media.example/paper.pdf", "application/pdf")
    ),
    "document_url_with_text": DocumentBlock(
        media=media("url", "https://media.example/paper.pdf", "application/pdf"),
        text="The paper's text.",
    ),
    "document_file_id": DocumentBlock(media=media("file_id", "file-doc1", "application/pdf")),
    "data_csv": DataBlock(mime_type="text/csv", data_base64=CSV),
    "data_zip": DataBlock(mime_type="application/zip", data_base64="UEsDBA=="),
}

ERROR = "error"  # the block is refused before the request

OPENAI: dict[str, Any] = {
    "image_url": {"type": "image_url", "image_url": {"url": "https://media.example/cat.png"}},
    "image_data": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    "image_file_id": ERROR,
    "audio_data": {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
    "audio_data_ogg": ERROR,
    "audio_url": ERROR,
    "audio_file_id": ERROR,
    "video_data": ERROR,
    "video_url": ERROR,
    "video_file_id": ERROR,
    "document_data": {
        "type": "file",
        "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "tiny.pdf"},
    },
    "document_url": ERROR,
    "document_url_with_text": {"type": "text", "text": "The paper's text."},
    "document_file_id": {"type": "file", "file": {"file_id": "file-doc1"}},
    "data_csv": {"type": "text", "text": "a,b\n1,2\n"},
    "data_zip": ERROR,
}
ANTHROPIC: dict[str, Any] = {
    "image_url": {
        "type": "image",
        "source": {"type": "url", "url": "https://media.example/cat.png"},
    },
    "image_data": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    },
    "image_file_id": {"type": "image", "source": {"type": "file", "file_id": "files/img1"}},
    "audio_data": ERROR,
    "audio_data_ogg": ERROR,
    "audio_url": ERROR,
    "audio_file_id": ERROR,
    "video_data": ERROR,
    "video_url": ERROR,
    "video_file_id": ERROR,
    "document_data": {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    },
    "document_url": {
        "type": "document",
        "source": {"type": "url", "url": "https://media.example/paper.pdf"},
    },
    "document_url_with_text": {
        "type": "document",
        "source": {"type": "url", "url": "https://media.example/paper.pdf"},
    },
    "document_file_id": {"type": "document", "source": {"type": "file", "file_id": "file-doc1"}},
    "data_csv": {"type": "text", "text": "a,b\n1,2\n"},
    "data_zip": ERROR,
}


def inline(data: str, mime: str) -> dict[str, Any]:
    return {"inline_data": {"data": data, "mime_type": mime}}


def by_uri(uri: str, mime: str) -> dict[str, Any]:
    return {"file_data": {"file_uri": uri, "mime_type": mime}}


GEMINI: dict[str, Any] = {
    "image_url": inline(FETCHED, "image/png"),
    "image_data": inline(PNG, "image/png"),
    "image_file_id": by_uri(FILES + "img1", "image/png"),
    "audio_data": inline(WAV, "audio/wav"),
    "audio_data_ogg": inline(FETCHED, "audio/ogg"),
    "audio_url": inline(FETCHED, "audio/mpeg"),
    "audio_file_id": by_uri(FILES + "aud1", "audio/mpeg"),
    "video_data": inline(FETCHED, "video/mp4"),
    "video_url": inline(FETCHED, "video/mp4"),
    "video_file_id": by_uri(FILES + "vid1", "video/mp4"),
    "document_data": inline(PDF, "application/pdf"),
    "document_url": inline(FETCHED, "application/pdf"),
    "document_url_with_text": inline(FETCHED, "application/pdf"),
    "document_file_id": by_uri(FILES + "file-doc1", "application/pdf"),
    "data_csv": {"text": "a,b\n1,2\n"},
    "data_zip": ERROR,
}
EXPECTED = {
    "openai": OPENAI,
    "local_openai_compatible": OPENAI,
    "anthropic": ANTHROPIC,
    "gemini": GEMINI,
}
CASES = [(p, kind) for p in PROVIDERS for kind in BLOCKS]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    from litellm.litellm_core_utils.prompt_templates import image_handling

    async def fetched(url: str, **_: Any) -> str:
        mime = {"png": "image/png", "mp3": "audio/mpeg", "mp4": "video/mp4"}.get(
            url.rsplit(".", 1)[-1], "application/pdf"
        )
        return f"data:{mime};base64,{FETCHED}"

    monkeypatch.setattr(image_handling, "async_convert_url_to_base64", fetched)


def answer_json(provider: Provider) -> dict[str, Any]:
    """The provider's plain answer, from its transcript folder."""
    data: dict[str, Any] = provider.case("plain").data["response"]["json"]
    return data


async def sent(
    provider: Provider, messages: list[Message], tools: list[dict[str, Any]] | None = None
) -> tuple[dict[str, Any] | None, BaseException | None]:
    """The request body the provider received (None if none), and the error raised."""
    request = ModelRequest(
        model=provider.model,
        messages=messages,
        tools=tools or [],
        settings=provider.call_settings(),
    )
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = provider.route(mock).mock(
            return_value=httpx.Response(200, json=answer_json(provider))
        )
        try:
            await LiteLLMClient().acomplete(request)
        except ModelError as exc:
            assert route.call_count == 0, "an unsupported block must fail before the request"
            return None, exc
    assert route.call_count == 1
    return json.loads(route.calls.last.request.content), None


def user_parts(name: str, body: dict[str, Any]) -> list[Any]:
    if name == "gemini":
        parts: list[Any] = body["contents"][0]["parts"]
        return parts
    content: list[Any] = body["messages"][0]["content"]
    return content


def assert_subset(expected: Any, actual: Any, where: str = "part") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {actual!r}"
        for key, value in expected.items():
            assert key in actual, f"{where}: no {key!r} in {actual!r}"
            assert_subset(value, actual[key], f"{where}.{key}")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


@pytest.mark.parametrize(("name", "kind"), CASES, ids=[f"{p}-{k}" for p, k in CASES])
async def test_each_block_reaches_the_provider_or_fails_before_the_request(
    name: str, kind: str
) -> None:
    provider = PROVIDERS[name]
    message = Message.multimodal_message([TextBlock(text="Look at this."), BLOCKS[kind]])
    body, error = await sent(provider, [message])
    want = EXPECTED[name][kind]
    if want == ERROR:
        assert isinstance(error, UnsupportedContentError), error
        check_refusal(error, provider, BLOCKS[kind])
        return
    assert error is None, error
    assert body is not None
    parts = user_parts(name, body)
    assert len(parts) == 2, parts  # the text and the block: nothing dropped, nothing added
    assert_subset(want, parts[1])


def check_refusal(error: UnsupportedContentError, provider: Provider, block: Any) -> None:
    assert error.error_code == "MODEL_CONTENT_001"
    assert error.provider == provider.wire
    assert error.model == provider.model
    assert error.status_code is None
    assert error.block_type == block.type
    kind = block.media.kind if block.media is not None else "data"
    assert error.media_kind == kind
    assert f"{block.type} block with kind={kind!r}" in error.message
    assert {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}[
        provider.wire
    ] in error.message
    assert "Nothing was sent" in error.message
    assert any(w in error.message for w in ("give", "send", "convert", "use ")), error.message


def test_openai_audio_refusal_says_what_to_give() -> None:
    with pytest.raises(UnsupportedContentError) as caught:
        to_wire([Message.multimodal_message([BLOCKS["audio_url"]])], "openai", "openai/gpt-4o")
    assert "OpenAI chat" in caught.value.message
    assert "audio only as inline data (wav or mp3): give the bytes" in caught.value.message
    assert "media store" in caught.value.message


def test_anthropic_audio_refusal_suggests_the_transcript() -> None:
    with pytest.raises(UnsupportedContentError, match="transcript"):
        to_wire([Message.multimodal_message([BLOCKS["audio_data"]])], "anthropic")


# -- tool results with media -------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "screenshot",
            "description": "A screenshot of the page",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def tool_turns(output: Any) -> list[Message]:
    call = Message(
        role="assistant",
        content=[ToolCallBlock(id="call_1", name="screenshot", args={})],
    )
    result = ToolResultBlock(call_id="call_1", output=output, status="completed")
    return [
        Message.text_message("What does the page show?"),
        call,
        Message.tool_message([result], meta={"tool_call_id": "call_1"}),
    ]


IMAGE = ImageBlock(media=media("data", PNG, "image/png"))
PDF_DOC = DocumentBlock(media=media("data", PDF, "application/pdf", filename="tiny.pdf"))


def output_of(value: Any) -> Any:
    """What the tool node stores for a tool that returned `value`."""
    return result_outcome(ToolCall("call_1", "screenshot", {}), value).message.content[0].output


RETURNED = {
    "image_block": IMAGE,
    "message_with_image": Message.multimodal_message(
        [TextBlock(text="The login page."), IMAGE], role="assistant"
    ),
}


def test_a_tool_returning_an_image_keeps_it_as_an_image() -> None:
    for value in RETURNED.values():
        output = output_of(value)
        text = json.dumps(output)
        wire = to_wire(tool_turns(output), "anthropic")
        content = wire[2]["content"]
        assert isinstance(content, list)
        assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}} in (
            content
        )
        assert PNG in text  # stored as the block, in the tool message
    # the text of a returned Message is kept beside its image
    assert output_of(RETURNED["message_with_image"])[0] == {
        "type": "text",
        "text": "The login page.",
    }


@pytest.mark.parametrize("returned", sorted(RETURNED))
@pytest.mark.parametrize("name", sorted(PROVIDERS))
async def test_tool_result_image_on_the_wire(name: str, returned: str) -> None:
    provider = PROVIDERS[name]
    body, error = await sent(provider, tool_turns(output_of(RETURNED[returned])), TOOLS)
    assert error is None, error
    assert body is not None
    has_text = returned == "message_with_image"
    if provider.wire == "openai":
        # tool messages hold only text: the image follows in a user message
        tool, follow = body["messages"][2], body["messages"][3]
        assert tool["role"] == "tool"
        assert tool["tool_call_id"] == "call_1"
        assert isinstance(tool["content"], str)
        assert PNG not in tool["content"]
        assert ("The login page." in tool["content"]) == has_text
        assert "next user message" in tool["content"]
        assert follow["role"] == "user"
        assert follow["content"][1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{PNG}"},
        }
        assert len(body["messages"]) == 4
    elif provider.wire == "anthropic":
        [result] = body["messages"][2]["content"]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == "call_1"
        image = {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": PNG},
        }
        text = [{"type": "text", "text": "The login page."}] if has_text else []
        assert result["content"] == [*text, image]
    else:  # gemini 2.5: the function response, then the image as a part of the same turn
        parts = body["contents"][2]["parts"]
        response = parts[0]["function_response"]
        assert response["name"] == "screenshot"
        assert response["response"] == {"content": "The login page." if has_text else ""}
        assert parts[1] == inline(PNG, "image/png")
        assert PNG not in json.dumps(response)


async def test_tool_result_document_reaches_anthropic_as_a_document() -> None:
    output = output_of(Message.multimodal_message([TextBlock(text="The report."), PDF_DOC]))
    body, error = await sent(PROVIDERS["anthropic"], tool_turns(output), TOOLS)
    assert error is None
    assert body is not None
    [result] = body["messages"][2]["content"]
    assert result["content"][1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
    }


async def test_an_mcp_image_result_keeps_its_structured_content_as_text() -> None:
    image = IMAGE.model_dump(mode="json", exclude_none=True)
    output = {"structured_content": {"width": 1}, "content": [image]}
    wire = to_wire(tool_turns(output), "anthropic")
    assert wire[2]["content"] == [
        {"type": "text", "text": '{"width": 1}'},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


def test_several_tool_results_with_images_share_one_follow_up_message_for_openai() -> None:
    call = Message(
        role="assistant",
        content=[
            ToolCallBlock(id="call_1", name="screenshot", args={}),
            ToolCallBlock(id="call_2", name="screenshot", args={}),
        ],
    )
    image = IMAGE.model_dump(mode="json", exclude_none=True)
    results = Message.tool_message(
        [
            ToolResultBlock(call_id="call_1", output=image),
            ToolResultBlock(call_id="call_2", output=[image]),
        ]
    )
    wire = to_wire([Message.text_message("Go"), call, results], "openai")
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool", "user"]
    assert [p["type"] for p in wire[4]["content"]] == ["text", "image_url", "text", "image_url"]
    assert "call_1" in wire[4]["content"][0]["text"]
    assert "call_2" in wire[4]["content"][2]["text"]


@pytest.mark.parametrize(
    ("provider", "kind"),
    [("anthropic", "audio_data"), ("openai", "video_data"), ("gemini", "image_file_id")],
)
def test_media_a_provider_cannot_take_in_a_tool_result_fail_before_the_request(
    provider: str, kind: str
) -> None:
    output = [BLOCKS[kind].model_dump(mode="json", exclude_none=True)]
    with pytest.raises(UnsupportedContentError) as caught:
        to_wire(tool_turns(output), provider)
    assert caught.value.context["where"] == "tool result"


def test_plain_data_that_only_looks_like_a_block_stays_json_text() -> None:
    output = [{"type": "image", "media": "not a media ref"}]  # not a valid block
    wire = to_wire(tool_turns(output), "anthropic")
    assert wire[2]["content"] == json.dumps(output)


def test_media_blocks_beside_a_tool_result_are_part_of_it() -> None:
    turns = tool_turns("The login page.")
    turns[2] = Message.tool_message([*turns[2].content, IMAGE], meta={"tool_call_id": "call_1"})
    wire = to_wire(turns, "anthropic")
    assert wire[2]["content"] == [
        {"type": "text", "text": "The login page."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]
    bare = Message.tool_message([TextBlock(text="Here."), IMAGE], meta={"tool_call_id": "call_1"})
    wire = to_wire([*turns[:2], bare], "openai")
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "user"]
    assert wire[3]["content"][1]["type"] == "image_url"


def test_claude_on_vertex_follows_anthropic_rules() -> None:
    message = Message.multimodal_message([BLOCKS["audio_data"]])
    with pytest.raises(UnsupportedContentError, match="Anthropic"):
        to_wire([message], "vertex_ai", "vertex_ai/claude-sonnet-4-5")
    assert to_wire([message], "vertex_ai", "vertex_ai/gemini-2.5-flash")[0]["content"][0] == {
        "type": "file",
        "file": {"file_data": f"data:audio/wav;base64,{WAV}", "format": "audio/wav"},
    }


# -- URLs Gemini would download: tenxgraph downloads them, through its safe fetcher -----------


def gemini_image_turn(url: str) -> dict[str, Any]:
    image = ImageBlock(media=MediaRef(kind="url", url=url, mime_type="image/png"))
    return {"messages": [Message.multimodal_message([TextBlock(text="Look."), image])]}


async def test_an_agent_fetches_url_media_for_gemini_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from litellm.litellm_core_utils.prompt_templates import image_handling

    from tenxgraph.core.graph import Agent
    from tenxgraph.storage.media import fetch
    from tests.core.graph._support import linear

    asked: list[str] = []

    async def fetch_media(url: str, *, policy: Any = None) -> fetch.Fetched:
        asked.append(url)
        return fetch.Fetched(base64.b64decode(PNG), "image/png", url)

    async def litellm_download(url: str, **_: Any) -> str:
        raise AssertionError(f"litellm downloaded {url} itself")

    monkeypatch.setattr(fetch, "fetch_media", fetch_media)
    monkeypatch.setattr(image_handling, "async_convert_url_to_base64", litellm_download)
    gemini = PROVIDERS["gemini"]
    app = linear(("agent", Agent(gemini.model, **gemini.call_settings())))
    with respx.mock(using="httpx") as mock:
        route = gemini.route(mock).mock(return_value=httpx.Response(200, json=answer_json(gemini)))
        await app.ainvoke(gemini_image_turn("https://images.example/cat.png"))
    assert asked == ["https://images.example/cat.png"]
    part = user_parts("gemini", json.loads(route.calls.last.request.content))[1]
    assert part["inline_data"] == {"mime_type": "image/png", "data": PNG}


async def test_a_url_gemini_would_download_from_a_private_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenxgraph.core.exceptions import UnsafeURLError
    from tenxgraph.core.graph import Agent
    from tenxgraph.storage.media import fetch
    from tests.core.graph._support import linear

    async def metadata_service(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    monkeypatch.setattr(fetch, "resolve", metadata_service)
    gemini = PROVIDERS["gemini"]
    app = linear(("agent", Agent(gemini.model, **gemini.call_settings())))
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        route = gemini.route(mock).mock(return_value=httpx.Response(200, json=answer_json(gemini)))
        with pytest.raises(UnsafeURLError, match=r"169\.254\.169\.254"):
            await app.ainvoke(gemini_image_turn("https://innocent.example/latest/meta-data"))
    assert route.call_count == 0
