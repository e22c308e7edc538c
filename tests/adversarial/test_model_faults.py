"""Model faults, tried as a hostile provider would: on memory, SQLite and PostgreSQL.

- An answer with `choices: []` (whole or streamed) is a typed model error, and the thread keeps
  no empty assistant message.
- A tool call whose arguments are not valid JSON (cut short by `max_tokens`) is answered with
  an error result, and the next request sends valid JSON in its place: an OpenAI-compatible
  server that refuses invalid arguments (llama.cpp answers HTTP 500) still completes the run.
  That server is a real one, on loopback.

Only public API of the time before these promises is imported at module level, so that the
suite runs (and fails case by case) against the old code too.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import ModelUnavailableError
from tenxgraph.core.graph import Agent
from tenxgraph.core.llm import retry
from tenxgraph.prebuilt import ReactAgent
from tests._helpers import single_agent
from tests.core.graph._support import inp
from tests.core.llm._support import OPENAI_URL, drain
from tests.storage.conftest import Backend

KEY = "sk-test-model-faults-0123456789"


def thread() -> dict[str, Any]:
    return {"thread_id": f"faults-{uuid.uuid4().hex}"}


# -- an answer without choices ---------------------------------------------------------------

NO_CHOICE = {
    "id": "chatcmpl-empty",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o-mini",
    "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5},
}
NO_CHOICE_STREAM = (
    b"data: "
    + json.dumps({**NO_CHOICE, "object": "chat.completion.chunk"}).encode()
    + b"\n\ndata: [DONE]\n\n"
)


@pytest.fixture
def no_choice_api() -> Iterator[respx.Route]:
    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=NO_CHOICE_STREAM
            )
        return httpx.Response(200, json=NO_CHOICE)

    with respx.mock(using="httpx", assert_all_called=False) as mock:
        yield mock.post(OPENAI_URL).mock(side_effect=answer)


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
async def test_an_answer_without_choices_is_a_model_error_and_nothing_is_stored(
    backend: Backend, no_choice_api: respx.Route, streamed: bool
) -> None:
    agent = Agent("openai/gpt-4o-mini", api_key=KEY, retry_config=False)
    app = single_agent(agent, backend.store)
    config = thread()
    chunks: list[Any] = []
    run = (
        drain(app.astream(inp("hello"), config), chunks)
        if streamed
        else app.ainvoke(inp("hello"), config)
    )
    with pytest.raises(ModelUnavailableError) as info:
        await run
    error = info.value
    assert error.error_code == "MODEL_UNAVAILABLE_002"
    assert ("without an answer" if streamed else "without any choice") in error.message
    assert error.provider == "openai"
    assert no_choice_api.call_count == 1
    if streamed:
        assert chunks[-1].event == "error"
        assert chunks[-1].data["error_code"] == "MODEL_UNAVAILABLE_002"
    reopened = backend.open() if backend.is_sql else backend.store
    state = await single_agent(Agent("test"), reopened).aget_state(config)
    assert state is not None
    assert [m.role for m in state.context] == ["user"]  # no empty assistant message


async def test_an_answer_without_choices_is_retried_then_falls_back(
    no_choice_api: respx.Route, backend: Backend
) -> None:
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=KEY,
        retry_config=retry.RetryConfig(max_retries=1),
        fallback_models=["test"],
    )
    result = await single_agent(agent, backend.store).ainvoke(inp("hello"), thread())
    assert no_choice_api.call_count == 2  # like a 5xx: once more, then the next model
    assert [m.role for m in result["messages"]] == ["user", "assistant"]
    assert result["messages"][-1].text()  # the offline fallback's answer


# -- a tool call cut short by max_tokens, against a server that refuses invalid JSON ----------

CUT_ARGUMENTS = '{"city": "Par'  # the model ran out of tokens mid-way


@dataclass
class StrictServer:
    """An OpenAI-compatible chat server on loopback that, like llama.cpp, answers HTTP 500
    when an assistant tool call in the history has arguments that are not valid JSON. Its
    model asks for a tool call cut short by max_tokens, then answers once it has a result."""

    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        for message in body.get("messages", []):
            for call in message.get("tool_calls") or ():
                try:
                    json.loads(call["function"]["arguments"])
                except (TypeError, ValueError):
                    self.refused += 1
                    error = "Failed to parse tool call arguments as JSON"
                    return 500, {"error": {"code": 500, "message": error, "type": "server_error"}}
        if any(m.get("role") == "tool" for m in body["messages"]):
            return 200, completion({"role": "assistant", "content": "It is sunny."}, "stop")
        call = {
            "id": "call_cut",
            "type": "function",
            "function": {"name": "get_weather", "arguments": CUT_ARGUMENTS},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return 200, completion(message, "length")


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": 1,
        "model": "llama-3.2-3b",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def as_stream(answer: dict[str, Any]) -> bytes:
    """The chunks a streaming server sends for `answer`: the message, the finish, the usage."""
    choice = answer["choices"][0]
    delta = dict(choice["message"])
    if delta.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **c} for c in delta["tool_calls"]]
    base = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    events = [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": answer["usage"]},
    ]
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def handler_for(server: StrictServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            status, answer = server.answer(body)
            streamed = status == 200 and body.get("stream")
            payload = as_stream(answer) if streamed else json.dumps(answer).encode()
            self.send_response(status)
            self.send_header(
                "Content-Type", "text/event-stream" if streamed else "application/json"
            )
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return None

    return Handler


@pytest.fixture
def strict_server() -> Iterator[StrictServer]:
    server = StrictServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(server))
    server.port = httpd.server_address[1]
    worker = threading.Thread(target=httpd.serve_forever, daemon=True)
    worker.start()
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        worker.join()


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"Sunny in {city}"


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])
async def test_a_tool_call_cut_short_goes_back_as_valid_json_and_the_run_completes(
    backend: Backend, strict_server: StrictServer, streamed: bool
) -> None:
    agent = ReactAgent(
        "openai/llama-3.2-3b",
        [get_weather],
        api_base=strict_server.base,
        api_key="sk-no-key-required",
        retry_config=retry.RetryConfig(max_retries=1),
    )
    app = agent.compile(checkpointer=backend.store)
    config = thread()
    if streamed:
        chunks = [c async for c in app.astream(inp("Weather in Paris?"), config)]
        assert not [c for c in chunks if c.event == "error"]
    else:
        await app.ainvoke(inp("Weather in Paris?"), config)
    state = await app.aget_state(config)
    assert state is not None
    assert [m.role for m in state.context] == ["user", "assistant", "tool", "assistant"]
    assert state.context[-1].text() == "It is sunny."
    tool_result = state.context[2].text()
    assert "not valid JSON" in tool_result  # the model is told what was wrong
    assert strict_server.refused == 0
    assert len(strict_server.requests) == 2
    (sent_call,) = strict_server.requests[1]["messages"][-2]["tool_calls"]
    assert json.loads(sent_call["function"]["arguments"]) == {}
