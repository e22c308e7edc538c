"""The long-term store: put, get, delete, search items, list namespaces. On a server with
auth, every namespace a caller names lives under their identity (its first label, hidden
from them), so one user never reads another's items; a graph's nodes find the same items
under `(config["user_id"], ...)`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tenxgraph.core.exceptions import EmbeddingError
from tenxgraph.serve import schemas
from tenxgraph.serve.http import HTTPError, answer, read_body
from tenxgraph.serve.records import iso
from tenxgraph.serve.server import Server
from tenxgraph.storage.store.base import BaseStore, Item, SearchItem


async def _open(request: Request) -> tuple[BaseStore, tuple[str, ...]]:
    """The store, and the caller's hidden namespace prefix."""
    server: Server = request.app.state.tenxgraph
    owner = await server.owner(request)
    if server.store is None:
        raise HTTPError(404, "this server has no store: compile a graph with one, or pass --db")
    return server.store, ((owner,) if owner else ())


def _item_json(item: Item, hidden: int) -> dict[str, Any]:
    return {
        "namespace": list(item.namespace[hidden:]),
        "key": item.key,
        "value": item.value,
        "created_at": iso(item.created_at),
        "updated_at": iso(item.updated_at),
        **({"score": item.score} if isinstance(item, SearchItem) else {}),
    }


def _namespace(request: Request) -> list[str]:
    raw = request.query_params.get("namespace", "")
    if raw.startswith("["):
        try:
            found = json.loads(raw)
        except ValueError:
            found = None
        if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
            raise HTTPError(422, "namespace must be a JSON list of strings or dotted text")
        return found
    return [part for part in raw.split(".") if part]


async def _call(work: Any) -> Any:
    try:
        return await work
    except ValueError as exc:
        raise HTTPError(422, str(exc)) from None
    except EmbeddingError as exc:  # the store's embedding model failed: nothing was written
        raise HTTPError(502, exc.message) from None


async def put_item(request: Request) -> Response:
    store, mine = await _open(request)
    server: Server = request.app.state.tenxgraph
    body = await read_body(request, schemas.StorePut, server.body_limit)
    await _call(store.aput((*mine, *body.namespace), body.key, body.value, body.index))
    return Response(status_code=204)


async def get_item(request: Request) -> Response:
    store, mine = await _open(request)
    key = request.query_params.get("key")
    if not key:
        raise HTTPError(422, "query parameter key is required")
    item = await _call(store.aget((*mine, *_namespace(request)), key))
    if item is None:
        raise HTTPError(404, f"no item {key!r} in that namespace")
    return answer(_item_json(item, len(mine)))


async def delete_item(request: Request) -> Response:
    store, mine = await _open(request)
    server: Server = request.app.state.tenxgraph
    body = await read_body(request, schemas.StoreDelete, server.body_limit)
    await _call(store.adelete((*mine, *body.namespace), body.key))
    return Response(status_code=204)


async def search_items(request: Request) -> Response:
    store, mine = await _open(request)
    server: Server = request.app.state.tenxgraph
    body = await read_body(request, schemas.StoreSearch, server.body_limit)
    prefix: Sequence[str] = (*mine, *body.namespace_prefix)
    items = await _call(
        store.asearch(
            prefix, query=body.query, filter=body.filter, limit=body.limit, offset=body.offset
        )
    )
    return answer({"items": [_item_json(item, len(mine)) for item in items]})


async def list_namespaces(request: Request) -> Response:
    store, mine = await _open(request)
    server: Server = request.app.state.tenxgraph
    body = await read_body(request, schemas.NamespaceSearch, server.body_limit)
    depth = None if body.max_depth is None else body.max_depth + len(mine)
    found = await _call(
        store.alist_namespaces(
            prefix=(*mine, *(body.prefix or ())),
            suffix=body.suffix,
            max_depth=depth,
            limit=body.limit,
            offset=body.offset,
        )
    )
    return answer({"namespaces": [list(ns[len(mine) :]) for ns in found]})


ROUTES = [
    Route("/store/items", put_item, methods=["PUT"]),
    Route("/store/items", get_item, methods=["GET"]),
    Route("/store/items", delete_item, methods=["DELETE"]),
    Route("/store/items/search", search_items, methods=["POST"]),
    Route("/store/namespaces", list_namespaces, methods=["POST"]),
]
