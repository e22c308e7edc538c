"""How an MCP `CallToolResult` becomes a tool's answer (tenxgraph.mcp.result_value), for the
kinds of content the test server does not send."""

from __future__ import annotations

import base64
import subprocess
import sys
from typing import Any

from mcp import types

from tenxgraph.core.state import Message
from tenxgraph.mcp import result_value

WAV = base64.b64encode(b"RIFF....WAVEfmt ").decode("ascii")


def result(*content: Any, structured: Any = None, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=list(content), structured_content=structured, is_error=is_error
    )


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def test_several_texts_are_joined() -> None:
    assert result_value(result(text("a"), text("b"))).message == "a\n\nb"


def test_structured_content_with_text_that_says_the_same_is_the_data() -> None:
    answer = result_value(result(text('{"a": 1}'), structured={"a": 1}))
    assert answer.message == {"a": 1}


def test_a_wrapped_plain_return_is_unwrapped() -> None:
    assert result_value(result(text("7"), structured={"result": 7})).message == 7
    assert result_value(result(text("hi"), structured={"result": "hi"})).message == "hi"


def test_text_and_structured_content_that_differ_are_both_kept() -> None:
    answer = result_value(result(text("two items"), structured={"items": [1, 2]}))
    assert answer.message == {"text": "two items", "structured_content": {"items": [1, 2]}}


def test_structured_content_alone() -> None:
    assert result_value(result(structured={"a": [1]})).message == {"a": [1]}


def test_audio_resources_and_links_become_blocks_of_tenxgraphs_shape() -> None:
    answer = result_value(
        result(
            types.AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///b.bin", blob="AAE=", mime_type="application/x-thing"
                ),
            ),
            types.ResourceLink(type="resource_link", uri="file:///c", name="c"),
            structured={"n": 4},
        )
    )
    blocks = answer.message["content"]
    assert answer.message["structured_content"] == {"n": 4}
    assert blocks == [
        {
            "type": "audio",
            "media": {
                "kind": "data",
                "data_base64": WAV,
                "mime_type": "audio/wav",
                "size_bytes": 16,
            },
        },
        {"type": "text", "text": "inside"},
        {"type": "data", "mime_type": "application/x-thing", "data_base64": "AAE="},
        {"type": "text", "text": "c: file:///c"},
    ]
    # each one parses back as the content block it claims to be
    parsed = Message(role="user", content=blocks).content
    assert [b.type for b in parsed] == ["audio", "text", "data", "text"]


def test_an_error_result_says_so_even_without_text() -> None:
    answer = result_value(result(is_error=True))
    assert answer.is_error
    assert answer.message == "Error: the MCP server reported an error"


def test_without_the_sdk_the_import_error_says_what_to_install() -> None:
    code = "import sys; sys.modules['mcp'] = None\nimport tenxgraph.mcp\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert 'pip install "tenxgraph[mcp]"' in proc.stderr
