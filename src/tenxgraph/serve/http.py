"""The server's HTTP helpers: errors as `{"detail": ...}` JSON with the status LangGraph's
clients expect, request bodies read within a size limit and checked by a schema."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

M = TypeVar("M", bound=BaseModel)


class HTTPError(Exception):
    """Answered as `{"detail": detail}` with `status`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def not_found(what: str, name: str) -> HTTPError:
    return HTTPError(404, f"{what} {name!r} not found")


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body (None when empty), refused with 413 past `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPError(413, f"request body over the server's limit of {limit} bytes")
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise HTTPError(413, f"request body over the server's limit of {limit} bytes")
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(422, f"request body is not JSON: {exc}") from None


async def read_body(request: Request, model: type[M], limit: int) -> M:
    """The request's body checked against `model` (422 naming the fields that are wrong)."""
    data = await read_json(request, limit)
    try:
        return model.model_validate({} if data is None else data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
            for error in exc.errors(include_url=False, include_input=False)
        )
        raise HTTPError(422, f"invalid request body: {problems}") from None


def answer(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status, headers)


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPError(422, f"query parameter {name} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise HTTPError(422, f"query parameter {name} must be in [{low}, {high}], got {value}")
    return value


__all__ = ["HTTPError", "answer", "not_found", "query_int", "read_body", "read_json"]
