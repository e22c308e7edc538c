"""tool_output: any tool return value as JSON-safe data the model reads and a store keeps."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import enum
import math
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tenxgraph.core.graph.tool_output import (
    MAX_DEPTH,
    bytes_output,
    describe_exception,
    safe_text,
    sniff_mime_type,
    tool_output,
)
from tests._helpers import strict_json


def nested(levels: int) -> list[Any]:
    """`levels` lists, each inside the one before."""
    root: list[Any] = []
    node = root
    for _ in range(levels - 1):
        node.append([])
        node = node[0]
    return root


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0] if value else None
    return depth


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Blob:
    name: str
    data: bytes


class Upload(BaseModel):
    name: str
    data: bytes


class Loud:
    def __str__(self) -> str:
        return "LOUD"


class Mute:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    ("value", "output"),
    [
        ("text", "text"),
        (None, None),
        (3, 3),
        (1.5, 1.5),
        ({"a": [1, True, None]}, {"a": [1, True, None]}),
        ((1, "x"), [1, "x"]),
        ({3, 1, 2}, [1, 2, 3]),
        (datetime.date(2024, 5, 1), "2024-05-01"),
        (decimal.Decimal("9.99"), "9.99"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
        (Path("/srv/a.txt"), "/srv/a.txt"),
        (Colour.RED, "red"),
        (Loud(), "LOUD"),
        ({1: "one", None: "none"}, {"1": "one", "None": "none"}),
        (b"plain text", "plain text"),
        (float("nan"), "NaN"),
        ([math.inf, -math.inf], ["Infinity", "-Infinity"]),
    ],
    ids=[
        "str",
        "none",
        "int",
        "float",
        "dict",
        "tuple",
        "set",
        "date",
        "decimal",
        "uuid",
        "path",
        "enum",
        "object",
        "keys",
        "utf8-bytes",
        "nan",
        "infinities",
    ],
)
def test_values_become_json_safe_data(value: Any, output: Any) -> None:
    got = tool_output(value)
    assert got == output
    assert strict_json(got) == got


def test_binary_bytes_become_base64_data_with_a_mime_type() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00"
    assert tool_output(png) == {
        "kind": "data",
        "mime_type": "image/png",
        "size_bytes": len(png),
        "data_base64": base64.b64encode(png).decode(),
    }
    assert tool_output(bytearray(b"\xff\x00"))["mime_type"] == "application/octet-stream"
    assert tool_output(memoryview(b"\xff\x00"))["data_base64"] == "/wA="
    assert tool_output(memoryview(b"ok")) == "ok"


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav"),
        (b"%PDF-1.7", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b\x08", "application/gzip"),
        (b"\x00\x01\x02", "application/octet-stream"),
    ],
)
def test_the_mime_type_is_read_from_the_first_bytes(head: bytes, mime: str) -> None:
    assert sniff_mime_type(head) == mime


def test_bytes_nested_in_containers_models_and_dataclasses_are_kept_readable() -> None:
    got = tool_output(
        {"blob": Blob("a", b"\xff"), "upload": Upload(name="b", data=b"\xfe"), "ok": b"hi"}
    )
    assert got["blob"]["data"]["data_base64"] == "/w=="
    assert got["upload"] == {
        "name": "b",
        "data": {
            "kind": "data",
            "mime_type": "application/octet-stream",
            "size_bytes": 1,
            "data_base64": "/g==",
        },
    }
    assert got["ok"] == "hi"
    assert strict_json(got) == got


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 195, 5000])
def test_nesting_deeper_than_the_limit_is_cut_with_a_note(levels: int) -> None:
    got = tool_output(nested(levels))
    assert depth_of(got) == MAX_DEPTH
    note = got
    for _ in range(MAX_DEPTH - 1):
        note = note[0]
    assert note == [f"<list nested deeper than {MAX_DEPTH} levels, left out>"]


def test_nesting_up_to_the_limit_is_kept_whole() -> None:
    assert tool_output(nested(MAX_DEPTH)) == nested(MAX_DEPTH)


def test_a_cycle_is_cut_where_it_closes() -> None:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    assert tool_output(loop) == {"name": "loop", "self": "<circular reference to a dict>"}


def test_the_same_object_twice_is_not_a_cycle() -> None:
    shared = [1]
    shared_twice = {"a": shared, "b": shared, "bad": b"\xff"}  # the careful way
    got = tool_output(shared_twice)
    assert got["a"] == got["b"] == [1]


def test_an_int_too_long_to_read_back_is_kept_as_hex() -> None:
    huge = 10**5000
    got = tool_output({"n": huge, "small": 7})
    assert got["small"] == 7
    assert int(got["n"], 16) == huge


def test_lone_surrogates_are_escaped() -> None:
    assert safe_text("caf\udce9") == "caf\\udce9"
    assert safe_text("café") == "café"
    assert tool_output("caf\udce9") == "caf\\udce9"
    assert tool_output({"k\ud800": ["\udfff"]}) == {"k\\ud800": ["\\udfff"]}
    assert strict_json(tool_output(["x\ud800"])) == ["x\\ud800"]


def test_an_object_whose_str_fails_is_named_by_its_type() -> None:
    assert tool_output(Mute()) == "<Mute object (its str() failed)>"
    assert tool_output({"m": Mute()}) == {"m": "<Mute object (its str() failed)>"}


def test_describe_exception_survives_a_failing_str() -> None:
    class Odd(Exception):
        def __str__(self) -> str:
            raise ValueError("nope")

    assert describe_exception(ValueError("bad")) == "ValueError: bad"
    assert describe_exception(Odd()) == "Odd: <Odd object (its str() failed)>"


def test_bytes_output_keeps_utf8_text_as_text() -> None:
    assert bytes_output("naïve".encode()) == "naïve"
    assert bytes_output(b"\xed\xa0\x80")["kind"] == "data"  # an encoded surrogate is not text
