"""What the model reads back from a tool: any return value as JSON-safe output.

A tool may return anything; the run must neither crash on it nor store what cannot be read back.
Ordinary values take one fast pass through pydantic-core (models, dataclasses, dates, sets,
`Decimal`, `UUID`, `Path`, enums, NaN and infinities as the strings "NaN", "Infinity" and
"-Infinity"; other objects by `str()`). Whatever that pass refuses (bytes that are not UTF-8
text, nesting too deep for a stored message to be parsed back, cycles, ints too long to read
back, strings with lone surrogates, objects whose `__str__` raises) goes through `_Walker`,
which never raises: it cuts nesting at `MAX_DEPTH` levels and cycles where they close.

Bytes (also `bytearray`, `memoryview`) that are UTF-8 text become that text; other bytes become
a `MediaRef`-shaped dict with the data in base64 and the type read from its first bytes:
``{"kind": "data", "mime_type": "image/png", "size_bytes": 1234, "data_base64": "iVBOR..."}``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import functools
import math
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import from_json, to_json

# Containers nested deeper than this are cut off, with a note saying so. A stored message may
# nest 100 levels (the checkpointers refuse more), and holds a tool's output 3 levels down.
MAX_DEPTH = 90

# (first bytes, mime type): the formats a tool most often returns as raw bytes
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
)


def tool_output(value: Any) -> Any:
    """`value` as JSON-safe data: str, int, float, bool, None, and lists and str-keyed dicts
    of those (NaN and infinities spelled as strings). Never raises."""
    if type(value) is str:
        return safe_text(value)
    if value is None:
        return None
    try:  # models dump as `model_dump()` would, by field name; nested ones by alias
        text = to_json(
            value,
            by_alias=not isinstance(value, BaseModel),
            inf_nan_mode="strings",
            fallback=_unknown,
        )
        if text.count(b"[") + text.count(b"{") > MAX_DEPTH:  # enough to nest too deep
            _check_depth(text)
        return from_json(text)
    except Exception:  # refused by pydantic-core: the careful way
        return _Walker().walk(value, 0)


def _check_depth(text: bytes) -> None:
    """Raise ValueError if the JSON `text` nests deeper than MAX_DEPTH: parsed inside as many
    more arrays as the parser allows beyond MAX_DEPTH, it fails exactly then."""
    pad = _parser_depth() - MAX_DEPTH
    if pad > 0:
        from_json(b"[" * pad + text + b"]" * pad)
    else:  # a parser this strict refuses what is too deep by itself
        from_json(text)


@functools.cache
def _parser_depth() -> int:
    """The deepest nesting pydantic-core's JSON parser reads (200 today), found once."""

    def parses(depth: int) -> bool:
        try:
            from_json(b"[" * depth + b"]" * depth)
        except ValueError:
            return False
        return True

    low, high = 1, 4096  # parses(low); not parses(high), or the parser has no limit we care for
    if parses(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if parses(middle):
            low = middle
        else:
            high = middle
    return low


def safe_text(text: str) -> str:
    """`text`, or, if it holds lone surrogates (which UTF-8 cannot encode, so no store can
    keep them), `text` with those escaped as ``\\udxxx``."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def describe_exception(exc: BaseException) -> str:
    """``TypeName: message`` for an error text, even when the exception's `__str__` fails."""
    return f"{type(exc).__name__}: {_str_of(exc)}"


def bytes_output(data: bytes) -> Any:
    """Bytes as the model reads them: UTF-8 text as is, anything else as base64 data."""
    try:
        return data.decode("utf-8")  # strict: valid UTF-8 has no lone surrogates
    except UnicodeDecodeError:
        pass
    return {
        "kind": "data",
        "mime_type": sniff_mime_type(data),
        "size_bytes": len(data),
        "data_base64": base64.b64encode(data).decode("ascii"),
    }


def sniff_mime_type(data: bytes) -> str:
    """The mime type of `data` read from its first bytes; ``application/octet-stream`` when
    they match no known format."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE"):
        return "image/webp" if data[8:12] == b"WEBP" else "audio/wav"
    return "application/octet-stream"


def _unknown(value: Any) -> Any:
    """pydantic-core's fallback for a type it does not know: bytes-like views as bytes, any
    other object as its `str()` (when that fails, the walker takes over)."""
    if isinstance(value, memoryview):
        return bytes_output(value.tobytes())
    return str(value)


def _str_of(value: object) -> str:
    try:
        return safe_text(str(value))
    except Exception:
        return f"<{type(value).__name__} object (its str() failed)>"


class _Walker:
    """The careful conversion: one value at a time, with a depth limit and cycle check."""

    def __init__(self) -> None:
        self.path: set[int] = set()  # ids of the containers being walked, to spot cycles

    def walk(self, value: Any, depth: int) -> Any:
        if value is None or isinstance(value, bool | str | int | float):
            return _scalar(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes_output(bytes(value))
        if isinstance(value, enum.Enum):
            return self.walk(value.value, depth)
        if isinstance(value, datetime.date | datetime.time):
            return value.isoformat()
        if isinstance(value, BaseModel):
            return self._container(value.model_dump(), depth, value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {f.name: getattr(value, f.name, None) for f in dataclasses.fields(value)}
            return self._container(fields, depth, value)
        if isinstance(value, Mapping | list | tuple | set | frozenset):
            return self._container(value, depth, value)
        return _str_of(value)

    def _container(self, items: Any, depth: int, original: Any) -> Any:
        if depth >= MAX_DEPTH:
            return f"<{type(original).__name__} nested deeper than {MAX_DEPTH} levels, left out>"
        key = id(original)
        if key in self.path:
            return f"<circular reference to a {type(original).__name__}>"
        self.path.add(key)
        try:
            if isinstance(items, Mapping):
                return {_key(k): self.walk(v, depth + 1) for k, v in items.items()}
            return [self.walk(v, depth + 1) for v in _ordered(items)]
        finally:
            self.path.discard(key)


def _scalar(value: str | int | float | bool | None) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            str(value)  # an int too long for Python to read back from JSON is kept as hex
        except ValueError:
            return hex(value)
    return value


def _key(key: Any) -> str:
    return safe_text(key) if isinstance(key, str) else _str_of(key)


def _ordered(items: Iterable[Any]) -> list[Any]:
    """A set's items sorted when they can be (its own order changes from run to run)."""
    if not isinstance(items, set | frozenset):
        return list(items)
    try:
        return sorted(items)
    except TypeError:
        return list(items)


__all__ = [
    "MAX_DEPTH",
    "bytes_output",
    "describe_exception",
    "safe_text",
    "sniff_mime_type",
    "tool_output",
]
