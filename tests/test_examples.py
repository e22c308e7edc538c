"""Checks of particular examples, beyond "runs offline" (tests/test_docs_and_examples.py)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import types
from pathlib import Path

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


def chat(web: types.ModuleType, model: object, body: dict[str, str]) -> tuple[str, list[str]]:
    from starlette.testclient import TestClient

    with (
        TestClient(web.build_app(model)) as client,
        client.stream("POST", "/chat", json=body) as response,
    ):
        assert response.status_code == 200
        return response.headers["content-type"], list(response.iter_lines())


def test_web_service_streams_chunks_as_server_sent_events(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette")
    web = load_example("web_service", monkeypatch)
    body = {"thread_id": "t1", "message": "What time is it in Tokyo?"}
    content_type, lines = chat(web, FunctionModel(web.scripted), body)

    assert content_type.startswith("text/event-stream")
    names = [line.removeprefix("event: ") for line in lines if line.startswith("event: ")]
    chunks = list(web.read_events(iter(lines)))
    assert [c.event for c in chunks] == names
    assert chunks[0].message is not None
    assert chunks[0].message.text() == body["message"]
    assert any((c.data or {}).get("status") == "invoking_tool" for c in chunks)
    assert any(c.message is not None and c.message.delta for c in chunks)
    final = chunks[-1].message
    assert final is not None
    assert (final.role, final.delta, final.text()) == ("assistant", False, "It is 21:00 there.")


def test_web_service_reports_a_failed_run_as_an_error_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("starlette")
    web = load_example("web_service", monkeypatch)

    def broken(messages: list[Message], info: ModelInfo) -> str:
        raise RuntimeError("the model is down")

    _, lines = chat(web, FunctionModel(broken), {"thread_id": "t2", "message": "hi"})
    last = list(web.read_events(iter(lines)))[-1]
    assert last.event == "error"
    assert "the model is down" in (last.data or {})["error"]


def test_web_service_refuses_a_bad_request(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    web = load_example("web_service", monkeypatch)
    with TestClient(web.build_app("test")) as client:
        assert client.post("/chat", content=b"not json").status_code == 400
        assert client.post("/chat", json={"message": "no thread"}).status_code == 400


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
