"""Checks of particular examples, beyond "runs offline" (tests/test_docs_and_examples.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _mounted(web: types.ModuleType, model: object, tmp_path: Path) -> Any:
    from starlette.testclient import TestClient

    return TestClient(web.build_app(model, str(tmp_path / "server.db")))


def _sse(lines: Iterator[str]) -> list[tuple[str, Any]]:
    """(event, data) pairs of an SSE body."""
    found, event = [], ""
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            found.append((event, json.loads(line[6:])))
    return found


def test_web_service_mounts_the_agent_server_beside_its_own_routes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("sse_starlette")
    web = load_example("web_service", monkeypatch)
    with _mounted(web, FunctionModel(web.scripted), tmp_path) as client:
        assert client.get("/health").json() == {"status": "ok"}
        assert client.get("/agent/ok").status_code == 200
        thread = client.post("/agent/threads", json={}).json()["thread_id"]
        body = {
            "assistant_id": "clock",
            "input": {"messages": [{"type": "human", "content": "What time is it in Lima?"}]},
            "stream_mode": ["messages-tuple", "updates"],
        }
        with client.stream("POST", f"/agent/threads/{thread}/runs/stream", json=body) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            events = _sse(r.iter_lines())
        state = client.get(f"/agent/threads/{thread}/state").json()

    names = [name for name, _ in events]
    assert names[0] == "metadata"
    assert names[-1] == "end"
    assert "updates" in names
    chunks = [data[0] for name, data in events if name == "messages"]
    assert any(c["type"] == "AIMessageChunk" and c["content"] for c in chunks)
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[-1]["content"] == "It is 07:00 there."


def test_web_service_reports_a_failed_run_as_an_error_event(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("sse_starlette")
    web = load_example("web_service", monkeypatch)

    def broken(messages: list[Message], info: ModelInfo) -> str:
        raise RuntimeError("the model is down")

    body = {"assistant_id": "clock", "input": {"messages": ["hi"]}}
    with (
        _mounted(web, FunctionModel(broken), tmp_path) as client,
        client.stream("POST", "/agent/runs/stream", json=body) as response,
    ):
        events = _sse(response.iter_lines())
    errors = [data for name, data in events if name == "error"]
    assert len(errors) == 1
    assert "the model is down" in errors[0]["message"]
    assert events[-1][0] == "end"


def test_web_service_refuses_a_bad_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("sse_starlette")
    web = load_example("web_service", monkeypatch)
    with _mounted(web, "test", tmp_path) as client:
        assert client.post("/agent/threads", content=b"not json").status_code == 422
        bad = client.post("/agent/runs/wait", json={"assistant_id": "clock", "stream_mode": "x"})
        assert bad.status_code == 422
        assert "stream_mode" in bad.json()["detail"]
        assert client.post("/agent/runs/wait", json={"assistant_id": "nope"}).status_code == 404


def test_tracing_prints_the_span_tree_of_a_react_run() -> None:
    pytest.importorskip("opentelemetry.sdk")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "tracing.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spans = re.findall(r"^(\S+ \S+) +span=(\w+) parent=(\S+)", done.stdout, re.M)
    names = {span_id: name for name, span_id, _ in spans}
    tree = [(name, names.get(parent, parent)) for name, _, parent in spans]
    assert tree == [
        ("chat offline", "node agent"),
        ("node agent", "invoke_agent weather_agent"),
        ("execute_tool get_weather", "node tools"),
        ("node tools", "invoke_agent weather_agent"),
        ("chat offline", "node agent"),
        ("node agent", "invoke_agent weather_agent"),
        ("invoke_agent weather_agent", "-"),
    ]
    assert done.stdout.strip().endswith("answer: Here is the weather: Lisbon: 21 C, sunny")


async def test_handoffs_pass_the_conversation_between_agents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handoffs = load_example("handoffs", monkeypatch)
    app = handoffs.build(None)
    config = {"thread_id": "c"}
    first = await app.ainvoke({"messages": [Message.text_message("A refund, please")]}, config)
    tools = [m.metadata["function_name"] for m in first["messages"] if m.role == "tool"]
    assert tools == ["transfer_to_billing", "refund"]  # billing ran its own tool after the handoff
    assert first["messages"][-1].text() == "Billing here: Order 42 refunded."
    state = await app.aget_state(config)
    assert state.active == "billing"
    # the next turn starts with billing, which hands back to triage
    second = await app.ainvoke({"messages": [Message.text_message("Thanks")]}, config)
    assert [m.role for m in second["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert second["messages"][-1].text() == "Triage here: how can I help?"
    assert (await app.aget_state(config)).active == "triage"
