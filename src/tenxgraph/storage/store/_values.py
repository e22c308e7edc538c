"""What a store keeps, checked before anything is written: namespaces, keys and values.

A namespace is a tuple of labels; a label is a non-empty str without "/" (the SQL stores join
the labels with "/", and a prefix search is a range of that text, so a label holding "/"
would make ("a/b",) and ("a", "b") the same namespace), without control characters or
unpaired surrogates. A key is a non-empty str without control characters or surrogates.

A value is a dict of JSON's own types (str keys, lists, str, int, bool, None, finite floats),
stored as JSON text: a value that would not read back equal (NaN, a set, a tuple, a datetime,
a model, a non-str key, a lone surrogate) is refused with the path to it, and nothing is
written.
"""

from __future__ import annotations

import json
from typing import Any

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state._depth import PathPart, format_path
from tenxgraph.storage.checkpointer._json_values import forbidden_character, plain_problem

Namespace = tuple[str, ...]

#: the separator of a namespace's labels in stored text; never inside a label
SEPARATOR = "/"
#: the longest label or key accepted, in characters
MAX_LABEL_LENGTH = 255
#: the most labels a namespace may have
MAX_DEPTH = 32
#: the most UTF-8 bytes a namespace's stored text and its key may take together: PostgreSQL
#: refuses an index entry over about 2,700 bytes, and every store accepts the same items
MAX_KEY_BYTES = 2048


def valid_namespace(namespace: object, *, allow_empty: bool = False) -> Namespace:
    """`namespace` as a tuple of str labels, or a `ValueError` saying what is wrong. A list
    is taken as its tuple; the empty tuple only where `allow_empty` (a search of everything)."""
    if isinstance(namespace, list):
        namespace = tuple(namespace)
    if not isinstance(namespace, tuple):
        raise ValueError(
            f"a namespace is a tuple of str labels, e.g. ('users', 'u-42'), not "
            f"{type(namespace).__name__} {namespace!r:.60}"
        )
    if not namespace and not allow_empty:
        raise ValueError("a namespace needs at least one label, e.g. ('users', 'u-42')")
    if len(namespace) > MAX_DEPTH:
        raise ValueError(f"a namespace has at most {MAX_DEPTH} labels, got {len(namespace)}")
    labels = []
    for label in namespace:
        label = _check_text(label, f"namespace label of {namespace!r:.80}")
        labels.append(label)
        if SEPARATOR in label:
            raise ValueError(
                f"namespace label {label!r:.80} contains {SEPARATOR!r}, which separates labels "
                f"in stored namespaces; use a tuple of labels instead: {tuple(label.split('/'))!r}"
            )
    return tuple(labels)


def valid_key(key: object) -> str:
    """`key` as a str, or a `ValueError` saying what is wrong with it."""
    return _check_text(key, "key")


def _check_text(text: object, what: str) -> str:
    """`text` as a plain str, or a `ValueError` naming `what` is wrong with it."""
    if not isinstance(text, str):
        raise ValueError(f"a {what} must be a str, not {type(text).__name__} {text!r:.60}")
    if not text:
        raise ValueError(f"a {what} must not be empty")
    if len(text) > MAX_LABEL_LENGTH:
        raise ValueError(
            f"a {what} is {len(text):,} characters long; the limit is {MAX_LABEL_LENGTH} "
            f"(it starts {text[:40]!r})"
        )
    if not text.isprintable():
        reason = forbidden_character(text)
        if reason is not None:
            raise ValueError(f"{what} {text!r:.80} is not valid: {reason}")
    return str.__str__(text)


def check_size(namespace: Namespace, key: str) -> None:
    """A `ValueError` when the stored namespace and key are too long for every store's index."""
    size = len(join(namespace).encode()) + len(key.encode())
    if size > MAX_KEY_BYTES:
        raise ValueError(
            f"the namespace {namespace!r:.80} and key {key!r:.40} take {size:,} bytes in UTF-8; "
            f"the limit is {MAX_KEY_BYTES:,} together: use shorter labels or keys (a hash, "
            "say), and keep long text in the value"
        )


def join(namespace: Namespace) -> str:
    """The stored text of a namespace."""
    return SEPARATOR.join(namespace)


def split(text: str) -> Namespace:
    """A namespace from its stored text."""
    return tuple(text.split(SEPARATOR))


def prefix_range(prefix: Namespace) -> tuple[str, str] | None:
    """The stored texts under `prefix` (itself excluded) are `low <= text < high`: "a/b/" up
    to "a/b0" ("0" follows "/"). None for the empty prefix: everything."""
    if not prefix:
        return None
    text = join(prefix)
    return text + SEPARATOR, text + chr(ord(SEPARATOR) + 1)


def encode_value(namespace: Namespace, key: str, value: object) -> str:
    """The JSON text of `value`, or `SerializationError` naming the path to what would not read
    back equal. Nothing is written when this raises."""
    if not isinstance(value, dict):
        raise _refused(namespace, key, [], f"a value is a dict, not a {type(value).__name__}")
    problem = plain_problem(value, 1)
    if problem is not None:
        raise _refused(namespace, key, problem.path, problem.reason)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode()
    except UnicodeEncodeError:
        path = _surrogate_path(value) or []
        raise _refused(
            namespace, key, path, "it holds an unpaired surrogate, text that is not Unicode"
        ) from None
    return text


def decode_value(namespace: Namespace, key: str, text: str) -> dict[str, Any]:
    """A stored value; `SerializationError` naming the item when the row is not a JSON object."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SerializationError(
            f"Store item {namespace!r} / {key!r}: the stored value is not valid JSON: {exc}",
            context={"namespace": list(namespace), "key": key},
        ) from exc
    if not isinstance(value, dict):
        raise SerializationError(
            f"Store item {namespace!r} / {key!r}: the stored value is not a JSON object",
            context={"namespace": list(namespace), "key": key},
        )
    return value


def _surrogate_path(value: object) -> list[PathPart] | None:
    if isinstance(value, str):
        return None if forbidden_character(value) is None or _encodes(value) else []
    items: Any = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for part, item in items:
        if isinstance(part, str) and not _encodes(part):
            return [part]
        found = _surrogate_path(item)
        if found is not None:
            return [part, *found]
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _refused(
    namespace: Namespace, key: str, path: list[PathPart], reason: str
) -> SerializationError:
    field = format_path(path) or None
    where = f"field {field!r}: " if field else ""
    return SerializationError(
        f"Store item {namespace!r} / {key!r}: cannot store the value: {where}{reason}. "
        "Nothing was written.",
        context={"namespace": list(namespace), "key": key, "field": field},
    )


__all__ = [
    "MAX_DEPTH",
    "MAX_KEY_BYTES",
    "MAX_LABEL_LENGTH",
    "SEPARATOR",
    "Namespace",
    "check_size",
    "decode_value",
    "encode_value",
    "join",
    "prefix_range",
    "split",
    "valid_key",
    "valid_namespace",
]
