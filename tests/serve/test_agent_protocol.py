"""The Agent Protocol's own paths (its OpenAPI spec), each answering the spec's shape for a
simple case, with plain httpx against the same server LangGraph's client drives."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.serve.conftest import Served
from tests.serve.graphs import ANSWER_PIECES

ANSWER = "".join(ANSWER_PIECES)
SAY = [{"role": "user", "content": "hello"}]
RUN_FIELDS = {"run_id", "created_at", "updated_at", "status", "metadata"}
THREAD_FIELDS = {"thread_id", "created_at", "updated_at", "metadata", "status"}


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def sse(http: httpx.AsyncClient, method: str, path: str, **kw: Any) -> list[tuple[str, Any]]:
    """The (event, data) pairs of an SSE answer, until its run ends."""
    found: list[tuple[str, Any]] = []
    async with http.stream(method, path, **kw) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                data = json.loads(line.split(":", 1)[1])
                found.append((event, data))
                if event == "end" or (isinstance(data, dict) and _completed(data)):
                    break
    return found


def _completed(data: dict[str, Any]) -> bool:
    """Whether a protocol event ends its run's stream (a pause for a human ends it too)."""
    ends = ("completed", "failed", "interrupted")
    return data.get("method") == "lifecycle" and data["params"]["data"]["event"] in ends


async def test_agents(served: Served) -> None:
    async with served.http() as http:
        agents = ok(await http.post("/agents/search", json={"limit": 2}))
        assert len(agents) == 2
        assert all({"agent_id", "name", "capabilities"} <= set(a) for a in agents)
        agent = ok(await http.get("/agents/agent"))
        assert agent["agent_id"] == "agent"
        assert agent["capabilities"]["ap.io.messages"] is True
        schemas = ok(await http.get("/agents/agent/schemas"))
        assert {"agent_id", "input_schema", "output_schema"} <= set(schemas)
        assert (await http.get("/agents/nobody")).status_code == 404


async def test_threads_and_history(served: Served) -> None:
    async with served.http() as http:
        thread = ok(await http.post("/threads", json={"metadata": {"k": "v"}}))
        assert set(thread) >= THREAD_FIELDS
        tid = thread["thread_id"]
        assert ok(await http.post("/threads/search", json={"metadata": {"k": "v"}}))[0] == thread
        body = {"thread_id": tid, "agent_id": "agent", "messages": SAY}
        ok(await http.post("/runs/wait", json=body))
        history = ok(await http.get(f"/threads/{tid}/history", params={"limit": 2}))
        assert len(history) == 2
        assert all({"checkpoint", "values"} <= set(h) for h in history)
        newest = history[0]["checkpoint"]["checkpoint_id"]
        older = ok(await http.get(f"/threads/{tid}/history", params={"before": newest}))
        assert older[0]["checkpoint"]["checkpoint_id"] == history[1]["checkpoint"]["checkpoint_id"]
        assert (await http.get(f"/threads/{tid}/history?limit=0")).status_code == 422
        copy = ok(await http.post(f"/threads/{tid}/copy"))
        assert set(copy) >= THREAD_FIELDS
        patched = ok(await http.patch(f"/threads/{tid}", json={"metadata": {"k": "w"}}))
        assert patched["metadata"]["k"] == "w"
        assert ok(await http.get(f"/threads/{tid}"))["values"]["messages"][-1]["content"] == ANSWER
        ok(await http.delete(f"/threads/{tid}"), 204)
        assert (await http.get(f"/threads/{tid}")).status_code == 404


async def test_runs_on_a_thread_named_in_the_body(served: Served) -> None:
    async with served.http() as http:
        tid = ok(await http.post("/threads", json={}))["thread_id"]
        body = {"thread_id": tid, "agent_id": "agent", "messages": SAY, "metadata": {"tag": "a"}}
        run = ok(await http.post("/runs", json=body))
        assert set(run) >= RUN_FIELDS
        assert run["thread_id"] == tid
        waited = ok(await http.get(f"/runs/{run['run_id']}/wait"))
        assert waited["run"]["status"] == "success"
        assert waited["values"]["messages"][-1]["content"] == ANSWER
        assert waited["messages"][-1]["content"] == ANSWER
        assert ok(await http.get(f"/runs/{run['run_id']}"))["status"] == "success"
        replay = await sse(http, "GET", f"/runs/{run['run_id']}/stream")
        assert replay[-1][0] == "end"
        ok(await http.post(f"/runs/{run['run_id']}/cancel"), 204)  # ended: nothing to do
        searched = ok(await http.post("/runs/search", json={"thread_id": tid}))
        assert [r["run_id"] for r in searched] == [run["run_id"]]
        assert (
            ok(await http.post("/runs/search", json={"metadata": {"tag": "a"}}))[0] == searched[0]
        )
        assert ok(await http.post("/runs/search", json={"agent_id": "held"})) == []
        assert ok(await http.post("/runs/search", json={"status": "error"})) == []
        assert (await http.post("/runs/search", json={"limit": 0})).status_code == 422
        ok(await http.delete(f"/runs/{run['run_id']}"), 204)
        assert (await http.get(f"/runs/{run['run_id']}")).status_code == 404


async def test_stateless_runs_wait_and_stream(served: Served) -> None:
    async with served.http() as http:
        waited = ok(
            await http.post("/runs/wait", json={"agent_id": "agent", "input": {"messages": SAY}})
        )
        assert set(waited["run"]) >= RUN_FIELDS
        assert waited["values"]["messages"][-1]["content"] == ANSWER
        events = await sse(
            http, "POST", "/runs/stream", json={"messages": SAY, "stream_mode": "values"}
        )
        assert events[0][0] == "metadata"
        assert events[-2][1]["messages"][-1]["content"] == ANSWER
        assert ok(await http.post("/threads/search", json={})) == []


async def test_commands_and_the_thread_event_stream(served: Served) -> None:
    async with served.http() as http:
        tid = ok(await http.post("/threads", json={}))["thread_id"]
        start = {"id": 1, "method": "run.start",
                 "params": {"assistant_id": "approval", "input": {"messages": SAY}}}  # fmt: skip
        started = ok(await http.post(f"/threads/{tid}/commands", json=start))
        assert started["type"] == "success"
        assert started["id"] == 1
        assert started["result"]["run_id"]
        channels = {"channels": ["updates", "lifecycle", "input"]}
        events = await sse(http, "POST", f"/threads/{tid}/stream", json=channels)
        assert all(data["type"] == "event" for _, data in events)
        methods = [data["method"] for _, data in events]
        assert set(methods) == {"updates", "lifecycle", "input.requested"}
        assert events[0][1]["params"]["data"]["event"] == "started"
        assert events[-1][1]["params"]["data"]["event"] == "interrupted"
        asked = next(d for _, d in events if d["method"] == "input.requested")
        assert asked["params"]["namespace"] == []
        assert asked["params"]["data"]["value"] == {"amount": 40, "to": "Bob"}
        assert asked["params"]["data"]["interrupt_id"]
        state = ok(
            await http.post(f"/threads/{tid}/commands", json={"id": 2, "method": "state.get"})
        )
        assert state["result"]["interrupts"][0]["value"] == {"amount": 40, "to": "Bob"}
        respond = {"id": 3, "method": "input.respond", "params": {"response": "yes"}}
        answered = ok(await http.post(f"/threads/{tid}/commands", json=respond))
        after = await sse(
            http, "POST", f"/threads/{tid}/stream", json={"channels": ["values", "lifecycle"]}
        )
        assert after[-2][1]["params"]["data"]["messages"][-1]["content"] == "done: sent 40 to Bob"
        assert after[-1][1]["params"]["data"]["event"] == "completed"
        assert after[0][1]["params"]["data"]["run_id"] == answered["result"]["run_id"]
        unknown = ok(await http.post(f"/threads/{tid}/commands", json={"id": 4, "method": "x.y"}))
        assert unknown["type"] == "error"
        assert unknown["id"] == 4
        assert "x.y" in unknown["message"]
        wrong = {"id": 5, "method": "run.start", "params": {"input": {"messages": 5}}}
        refused = ok(await http.post(f"/threads/{tid}/commands", json=wrong))
        assert refused["type"] == "error"
        assert "messages" in refused["message"]
        bad = await http.post(f"/threads/{tid}/stream", json={"channels": []})
        assert bad.status_code == 422


async def test_store(served: Served) -> None:
    async with served.http() as http:
        put = {"namespace": ["a", "b"], "key": "k", "value": {"x": 1}}
        ok(await http.put("/store/items", json=put), 204)
        item = ok(await http.get("/store/items", params={"namespace": "a.b", "key": "k"}))
        assert {"namespace", "key", "value", "created_at", "updated_at"} <= set(item)
        found = ok(await http.post("/store/items/search", json={"namespace_prefix": ["a"]}))
        assert [i["key"] for i in found["items"]] == ["k"]
        spaces = ok(await http.post("/store/namespaces", json={}))
        assert spaces["namespaces"] == [["a", "b"]]
        ok(
            await http.request(
                "DELETE", "/store/items", json={"namespace": ["a", "b"], "key": "k"}
            ),
            204,
        )
        assert (
            await http.get("/store/items", params={"namespace": "a.b", "key": "k"})
        ).status_code == 404


async def test_a_failing_run_ends_its_thread_stream_as_failed(served: Served) -> None:
    async with served.http() as http:
        tid = "7d0e7f0a-0000-4000-8000-000000000001"  # made by the first run.start
        params = {"assistant_id": "failing", "input": {"messages": SAY}}
        start = {"id": 1, "method": "run.start", "params": params}
        assert ok(await http.post(f"/threads/{tid}/commands", json=start))["type"] == "success"
        events = await sse(http, "POST", f"/threads/{tid}/stream", json={"channels": ["lifecycle"]})
        phases = [data["params"]["data"]["event"] for _, data in events]
        assert phases == ["started", "failed"]
        assert "the step broke" in events[-1][1]["params"]["data"]["error"]["message"]
