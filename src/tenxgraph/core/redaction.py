"""Credentials redacted by value, before anything is raised, logged, streamed or stored.

The process's credentials are the values given to it: the `api_key` (and other credential
settings) passed to an Agent or model client, and every environment variable whose name says
it holds a secret (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...: every
provider key variable litellm reads is one). Any text can then be cleaned by looking for those
values, whatever their format; a value shorter than 8 characters is never a key and is left
alone. The environment is read lazily and again whenever it changed.

Redaction runs on error paths only (exception messages, log records that are emitted, error
chunks); a successful model call pays nothing here.
"""

from __future__ import annotations

import contextlib
import logging
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


def _current_table() -> tuple[tuple[str, str], ...]:
    """The values to look for, rebuilt when the environment or the given set changed."""
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
# key shape as "REDACTED" and keeps the rest of a longer key
_MASK_LEFTOVER = re.compile(r"REDACTED[A-Za-z0-9_\-]{4,}")


def redact(text: str) -> str:
    """`text` with every known credential replaced by ``[REDACTED:<where it came from>]``
    (and the tail of a key another library masked only in part removed)."""
    if not text or not isinstance(text, str):
        return text
    for value, mask in _current_table():
        if value in text:
            text = text.replace(value, mask)
    if "REDACTED" in text:
        text = _MASK_LEFTOVER.sub("REDACTED", text)
    return text


def redact_bytes(data: bytes) -> bytes:
    for value, mask in _current_table():
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
    return any(value in text for value, _ in _current_table())


# -- exceptions -----------------------------------------------------------------------------


def scrub_exception(exc: BaseException) -> BaseException:
    """Redact `exc` and every exception chained to it (`__cause__`, `__context__`, exception
    groups, attributes holding exceptions), in place: their args, string and container
    attributes, notes, and the headers and body of HTTP requests and responses they carry. A
    traceback printed afterwards shows no credential. Returns `exc`."""
    if not _current_table():
        return exc
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        pending.extend(_scrub_one(current))
    return exc


def _scrub_one(exc: BaseException) -> list[BaseException]:
    """Redact one exception; returns the exceptions linked to it."""
    linked = [e for e in (exc.__cause__, exc.__context__) if e is not None]
    args = exc.args
    clean_args = redact_value(args)
    if clean_args is not args:
        exc.args = clean_args
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list):
        notes[:] = [redact(n) if isinstance(n, str) else n for n in notes]
    group = getattr(exc, "exceptions", None)
    if isinstance(group, tuple):
        linked.extend(e for e in group if isinstance(e, BaseException))
    for name, value in list(getattr(exc, "__dict__", {}).items()):
        if isinstance(value, BaseException):
            linked.append(value)
        elif isinstance(value, str | bytes | dict | list | tuple):
            clean = redact_value(value)
            if clean is not value:
                _set(exc, name, clean)
        elif hasattr(value, "headers"):
            _scrub_http(value)
        else:
            _scrub_headers(value)
    return linked


def _scrub_headers(headers: Any) -> None:
    """Redact the values of a mutable mapping of headers (httpx.Headers, say) in place."""
    items = getattr(headers, "items", None)
    if not callable(items) or not hasattr(headers, "__setitem__"):
        return
    for key, value in list(items()):
        if isinstance(value, str) and contains_secret(value):
            try:
                headers[key] = redact(value)
            except (TypeError, AttributeError):
                return


def _scrub_http(message: Any, depth: int = 0) -> None:
    """Redact an HTTP request or response (httpx-like) in place: header values and a body
    already read (httpx caches it in `_content` and its text in `_text`). The request a
    response answers is cleaned too."""
    _scrub_headers(getattr(message, "headers", None))
    body = getattr(message, "_content", None)
    if isinstance(body, bytes):
        clean = redact_bytes(body)
        if clean != body:
            _set(message, "_content", clean)
    text = getattr(message, "_text", None)
    if isinstance(text, str):
        _set(message, "_text", redact(text))
    request = getattr(message, "_request", None)
    if request is not None and depth == 0:
        _scrub_http(request, 1)


def _set(obj: Any, name: str, value: Any) -> None:
    with contextlib.suppress(AttributeError, TypeError):  # read-only: leave it
        setattr(obj, name, value)


# -- logging --------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """A logging filter that redacts credentials from each record it lets through: the
    formatted message and the exception attached to it. Records are never dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let logging report it as usual
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            scrub_exception(record.exc_info[1])
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactingFilter()

# loggers of the libraries on the model path; some log a provider's error body at DEBUG
THIRD_PARTY_LOGGERS = (
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "openai",
    "openai._base_client",
    "httpx",
    "httpcore",
)


def protect_logger(logger: logging.Logger | str) -> logging.Logger:
    """Attach the redacting filter to `logger` (once). A logger filter sees only the records
    logged on that very logger, so each logger that may see a credential needs it."""
    found = logging.getLogger(logger) if isinstance(logger, str) else logger
    if _FILTER not in found.filters:
        found.addFilter(_FILTER)
    return found


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, with credentials redacted from what it logs."""
    return protect_logger(name)


def protect_loggers() -> None:
    """Protect the model path's third-party loggers and every tenxgraph logger created so far."""
    for name in THIRD_PARTY_LOGGERS:
        protect_logger(name)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (
            name == "tenxgraph" or name.startswith("tenxgraph.")
        ):
            protect_logger(logger)


__all__ = [
    "MIN_SECRET_LENGTH",
    "THIRD_PARTY_LOGGERS",
    "RedactingFilter",
    "add_secret",
    "contains_secret",
    "get_logger",
    "is_secret_name",
    "protect_logger",
    "protect_loggers",
    "redact",
    "redact_bytes",
    "redact_value",
    "remember_settings",
    "scrub_exception",
]
