"""The Agent Protocol's thread streaming transport over HTTP: `POST /threads/{id}/commands`
(`run.start`, which makes the thread on first use and resumes a paused one; `input.respond`;
`state.get`) and `POST /threads/{id}/stream`, an SSE stream of the thread's run events as the
protocol frames them (`{"type": "event", "method", "params": {"namespace", "timestamp",
"data"}}`), filtered by channel and namespace: `values`, `updates`, `messages` (LangGraph's
message tuples), `custom`, `lifecycle` (started, then completed, failed or interrupted) and
`input` (`input.requested` when a run pauses for a human). The stream follows the thread's
active run (or its next one, or its last), then every later run, until the client closes it;
`since` replays the first followed run's events after that sequence number (sequence numbers
count each run's events). `GET /threads/{id}/stream` is LangGraph's thread stream instead
(`client.threads.join_stream`): the same runs' events as LangGraph's run streams send them
(the spec's WebSocket upgrade on that path is not offered)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tenxgraph.serve import schemas
from tenxgraph.serve.bus import QUEUE, wait_for
from tenxgraph.serve.http import HTTPError, answer, read_body
from tenxgraph.serve.records import ACTIVE, RunEvent, RunRecord
from tenxgraph.serve.routes.threads import read_state, state_json
from tenxgraph.serve.server import Server
from tenxgraph.serve.streaming import END, POLL_SECONDS, wanted
from tenxgraph.serve.wire import WireError

#: what runs started with `run.start` record: every channel the stream can send
PROTOCOL_MODES = ["values", "updates", "messages-tuple", "custom"]
_PHASES = {"error": "failed", "interrupted": "interrupted", "timeout": "failed"}


def _server(request: Request) -> Server:
    server: Server = request.app.state.tenxgraph
    return server


def _failure(command_id: int | None, error: str, message: str) -> dict[str, Any]:
    return {"type": "error", "id": command_id, "error": error, "message": message}


async def commands(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    thread_id = request.path_params["thread_id"]
    command = await read_body(request, schemas.StreamingCommand, server.body_limit)
    try:
        if command.method == "state.get":
            thread = await server.thread(thread_id, owner)
            state, version = await read_state(server.graph_of(thread), thread_id)
            result = state_json(thread_id, state, version)
        elif command.method in ("run.start", "input.respond"):
            result = {"run_id": await _start(server, owner, thread_id, command)}
        else:
            known = "run.start, input.respond, state.get"
            message = f"unknown command {command.method!r}; this server knows {known}"
            return answer(_failure(command.id, "unknown_command", message))
    except HTTPError as exc:
        if exc.status == 404:  # an unknown thread (or another user's) is the path's 404
            raise
        error = "conflict" if exc.status == 409 else "invalid_argument"
        return answer(_failure(command.id, error, exc.detail))
    return answer({"type": "success", "id": command.id, "result": result, "meta": {}})


async def _start(server: Server, owner: str, thread_id: str, command: Any) -> str:
    """Queue the run a command asks for: `run.start` starts one (a resume when the thread is
    paused, after the running one otherwise); `input.respond` answers the pending interrupt."""
    params = command.params
    thread = await server.db.get_thread(thread_id, owner)
    graph_id = params.get("assistant_id") or params.get("assistantId")
    if graph_id is None and thread is not None:
        graph_id = thread.metadata.get("graph_id")
    body: dict[str, Any] = {
        "assistant_id": graph_id or next(iter(server.graphs)),
        "config": params.get("config"),
        "metadata": params.get("metadata") or {},
        "stream_mode": PROTOCOL_MODES,
        "if_not_exists": "create",
    }
    if command.method == "input.respond":
        body["command"] = {"resume": params.get("response"), "update": params.get("update")}
    elif thread is not None and thread.status == "interrupted":
        body["command"] = {"resume": params.get("input")}
    else:
        body["input"] = params.get("input")
    try:
        run_body = schemas.RunCreate.model_validate(body)
        run_body.check_input()
    except (ValueError, WireError) as exc:
        raise HTTPError(422, f"invalid command params: {exc}") from None
    run = await server.create_run(owner, thread_id, run_body)
    return run.run_id


async def stream(request: Request) -> Response:
    server = _server(request)
    owner = await server.owner(request)
    thread = await server.thread(request.path_params["thread_id"], owner)
    body = await read_body(request, schemas.ThreadEvents, server.body_limit)
    return EventSourceResponse(
        _events(server, owner, thread.thread_id, body), ping=server.heartbeat
    )


async def join_thread(request: Request) -> Response:
    """LangGraph's thread stream (`client.threads.join_stream`): the thread's run events as
    its runs stream them, from its active run (or its last) on, in the modes asked for
    (default: every mode each run streams)."""
    server = _server(request)
    owner = await server.owner(request)
    thread = await server.thread(request.path_params["thread_id"], owner)
    modes = [m for m in request.query_params.getlist("stream_mode") if m not in ("", "run_modes")]
    return EventSourceResponse(
        _run_events(server, owner, thread.thread_id, modes or None), ping=server.heartbeat
    )


async def _run_events(
    server: Server, owner: str, thread_id: str, modes: list[str] | None
) -> AsyncIterator[ServerSentEvent]:
    async for run, event in _thread_events(server, owner, thread_id, 0):
        if modes is None or wanted(event.event, modes):
            yield ServerSentEvent(
                data=event.data, event=event.event, id=f"{run.run_id}:{event.seq}"
            )


async def _thread_events(
    server: Server, owner: str, thread_id: str, since: int
) -> AsyncIterator[tuple[RunRecord, RunEvent]]:
    """The events of the thread's runs: its active run's (or its last one's) after `since`,
    then every later run's, until the client goes away."""
    runs = await server.db.list_runs(thread_id, owner, limit=1000)  # newest first
    active = [i for i, r in enumerate(runs) if r.status in ACTIVE]
    first = active[-1] if active else 0  # the oldest active run, else the last one
    done = {r.run_id for r in runs[first + 1 :]}
    after = since
    while True:
        run = await _next_run(server, owner, thread_id, done)
        done.add(run.run_id)
        async for event in server.events(run, after):
            yield run, event
        after = 0


async def _next_run(server: Server, owner: str, thread_id: str, done: set[str]) -> RunRecord:
    """The thread's oldest run not in `done`, waiting for one to be queued."""
    with server.bus.watch(QUEUE) as woke:
        while True:
            woke.clear()
            runs = await server.db.list_runs(thread_id, owner, limit=1000)  # newest first
            fresh = [r for r in runs if r.run_id not in done]
            if fresh:
                return fresh[-1]
            await wait_for(woke, POLL_SECONDS)


async def _events(
    server: Server, owner: str, thread_id: str, body: schemas.ThreadEvents
) -> AsyncIterator[ServerSentEvent]:
    async for run, event in _thread_events(server, owner, thread_id, body.since):
        for method, namespace, data in await _translate(server, run, event):
            if _wanted(method, namespace, body):
                yield _framed(run, event.seq, method, namespace, data)


async def _translate(
    server: Server, run: RunRecord, event: RunEvent
) -> list[tuple[str, list[str], Any]]:
    """What a run event is in the protocol: (method, namespace, data) of each event it gives.
    The run's start and end are `lifecycle` events (its end says how it ended: completed,
    failed, or interrupted), a pause for a human is also an `input.requested` event."""
    base, *namespace = event.event.split("|")
    data = json.loads(event.data)
    if base == "metadata":
        return [("lifecycle", namespace, {"event": "started", "run_id": run.run_id})]
    if base == END:
        ended = await server.db.get_run(run.run_id, None)
        status = "success" if ended is None else ended.status
        phase = _PHASES.get(status, "completed")
        end = {"event": phase, "run_id": run.run_id}
        if ended is not None and ended.result and "__error__" in ended.result:
            end["error"] = ended.result["__error__"]
        return [("lifecycle", namespace, end)]
    if base == "error" or base.startswith("messages/"):
        return []  # an error is told by the run's end; the older messages mode is not sent
    found = [(base, namespace, data)]
    for interrupt in (data.get("__interrupt__") or []) if base == "updates" else []:
        asked = {"interrupt_id": interrupt.get("id"), "value": interrupt.get("value")}
        found.append(("input.requested", namespace, asked))
    return found


def _wanted(method: str, namespace: list[str], body: schemas.ThreadEvents) -> bool:
    if method.split(".", 1)[0] not in body.channels:
        return False
    return body.namespaces is None or any(
        namespace[: len(prefix)] == prefix
        and (body.depth is None or len(namespace) - len(prefix) <= body.depth)
        for prefix in body.namespaces
    )


def _framed(
    run: RunRecord, seq: int, method: str, namespace: list[str], data: Any
) -> ServerSentEvent:
    event_id = f"{run.run_id}:{seq}:{method}"
    framed = {
        "type": "event",
        "eventId": event_id,
        "seq": seq,
        "method": method,
        "params": {"namespace": namespace, "timestamp": int(time.time() * 1000), "data": data},
    }
    return ServerSentEvent(data=json.dumps(framed), event=method, id=event_id)


ROUTES = [
    Route("/threads/{thread_id}/commands", commands, methods=["POST"]),
    Route("/threads/{thread_id}/stream", stream, methods=["POST"]),
    Route("/threads/{thread_id}/stream", join_thread, methods=["GET"]),
    Route("/threads/{thread_id}/stream/events", stream, methods=["POST"]),  # LangGraph's path
]
