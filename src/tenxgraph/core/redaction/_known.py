"""The credentials the process holds, and text and values cleaned of them.

Known credentials are the values registered from settings (`remember_settings`, `add_secret`)
and the environment variables whose names mark a secret (`is_secret_name`). The environment
is compared with its last snapshot on each use (a dict comparison, well under a microsecond)
and read again only when it changed.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MIN_SECRET_LENGTH = 8

# `_`/`-` separated words of a variable or setting name that mark it as a credential
_SECRET_WORDS = frozenset(
    {
        "KEY",
        "APIKEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PAT",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
    }
)
# name endings that hold one of those words glued to another (PGPASSWORD, WATSONX_APIKEY)
_SECRET_ENDINGS = ("PASSWORD", "PASSWD", "APIKEY", "TOKEN", "SECRET")
# a last word that names something about a credential, not the credential itself
_NOT_SECRET_LAST_WORDS = frozenset(
    {
        "URL",
        "URI",
        "FILE",
        "PATH",
        "DIR",
        "HOST",
        "PORT",
        "ENDPOINT",
        "ENABLED",
        "VERSION",
        "NAME",
        "NAMES",
        "FIELD",
        "TYPE",
        "MODE",
        "REGION",
        "BASE",
        "LENGTH",
        "LIMIT",
        "TTL",
        "TIMEOUT",
        "INTERVAL",
        "SOCK",
        "HEADER",
        "ALIAS",
        "COUNT",
        "SIZE",
        "PREFIX",
        "ROLE",
        "NAMESPACE",
        "KEYS",
    }
)

_lock = threading.Lock()
_given: dict[str, str] = {}  # credential value -> the name it was given under
_given_version = 0
_name_verdicts: dict[str, bool] = {}
_env_snapshot: dict[Any, Any] | None = None
_table: tuple[tuple[str, str], ...] = ()  # (value, mask), longest value first
_table_version = -1


def is_secret_name(name: str) -> bool:
    """Whether a variable or setting called `name` holds a credential (``OPENAI_API_KEY``,
    ``aws_secret_access_key``, ``x-api-key``, ``PGPASSWORD``; not ``max_tokens`` nor
    ``AZURE_API_BASE``)."""
    verdict = _name_verdicts.get(name)
    if verdict is None:
        upper = name.upper()
        words = upper.replace("-", "_").split("_")
        marked = any(w in _SECRET_WORDS for w in words) or upper.endswith(_SECRET_ENDINGS)
        verdict = marked and words[-1] not in _NOT_SECRET_LAST_WORDS
        if len(_name_verdicts) < 4096:
            _name_verdicts[name] = verdict
    return verdict


def add_secret(value: str, name: str = "credential") -> None:
    """Redact `value` from now on wherever tenxgraph redacts (shown as ``[REDACTED:name]``).
    For a credential the process holds that neither an Agent nor the environment gave it."""
    global _given_version
    for candidate in _variants(value):
        if candidate not in _given:
            with _lock:
                _given.setdefault(candidate, name)
                _given_version += 1


def remember_settings(settings: Mapping[str, Any]) -> None:
    """Register every credential in provider `settings` (`api_key`, `aws_secret_access_key`,
    `azure_ad_token`, an `Authorization` entry of `extra_headers`, ...)."""
    _remember(settings, depth=0)


def _remember(settings: Mapping[str, Any], depth: int) -> None:
    for name, value in settings.items():
        if not isinstance(name, str):
            continue
        if isinstance(value, Mapping) and depth < 3:
            _remember(value, depth + 1)
        elif isinstance(value, str) and is_secret_name(name):
            add_secret(value, name)


def _variants(value: str) -> Iterable[str]:
    """The forms of a credential worth looking for: as given, stripped, and the token of a
    ``Bearer <token>`` header value."""
    if not isinstance(value, str):
        return ()
    found = {value, value.strip()}
    scheme, _, token = value.strip().partition(" ")
    if token and scheme.lower() in ("bearer", "basic", "token"):
        found.add(token.strip())
    return [v for v in found if len(v) >= MIN_SECRET_LENGTH]


def _environment() -> dict[Any, Any]:
    data = getattr(os.environ, "_data", None)  # CPython's own dict: comparing it is cheap
    return data if isinstance(data, dict) else dict(os.environ)


def current_table() -> tuple[tuple[str, str], ...]:
    """(value, mask) of every known credential, longest first; rebuilt when the environment
    or the registered set changed."""
    global _env_snapshot, _table, _table_version
    environment = _environment()
    if _table_version == _given_version and environment == _env_snapshot:
        return _table
    with _lock:
        version = _given_version
        snapshot = dict(environment)
        masks: dict[str, str] = {}
        for name, value in os.environ.items():
            if is_secret_name(name):
                for candidate in _variants(value):
                    masks.setdefault(candidate, f"[REDACTED:{name}]")
        for value, name in _given.items():
            masks.setdefault(value, f"[REDACTED:{name}]")
        table = tuple(sorted(masks.items(), key=lambda item: -len(item[0])))
        _table, _env_snapshot, _table_version = table, snapshot, version
    return table


# what a masking that keeps a key's tail leaves: litellm masks the usual length of a known
# key shape as "REDACTED" and keeps the rest of a longer key (compiled on first use, by `re`)
_MASK_LEFTOVER = r"REDACTED[A-Za-z0-9_\-]{4,}"


def redact(text: str) -> str:
    """`text` with every known credential replaced by ``[REDACTED:<where it came from>]``
    (and the tail of a key another library masked only in part removed)."""
    if not text or not isinstance(text, str):
        return text
    for value, mask in current_table():
        if value in text:
            text = text.replace(value, mask)
    if "REDACTED" in text:
        text = re.sub(_MASK_LEFTOVER, "REDACTED", text)
    return text


def redact_bytes(data: bytes) -> bytes:
    for value, mask in current_table():
        raw = value.encode("utf-8", "replace")
        if raw in data:
            data = data.replace(raw, mask.encode())
    return data


def redact_value(value: Any, _depth: int = 0) -> Any:
    """`value` with credentials redacted in every string (or bytes) inside it (dicts, lists,
    tuples); other objects, and values holding no credential, are returned as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, bytes):
        clean = redact_bytes(value)
        return value if clean == value else clean
    if _depth > 20:
        return value
    if isinstance(value, dict):
        pairs = [
            (k, v, redact_value(k, _depth + 1), redact_value(v, _depth + 1))
            for k, v in value.items()
        ]
        if all(k is k2 and v is v2 for k, v, k2, v2 in pairs):
            return value
        return {k2: v2 for _, _, k2, v2 in pairs}
    if isinstance(value, list) or type(value) is tuple:
        items = [redact_value(v, _depth + 1) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def contains_secret(text: str) -> bool:
    """Whether `text` holds a known credential."""
    return any(value in text for value, _ in current_table())


__all__ = [
    "MIN_SECRET_LENGTH",
    "add_secret",
    "contains_secret",
    "current_table",
    "is_secret_name",
    "redact",
    "redact_bytes",
    "redact_value",
    "remember_settings",
]
