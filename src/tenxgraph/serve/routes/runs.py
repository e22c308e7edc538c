"""Runs: queue one (in the background, or streamed, or waited for), on a thread or on a new
temporary one (stateless); list, get, join, join the stream, cancel, delete."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any, NamedTuple

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tenxgraph.serve import schemas
from tenxgraph.serve.http import HTTPError, answer, query_int, read_body
from tenxgraph.serve.records import ACTIVE, FINISHED, RunRecord, run_json
from tenxgraph.serve.server import Server
from tenxgraph.serve.streaming import END
from tenxgraph.serve.wire import WireError
from tenxgraph.serve.worker import forget_thread


def _server(request: Request) -> Server:
    server: Server = request.app.state.tenxgraph
    return server


class _Created(NamedTuple):
    server: Server
    run: RunRecord
    body: schemas.RunCreate
    forget: bool  # the run's thread was made for it, to delete once it ended


async def _create(request: Request) -> _Created:
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.RunCreate, server.body_limit)
    try:
        body.check_input()
    except WireError as exc:
        raise HTTPError(422, str(exc)) from None
    # the thread is in the path, or (the Agent Protocol) in the body, or none: stateless
    thread_id = request.path_params.get("thread_id", body.thread_id)
    forget = thread_id is None and body.on_completion != "keep"
    background = request.url.path.rstrip("/").endswith("/runs")
    run = await server.create_run(owner, thread_id, body, temporary=forget and background)
    return _Created(server, run, body, forget)


def _location(run: RunRecord, what: str) -> dict[str, str]:
    path = f"/threads/{run.thread_id}/runs/{run.run_id}/{what}"
    return {"Location": path, "Content-Location": path}


async def create_background(request: Request) -> Response:
    run = (await _create(request)).run
    return answer(run_json(run), headers={"Content-Location": _location(run, "")["Location"]})


async def create_wait(request: Request) -> Response:
    server, run, body, forget = await _create(request)
    result = await _unless_disconnected(request, server.result(run))
    if result is None:  # the client went away: nobody reads the answer
        cancel = (body.on_disconnect or "cancel") == "cancel"
        server.detach(_after_disconnect(server, run, cancel, forget))
        return Response(status_code=499)
    if body.agent_protocol:  # its answer shows the run as it ended
        ended = await server.db.get_run(run.run_id, None) or run
    if forget:
        await _forget(server, run)
    if body.agent_protocol:
        return answer(_wait_json(ended, result), headers=_location(run, "join"))
    return answer(result, headers=_location(run, "join"))


async def _unless_disconnected(
    request: Request, work: Coroutine[Any, Any, dict[str, Any]]
) -> dict[str, Any] | None:
    """`work`'s result, or None (and `work` cancelled) if the client disconnects first."""
    waiting = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, gone):
            task.cancel()
    return waiting.result() if waiting.done() and not waiting.cancelled() else None


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (its body was read: nothing else can come)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _wait_json(run: RunRecord, values: dict[str, Any]) -> dict[str, Any]:
    """The Agent Protocol's answer to waiting for a run: the run, its values, messages."""
    return {"run": run_json(run), "values": values, "messages": values.get("messages", [])}


async def create_stream(request: Request) -> Response:
    server, run, body, forget = await _create(request)
    cancel = (body.on_disconnect or "cancel") == "cancel"
    events = _sse(server, run, 0, body.stream_mode, cancel_on_disconnect=cancel, forget=forget)
    return EventSourceResponse(events, ping=server.heartbeat, headers=_location(run, "stream"))


async def _sse(
    server: Server,
    run: RunRecord,
    after: int,
    modes: list[str] | None,
    *,
    cancel_on_disconnect: bool = False,
    forget: bool = False,
) -> AsyncIterator[ServerSentEvent]:
    ended = False
    try:
        async for event in server.events(run, after, modes):
            ended = event.event == END
            yield ServerSentEvent(data=event.data, event=event.event, id=str(event.seq))
    finally:
        if not ended and (cancel_on_disconnect or forget):
            server.detach(_after_disconnect(server, run, cancel_on_disconnect, forget))
        elif forget:
            await _forget(server, run)


async def _after_disconnect(server: Server, run: RunRecord, cancel: bool, forget: bool) -> None:
    """What a run whose client went away still needs, apart from the request: cancelled (when
    asked), and a stateless run's thread deleted once the run has ended."""
    if cancel:
        await server.cancel([run.run_id], "interrupt")
    if forget:
        await server.ended(run)
        await _forget(server, run)


async def _forget(server: Server, run: RunRecord) -> None:
    await forget_thread(server.db, server.graphs[run.assistant_id], run.thread_id)


async def list_runs(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    thread = await server.thread(request.path_params["thread_id"], owner)
    status = request.query_params.get("status")
    if status is not None and status not in ACTIVE + FINISHED:
        raise HTTPError(422, f"unknown run status {status!r}")
    runs = await server.db.list_runs(
        thread.thread_id, owner, status=status,
        limit=query_int(request, "limit", 10, 1, 1000),
        offset=query_int(request, "offset", 0, 0, 1 << 62),
    )  # fmt: skip
    return answer([run_json(r) for r in runs])


async def _found(request: Request) -> tuple[Server, RunRecord]:
    server = _server(request)
    owner = await server.owner(request)
    params = request.path_params
    return server, await server.run(params.get("thread_id"), params["run_id"], owner)


async def get_run(request: Request) -> Response:
    _, run = await _found(request)
    return answer(run_json(run))


async def join(request: Request) -> Response:
    server, run = await _found(request)
    return answer(await server.result(run))


async def wait_run(request: Request) -> Response:
    """The Agent Protocol's `GET /runs/{run_id}/wait`: the run once ended, with its values."""
    server, run = await _found(request)
    result = await server.result(run)
    return answer(_wait_json(await server.db.get_run(run.run_id, None) or run, result))


async def search_runs(request: Request) -> Response:
    """The Agent Protocol's run search, over the caller's threads (newest run first)."""
    server = _server(request)
    owner = await server.owner(request)
    body = await read_body(request, schemas.RunSearch, server.body_limit)
    agent = None if body.agent_id is None else server.graph_id(body.agent_id)
    thread_id = None
    if body.thread_id is not None:  # someone else's (or no) thread: 404
        thread_id = (await server.thread(body.thread_id, owner)).thread_id
    found = await server.db.search_runs(
        owner, thread_id=thread_id, status=body.status, assistant_id=agent,
        metadata=body.metadata, limit=body.limit, offset=body.offset,
    )  # fmt: skip
    return answer([run_json(r) for r in found])


async def join_stream(request: Request) -> Response:
    server, run = await _found(request)
    last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
    after = int(last) if last and last.isdigit() else 0
    # every mode the run streams unless some are named (a client may send an empty one)
    modes = [m for m in request.query_params.getlist("stream_mode") if m] or None
    cancel = request.query_params.get("cancel_on_disconnect", "").lower() in ("1", "true")
    events = _sse(server, run, after, modes, cancel_on_disconnect=cancel)
    return EventSourceResponse(events, ping=server.heartbeat)


async def cancel_run(request: Request) -> Response:
    server, run = await _found(request)
    action = _action(request)
    if run.status in ACTIVE:
        await server.cancel([run.run_id], action)
    if request.query_params.get("wait", "").lower() in ("1", "true"):
        await server.ended(run)
    return Response(status_code=202 if "thread_id" in request.path_params else 204)


def _action(request: Request) -> str:
    action = request.query_params.get("action", "interrupt")
    if action not in ("interrupt", "rollback"):
        raise HTTPError(422, f"action must be 'interrupt' or 'rollback', got {action!r}")
    return action


async def cancel_many(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    action = _action(request)
    body = await read_body(request, schemas.RunsCancel, server.body_limit)
    ids: list[str] = []
    for run_id in body.run_ids or []:
        ids.append((await server.run(body.thread_id, run_id, owner)).run_id)
    if body.run_ids is None and body.thread_id is not None:
        await server.thread(body.thread_id, owner)
        for status in ("pending", "running"):
            if body.status in (None, "all", status):
                runs = await server.db.list_runs(body.thread_id, owner, status=status, limit=1000)
                ids += [r.run_id for r in runs]
    if ids:
        await server.cancel(ids, action)
    return Response(status_code=204)


async def delete_run(request: Request) -> Response:
    server, run = await _found(request)
    if not await server.db.delete_run(run.run_id, run.owner):
        raise HTTPError(409, f"run {run.run_id!r} is still active: cancel it first")
    return Response(status_code=204)


_T = "/threads/{thread_id}/runs"
ROUTES = [
    Route(_T, create_background, methods=["POST"]),
    Route(_T, list_runs, methods=["GET"]),
    Route(f"{_T}/stream", create_stream, methods=["POST"]),
    Route(f"{_T}/wait", create_wait, methods=["POST"]),
    Route(f"{_T}/{{run_id}}", get_run, methods=["GET"]),
    Route(f"{_T}/{{run_id}}", delete_run, methods=["DELETE"]),
    Route(f"{_T}/{{run_id}}/join", join, methods=["GET"]),
    Route(f"{_T}/{{run_id}}/stream", join_stream, methods=["GET"]),
    Route(f"{_T}/{{run_id}}/cancel", cancel_run, methods=["POST"]),
    Route("/runs", create_background, methods=["POST"]),
    Route("/runs/stream", create_stream, methods=["POST"]),
    Route("/runs/wait", create_wait, methods=["POST"]),
    Route("/runs/cancel", cancel_many, methods=["POST"]),
    Route("/runs/search", search_runs, methods=["POST"]),
    # the Agent Protocol's run paths (no thread in them)
    Route("/runs/{run_id}", get_run, methods=["GET"]),
    Route("/runs/{run_id}", delete_run, methods=["DELETE"]),
    Route("/runs/{run_id}/wait", wait_run, methods=["GET"]),
    Route("/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
]
