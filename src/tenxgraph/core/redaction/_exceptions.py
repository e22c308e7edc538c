"""Exceptions cleaned of credentials: the whole chain, so a printed traceback shows none."""

from __future__ import annotations

import contextlib
from typing import Any

from tenxgraph.core.redaction._known import (
    contains_secret,
    current_table,
    redact,
    redact_bytes,
    redact_value,
)


def scrub_exception(exc: BaseException) -> BaseException:
    """Redact `exc` and every exception chained to it (`__cause__`, `__context__`, exception
    groups, attributes holding exceptions), in place: their args, notes, string and container
    attributes; an HTTP request, response or headers they hold is replaced by a redacted copy.
    A traceback printed afterwards shows no credential. Returns `exc`."""
    if not current_table():
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
            continue
        clean = _clean_attribute(value)
        if clean is not value:
            _set(exc, name, clean)
    return linked


def _clean_attribute(value: Any) -> Any:
    """`value` itself when it holds no credential, else a redacted copy. HTTP requests,
    responses and headers are copied, never changed: others (a client's event hooks, a test
    double) may hold the same objects."""
    if isinstance(value, str | bytes | dict | list | tuple):
        return redact_value(value)
    if hasattr(value, "status_code") and hasattr(value, "headers"):
        return _clean_response(value)
    if hasattr(value, "method") and hasattr(value, "headers"):
        return _clean_request(value)
    if callable(getattr(value, "items", None)) and hasattr(value, "__getitem__"):
        return _clean_headers(value)
    return value


def _header_items(headers: Any) -> list[tuple[Any, Any]]:
    multi = getattr(headers, "multi_items", None)  # httpx: repeated headers kept
    return list(multi() if callable(multi) else headers.items())


def _clean_headers(headers: Any) -> Any:
    items = _header_items(headers)
    if not any(isinstance(v, str) and contains_secret(v) for _, v in items):
        return headers
    cleaned = [(k, redact(v) if isinstance(v, str) else v) for k, v in items]
    try:
        return type(headers)(cleaned)
    except Exception:  # a mapping type that cannot be built from pairs
        return dict(cleaned)


def _clean_request(request: Any) -> Any:
    """An httpx-like request, or a copy with the credentials in its URL, headers and body
    redacted."""
    url = str(getattr(request, "url", ""))
    headers = getattr(request, "headers", None)
    body = getattr(request, "_content", None)  # only a body already in memory
    clean_headers = _clean_headers(headers) if headers is not None else None
    clean_body = redact_bytes(body) if isinstance(body, bytes) else None
    if clean_headers is headers and not contains_secret(url) and clean_body == body:
        return request
    try:
        return type(request)(
            request.method, redact(url), headers=_header_items(clean_headers), content=clean_body
        )
    except Exception:  # not httpx after all: leave it
        return request


# a copy holds the decoded body: headers describing the encoded one would not fit it
_BODY_FRAMING = frozenset({"content-encoding", "content-length", "transfer-encoding"})


def _clean_response(response: Any) -> Any:
    """An httpx-like response, or a copy with the credentials in its headers, body and
    request redacted."""
    request = getattr(response, "_request", None)
    clean_request = _clean_request(request) if request is not None else None
    headers = response.headers
    clean_headers = _clean_headers(headers)
    body = getattr(response, "_content", None)
    clean_body = redact_bytes(body) if isinstance(body, bytes) else b""
    if clean_request is request and clean_headers is headers and clean_body == (body or b""):
        return response
    kept = [(k, v) for k, v in _header_items(clean_headers) if str(k).lower() not in _BODY_FRAMING]
    try:
        return type(response)(
            response.status_code, headers=kept, content=clean_body, request=clean_request
        )
    except Exception:  # not httpx after all: leave it
        return response


def _set(obj: Any, name: str, value: Any) -> None:
    with contextlib.suppress(AttributeError, TypeError):  # read-only: leave it
        setattr(obj, name, value)


__all__ = ["scrub_exception"]
