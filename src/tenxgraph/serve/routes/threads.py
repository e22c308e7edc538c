"""Threads: create, read, search, count, patch, delete, copy; their state (read, update) and
history. A thread's record (owner, metadata, status) is the server's; its state is the
checkpointer's."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import AgentState
from tenxgraph.serve import schemas
from tenxgraph.serve.db.base import ThreadExistsError
from tenxgraph.serve.http import HTTPError, answer, not_found, query_int, read_body
from tenxgraph.serve.records import ThreadRecord, ThreadStatus, iso, new_id, thread_json
from tenxgraph.serve.runs import interrupts_of
from tenxgraph.serve.server import Server
from tenxgraph.serve.wire import WireError, values_to_wire
from tenxgraph.serve.wire_in import input_from_wire


def _server(request: Request) -> Server:
    server: Server = request.app.state.tenxgraph
    return server


def state_json(thread_id: str, state: AgentState | None, version: int | None) -> dict[str, Any]:
    """A thread's state as LangGraph's clients read it (`values`, `next`, `tasks`, ...)."""
    checkpoint = {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": str(version or 0)}
    if state is None:
        values: dict[str, Any] = {}
        interrupts: list[dict[str, Any]] = []
        node = None
    else:
        values, interrupts = values_to_wire(state), interrupts_of(state)
        node = state.execution_meta.interrupted_node if interrupts else None
    tasks = [{"id": str(i.get("id") or node), "name": node, "path": [], "error": None,
              "interrupts": interrupts, "checkpoint": None, "state": None, "result": None}
             for i in interrupts]  # fmt: skip
    return {
        "values": values,
        "next": [node] if node else [],
        "tasks": tasks,
        "interrupts": interrupts,
        "metadata": {"step": state.execution_meta.step if state else -1},
        "created_at": None,
        "checkpoint": checkpoint,
        "checkpoint_id": checkpoint["checkpoint_id"],
        "parent_checkpoint": None,
        "parent_checkpoint_id": None,
    }


async def read_state(
    graph: CompiledGraph[Any], thread_id: str, version: int | None = None
) -> tuple[AgentState | None, int | None]:
    config: dict[str, Any] = {"thread_id": thread_id}
    if version is not None:
        config["checkpoint_version"] = version
    state = await graph.aget_state(config)
    if version is None and graph.checkpointer is not None:
        version = await graph.checkpointer.aversion(thread_id)
    return state, version


async def _thread_json(server: Server, thread: ThreadRecord) -> dict[str, Any]:
    state, _ = await read_state(server.graph_of(thread), thread.thread_id)
    values = None if state is None else values_to_wire(state)
    found = [] if state is None else interrupts_of(state)
    return thread_json(thread, values, {"": found} if found else None)


async def create_thread(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.ThreadCreate, server.body_limit)
    thread = ThreadRecord(body.thread_id or new_id(), owner, body.metadata)
    try:
        await server.db.create_thread(thread)
    except ThreadExistsError:
        mine = await server.db.get_thread(thread.thread_id, owner)
        if body.if_exists != "do_nothing" or mine is None:
            raise HTTPError(409, f"thread {thread.thread_id!r} already exists") from None
        thread = mine
    return answer(thread_json(thread))


async def get_thread(request: Request) -> Response:
    server = _server(request)
    thread = await server.thread(request.path_params["thread_id"], await server.owner(request))
    return answer(await _thread_json(server, thread))


async def patch_thread(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.ThreadPatch, server.body_limit)
    thread_id = request.path_params["thread_id"]
    thread = await server.db.update_thread(thread_id, owner, metadata=body.metadata)
    if thread is None:
        raise not_found("thread", thread_id)
    return answer(thread_json(thread))


async def delete_thread(request: Request) -> Response:
    server = _server(request)
    thread = await server.thread(request.path_params["thread_id"], await server.owner(request))
    active = await server.db.list_runs(thread.thread_id, thread.owner, status="running")
    active += await server.db.list_runs(thread.thread_id, thread.owner, status="pending")
    if active:  # stopped, and ended, before the state goes: nothing writes it back after
        await server.cancel([r.run_id for r in active], "interrupt")
        for run in active:
            await server.ended(run)
    graph = server.graph_of(thread)
    await server.db.delete_thread(thread.thread_id, thread.owner)
    if graph.checkpointer is not None:
        await graph.checkpointer.adelete_thread(thread.thread_id)
    return Response(status_code=204)


async def search_threads(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.ThreadSearch, server.body_limit)
    found = await server.db.search_threads(
        owner, metadata=body.metadata, status=body.status, ids=body.ids,
        limit=body.limit, offset=body.offset,
    )  # fmt: skip
    return answer([thread_json(t) for t in found])


async def count_threads(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.ThreadCount, server.body_limit)
    return answer(await server.db.count_threads(owner, metadata=body.metadata, status=body.status))


async def copy_thread(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    source = await server.thread(request.path_params["thread_id"], owner)
    graph = server.graph_of(source)
    copy = ThreadRecord(new_id(), owner, dict(source.metadata))
    await server.db.create_thread(copy)
    state = await graph.aget_state({"thread_id": source.thread_id})
    if state is not None and graph.checkpointer is not None:  # the state as the copy's first
        await graph.checkpointer.asave(
            copy.thread_id, expected_version=None, state=state, new_messages=state.context
        )
    status: ThreadStatus = "interrupted" if state and interrupts_of(state) else "idle"
    copy = await server.db.update_thread(copy.thread_id, owner, status=status) or copy
    return answer(thread_json(copy))


def _version(checkpoint_id: str) -> int:
    if not checkpoint_id.isdigit():
        raise HTTPError(422, f"checkpoint_id is a version number here, got {checkpoint_id!r}")
    return int(checkpoint_id)


async def get_state(request: Request) -> Response:
    server = _server(request)
    thread = await server.thread(request.path_params["thread_id"], await server.owner(request))
    raw = request.path_params.get("checkpoint_id")
    version = None if raw is None else _version(raw)
    state, version = await read_state(server.graph_of(thread), thread.thread_id, version)
    if raw is not None and state is None:
        raise HTTPError(404, f"thread {thread.thread_id!r} has no checkpoint {raw!r}")
    return answer(state_json(thread.thread_id, state, version))


async def update_state(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    thread = await server.thread(request.path_params["thread_id"], owner)
    body = await read_body(request, schemas.StateUpdate, server.body_limit)
    try:
        update = input_from_wire(body.values) or {}
    except WireError as exc:
        raise HTTPError(422, str(exc)) from None
    graph = server.graph_of(thread)
    values: dict[str, Any] = dict(update.get("state") or {})
    if update.get("messages"):
        values["context"] = update["messages"]  # the conversation field of tenxgraph's state
    try:
        version = await graph.aupdate_state({"thread_id": thread.thread_id}, values)
    except ValueError as exc:
        raise HTTPError(422, str(exc)) from None
    checkpoint = {"thread_id": thread.thread_id, "checkpoint_ns": "",
                  "checkpoint_id": str(version)}  # fmt: skip
    return answer({"checkpoint": checkpoint, "configurable": checkpoint})


async def history(request: Request) -> Response:
    server = _server(request)
    thread = await server.thread(request.path_params["thread_id"], await server.owner(request))
    if request.method == "POST":
        query = await read_body(request, schemas.HistoryQuery, server.body_limit)
    else:  # the Agent Protocol's form: ?limit=&before=
        query = schemas.HistoryQuery(
            limit=query_int(request, "limit", 10, 1, 1000),
            before=request.query_params.get("before"),
        )
    before_id = query.before_id()
    before = _version(before_id) if before_id else None
    graph = server.graph_of(thread)
    config = {"thread_id": thread.thread_id}
    infos = await graph.aget_state_history(config, limit=None if before else query.limit)
    if before is not None:
        infos = [info for info in infos if info.version < before][: query.limit]
    states = []
    for info in infos:
        state, _ = await read_state(graph, thread.thread_id, info.version)
        entry = state_json(thread.thread_id, state, info.version)
        entry["created_at"] = iso(info.created_at)
        entry["metadata"] = {"step": info.step, "source": info.node, "status": info.status}
        states.append(entry)
    return answer(states)


ROUTES = [
    Route("/threads", create_thread, methods=["POST"]),
    Route("/threads/search", search_threads, methods=["POST"]),
    Route("/threads/count", count_threads, methods=["POST"]),
    Route("/threads/{thread_id}", get_thread, methods=["GET"]),
    Route("/threads/{thread_id}", patch_thread, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete_thread, methods=["DELETE"]),
    Route("/threads/{thread_id}/copy", copy_thread, methods=["POST"]),
    Route("/threads/{thread_id}/state", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/state", update_state, methods=["POST"]),
    Route("/threads/{thread_id}/state/{checkpoint_id}", get_state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
