"""Auth (every route but /ok and the page needs a token; one user never sees another's
threads, runs or store items: 404, and nothing of theirs changes) and request validation
(422 naming the field, 413 past the body limit, 404 for unknown ids)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError
from starlette.requests import Request
from starlette.routing import Route

from tenxgraph.serve import bearer_tokens
from tenxgraph.serve.routes import page
from tests.serve.conftest import Served

TOKENS = {"auth": bearer_tokens({"ta": "alice", "tb": "bob"})}
HELLO = {"messages": [{"type": "human", "content": "hello"}]}


async def _drain(parts: AsyncIterator[Any]) -> None:
    async for _ in parts:
        pass


async def _is_404(attempt: Awaitable[Any]) -> None:
    """`attempt` fails with 404 (LangGraph's client raises `NotFoundError`, or httpx's error
    from the calls it makes with reconnects: join, cancel with wait, wait)."""
    with pytest.raises((NotFoundError, httpx.HTTPStatusError)) as raised:
        await attempt
    error = raised.value
    response = error.response if isinstance(error, httpx.HTTPStatusError) else None
    assert response is None or response.status_code == 404


@pytest.mark.parametrize("served", [TOKENS], indirect=True)
async def test_every_route_but_ok_and_the_page_needs_a_token(served: Served) -> None:
    open_paths = {"/ok"} | {route.path for route in page.ROUTES}
    checked = 0
    async with served.http() as anonymous, served.http("wrong") as stranger:
        for route in served.app.routes:
            if not isinstance(route, Route) or route.path in open_paths:
                continue
            path = re.sub(r"{[^}]+}", "x", route.path)
            for method in sorted((route.methods or set()) - {"HEAD"}):
                for http in (anonymous, stranger):
                    response = await http.request(method, path, json={})
                    assert response.status_code == 401, (method, route.path)
                    assert "detail" in response.json()
                checked += 1
        assert (await anonymous.get("/ok")).status_code == 200
    assert checked > 30


async def _alices(served: Served) -> dict[str, Any]:
    alice = served.client("ta")
    thread = await alice.threads.create(metadata={"owner": "alice"})
    thread_id = thread["thread_id"]
    await alice.runs.wait(thread_id, "agent", input=HELLO)
    run = (await alice.runs.list(thread_id))[0]
    paused = (await alice.threads.create())["thread_id"]
    await alice.runs.wait(paused, "approval", input=HELLO)
    await alice.store.put_item(["notes"], "n1", {"text": "secret"})
    return {"thread_id": thread_id, "run_id": run["run_id"], "paused": paused}


async def _snapshot(alice: LangGraphClient, ids: dict[str, Any]) -> Any:
    return (
        await alice.threads.get(ids["thread_id"]),
        await alice.threads.get_state(ids["thread_id"]),
        await alice.runs.list(ids["thread_id"]),
        await alice.threads.get_state(ids["paused"]),
        await alice.store.get_item(["notes"], "n1"),
    )


@pytest.mark.parametrize("served", [TOKENS], indirect=True)
async def test_bob_never_reaches_alices_threads_runs_or_items(served: Served) -> None:
    ids = await _alices(served)
    alice, bob = served.client("ta"), served.client("tb")
    before = await _snapshot(alice, ids)
    tid, rid = ids["thread_id"], ids["run_id"]
    attempts = [
        bob.threads.get(tid),
        bob.threads.get_state(tid),
        bob.threads.get_history(tid),
        bob.threads.update(tid, metadata={"owner": "bob"}),
        bob.threads.update_state(tid, {"messages": [{"type": "human", "content": "x"}]}),
        bob.threads.copy(tid),
        bob.threads.delete(tid),
        bob.runs.list(tid),
        bob.runs.get(tid, rid),
        bob.runs.join(tid, rid),
        _drain(bob.runs.join_stream(tid, rid)),
        bob.runs.cancel(tid, rid),
        bob.runs.delete(tid, rid),
        bob.runs.create(tid, "agent", input=HELLO),
        bob.runs.wait(tid, "agent", input=HELLO),
        _drain(bob.runs.stream(tid, "agent", input=HELLO)),
        bob.runs.wait(ids["paused"], "approval", command={"resume": "yes"}),
        bob.runs.cancel_many(thread_id=tid),
        bob.store.get_item(["notes"], "n1"),
    ]
    for attempt in attempts:
        await _is_404(attempt)
    assert await bob.threads.search() == []
    assert await bob.threads.count() == 0
    assert (await bob.store.search_items(["notes"]))["items"] == []
    assert (await bob.store.list_namespaces())["namespaces"] == []
    async with served.http("tb") as http:
        assert (await http.get(f"/runs/{rid}")).status_code == 404
        assert (await http.get(f"/runs/{rid}/wait")).status_code == 404
        assert (await http.post(f"/runs/{rid}/cancel")).status_code == 404
        assert (await http.delete(f"/runs/{rid}")).status_code == 404
        assert (await http.get(f"/threads/{tid}/runs/{rid}/join")).status_code == 404
        assert (await http.get(f"/threads/{tid}/history")).status_code == 404
        assert (await http.post("/runs/search", json={})).json() == []
        assert (await http.post("/runs/search", json={"thread_id": tid})).status_code == 404
        body = {
            "thread_id": tid,
            "agent_id": "agent",
            "messages": [{"role": "user", "content": "x"}],
        }
        assert (await http.post("/runs", json=body)).status_code == 404
        assert (await http.post("/runs/wait", json=body)).status_code == 404
        for path in (f"/threads/{tid}/stream", f"/threads/{tid}/stream/events"):
            stream = await http.post(path, json={"channels": ["values"]})
            assert stream.status_code == 404
        assert (await http.get(f"/threads/{tid}/stream")).status_code == 404
        for method, params in [("state.get", {}), ("run.start", {"input": HELLO}),
                               ("input.respond", {"response": "yes"})]:  # fmt: skip
            command = {"id": 1, "method": method, "params": params}
            for thread in (tid, ids["paused"]):
                answer = await http.post(f"/threads/{thread}/commands", json=command)
                assert answer.status_code == 404, (method, answer.text)
    assert await _snapshot(alice, ids) == before


async def _carol(request: Request) -> str | None:
    return "carol" if request.headers.get("authorization") == "Bearer tc" else None


@pytest.mark.parametrize("served", [{"auth": _carol}], indirect=True)
async def test_an_async_auth_callable(served: Served) -> None:
    carol = served.client("tc")
    thread = await carol.threads.create()
    assert (await carol.threads.get(thread["thread_id"]))["thread_id"] == thread["thread_id"]
    async with served.http() as anonymous:
        assert (await anonymous.get(f"/threads/{thread['thread_id']}")).status_code == 401


async def _detail(served: Served, method: str, path: str, **kwargs: Any) -> tuple[int, str]:
    async with served.http() as http:
        response = await http.request(method, path, **kwargs)
    return response.status_code, str(response.json()["detail"])


async def test_invalid_requests_are_422_naming_the_field(served: Served) -> None:
    thread_id = (await served.client().threads.create())["thread_id"]
    runs = f"/threads/{thread_id}/runs"
    status, detail = await _detail(
        served, "POST", "/threads", content=b"{not json", headers={"content-type": "x"}
    )
    assert (status, "not JSON" in detail) == (422, True)
    cases = [
        ("POST", "/threads", {"metadata": "x"}, "metadata"),
        ("POST", "/threads/search", {"limit": 0}, "limit"),
        ("POST", "/threads/search", {"limit": 100000}, "limit"),
        ("POST", "/threads/search", {"offset": -1}, "offset"),
        ("POST", "/threads/search", {"values": {"a": 1}}, "values"),
        ("POST", "/threads/count", {"values": {"a": 1}}, "values"),
        ("POST", "/threads", {"supersteps": [{"updates": []}]}, "supersteps"),
        ("POST", f"{runs}/stream", {"assistant_id": "agent", "stream_mode": "bogus"},
         "stream_mode"),
        ("POST", runs, {"assistant_id": "agent", "webhook": "http://127.0.0.1:9/x"}, "webhook"),
        ("POST", runs, {"assistant_id": 3}, "assistant_id"),
        ("POST", runs, {"assistant_id": "agent", "input": {"messages": 5}}, "messages"),
        ("POST", runs, {"assistant_id": "agent", "multitask_strategy": "x"},
         "multitask_strategy"),
    ]  # fmt: skip
    for method, path, body, field in cases:
        status, detail = await _detail(served, method, path, json=body)
        assert (status, field in detail) == (422, True), (path, body, detail)
    status, detail = await _detail(served, "GET", f"{runs}?limit=5000")
    assert (status, "limit" in detail) == (422, True)
    cancel = {"thread_id": thread_id}
    status, detail = await _detail(served, "POST", "/runs/cancel?action=bogus", json=cancel)
    assert (status, "action" in detail) == (422, True)
    assert await served.client().runs.list(thread_id) == []  # nothing was queued


@pytest.mark.parametrize("served", [{"body_limit": 1000}], indirect=True)
async def test_a_body_over_the_limit_is_413(served: Served) -> None:
    big = {"metadata": {"blob": "x" * 2000}}
    status, detail = await _detail(served, "POST", "/threads", json=big)
    assert (status, "1000" in detail) == (413, True)

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted as it comes
        yield b'{"metadata": {"blob": "'
        yield b"x" * 2000
        yield b'"}}'

    status, _ = await _detail(served, "POST", "/threads", content=chunks())
    assert status == 413
    assert (await served.client().threads.create(metadata={"small": 1}))["metadata"]


async def test_unknown_assistant_thread_and_run_are_404(client: LangGraphClient) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    unknown = "00000000-0000-0000-0000-000000000000"
    attempts = [
        client.runs.create(thread_id, "nobody", input=HELLO),
        client.runs.create(unknown, "agent", input=HELLO),
        client.runs.get(thread_id, unknown),
        client.runs.join(thread_id, unknown),
        client.threads.get_state(unknown),
        client.assistants.get_graph("nobody"),
    ]
    for attempt in attempts:
        await _is_404(attempt)
