"""Assistants: one per served graph, named by the graph's id (or LangGraph's UUID of it);
read-only here (the graphs are code). Also the Agent Protocol's `/agents` paths."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.serve import schemas
from tenxgraph.serve.http import HTTPError, answer, read_body
from tenxgraph.serve.records import iso
from tenxgraph.serve.server import Server, assistant_uuid

_BORN = 0.0  # assistants are the code's: they have no creation time of their own


def _server(request: Request) -> Server:
    server: Server = request.app.state.tenxgraph
    return server


def assistant_json(graph_id: str) -> dict[str, Any]:
    return {
        "assistant_id": assistant_uuid(graph_id),
        "graph_id": graph_id,
        "name": graph_id,
        "description": None,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "version": 1,
        "created_at": iso(_BORN),
        "updated_at": iso(_BORN),
    }


def agent_json(graph_id: str) -> dict[str, Any]:
    """An assistant as the Agent Protocol's `/agents` paths describe it."""
    return {
        "agent_id": graph_id,
        "name": graph_id,
        "description": None,
        "metadata": {},
        "capabilities": {"ap.io.messages": True, "ap.io.streaming": True},
    }


async def get_assistant(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    graph_id = server.graph_id(request.path_params["assistant_id"])
    if request.url.path.startswith("/agents"):
        return answer(agent_json(graph_id))
    return answer(assistant_json(graph_id))


def _matching(server: Server, body: schemas.AssistantSearch) -> list[str]:
    names = [n for n in server.graphs if body.graph_id in (None, n) and body.name in (None, n)]
    if body.metadata and any(
        body.metadata.get(k) != v for k, v in {"created_by": "system"}.items()
    ):
        names = [] if set(body.metadata) - {"created_by"} else names
    return names


async def search(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    body = await read_body(request, schemas.AssistantSearch, server.body_limit)
    names = _matching(server, body)[body.offset : body.offset + body.limit]
    if request.url.path.startswith("/agents"):
        return answer([agent_json(n) for n in names])
    return answer([assistant_json(n) for n in names])


async def count(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    body = await read_body(request, schemas.AssistantSearch, server.body_limit)
    return answer(len(_matching(server, body)))


def _graph(server: Server, request: Request) -> tuple[str, CompiledGraph[Any]]:
    graph_id = server.graph_id(request.path_params["assistant_id"])
    return graph_id, server.graphs[graph_id]


async def drawing(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    _, graph = _graph(server, request)
    shape = graph.get_graph()
    nodes = [{"id": name, "type": "runnable", "data": {"name": name, "kind": str(node.kind)}}
             for name, node in shape.nodes.items()]  # fmt: skip
    edges = [{"source": e.source, "target": e.target, "conditional": e.conditional,
              "data": e.label} for e in shape.edges]  # fmt: skip
    return answer({"nodes": nodes, "edges": edges, "mermaid": shape.draw_mermaid()})


async def schemas_of(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    graph_id, graph = _graph(server, request)
    state_schema = graph.state_type.model_json_schema()
    return answer({
        "graph_id": graph_id,
        "agent_id": graph_id,
        "input_schema": state_schema,
        "output_schema": state_schema,
        "state_schema": state_schema,
        "config_schema": {"type": "object"},
        "context_schema": {"type": "object"},
    })  # fmt: skip


async def subgraphs(request: Request) -> Response:
    server = _server(request)
    await server.owner(request)
    _graph(server, request)
    return answer({})


async def read_only(request: Request) -> Response:
    await _server(request).owner(request)
    raise HTTPError(405, "assistants are the served graphs: change the code and restart instead")


ROUTES = [
    Route("/assistants/search", search, methods=["POST"]),
    Route("/assistants/count", count, methods=["POST"]),
    Route("/assistants", read_only, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/assistants/{assistant_id}", read_only, methods=["PATCH", "DELETE"]),
    Route("/assistants/{assistant_id}/graph", drawing, methods=["GET"]),
    Route("/assistants/{assistant_id}/schemas", schemas_of, methods=["GET"]),
    Route("/assistants/{assistant_id}/subgraphs", subgraphs, methods=["GET"]),
    Route("/agents/search", search, methods=["POST"]),
    Route("/agents/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/agents/{assistant_id}/schemas", schemas_of, methods=["GET"]),
]
