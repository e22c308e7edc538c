"""A web service: POST /chat streams a run's chunks as Server-Sent Events (Starlette).

    python examples/web_service.py                      # offline, in-process: binds no port
    python examples/web_service.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)
    python examples/web_service.py --serve [model]      # serve on 127.0.0.1:8000 (uvicorn)

POST /chat takes {"thread_id": ..., "message": ...} and answers `text/event-stream`: one SSE
event per `StreamChunk` (`event:` its kind, `data:` its JSON). Without --serve the endpoint is
called in-process with Starlette's TestClient and the events are printed. Needs
`pip install starlette` (in the dev extra); --serve also needs uvicorn.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, asynccontextmanager

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient
except ImportError:
    raise SystemExit("this example needs Starlette: pip install starlette") from None

from tenxgraph.core.llm import FunctionModel, ModelClient, ModelInfo
from tenxgraph.core.state import Message, StreamChunk, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer

logger = logging.getLogger("web_service")
TIMES = {"tokyo": "21:00", "lima": "07:00"}
CURL_BODY = """'{"thread_id": "t1", "message": "What time is it in Tokyo?"}'"""


def local_time(city: str) -> str:
    """The local time in a city."""
    return TIMES.get(city.lower(), "unknown")


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: asks the tool, then answers with its result."""
    if messages[-1].role == "tool":
        return f"It is {messages[-1].text()} there."
    city = messages[-1].text().rstrip("?").split()[-1]
    return ToolCallBlock(id=f"t-{len(messages)}", name="local_time", args={"city": city})


def build_app(model: str | ModelClient) -> Starlette:
    agent = ReactAgent(model, [local_time], "Answer in one short sentence.")
    graph = agent.compile(checkpointer=InMemoryCheckpointer())

    async def chat(request: Request) -> Response:
        try:
            body = await request.json()
            thread_id, text = str(body["thread_id"]), str(body["message"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": 'send {"thread_id": ..., "message": ...}'}, 400)

        async def events() -> AsyncIterator[str]:
            run = graph.astream(
                {"messages": [Message.text_message(text)]}, {"thread_id": thread_id}
            )
            try:  # aclosing: the run is closed if the client goes away
                async with aclosing(run) as chunks:
                    async for chunk in chunks:
                        yield f"event: {chunk.event}\ndata: {chunk.model_dump_json()}\n\n"
            except Exception as exc:  # the stream already sent it as an "error" event
                logger.warning("run on thread %r failed: %s", thread_id, exc)

        return StreamingResponse(events(), media_type="text/event-stream")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await graph.aclose()

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])], lifespan=lifespan)


def read_events(lines: Iterator[str]) -> Iterator[StreamChunk]:
    """The chunks of an SSE stream from /chat: each `data:` line is a StreamChunk's JSON."""
    for line in lines:
        if line.startswith("data: "):
            yield StreamChunk.model_validate_json(line[6:])


def describe(chunk: StreamChunk) -> str:
    data, message = chunk.data or {}, chunk.message
    if message is None:  # a tool starting, or the run failing
        return str(data.get("error") or f"{data['status']}: {data['tool_name']}({data['args']})")
    calls = [f"{c.name}({c.args})" for c in message.tool_call_blocks()]
    if message.delta and message.tools_calls:
        return f"{message.role} piece: (tool call arguments)"
    kind = "piece" if message.delta else "message"
    return f"{message.role} {kind}: {message.text()!r}" + (f" calls {calls[0]}" if calls else "")


def demo(app: Starlette) -> None:
    with TestClient(app) as client:  # runs the app in-process, lifespan included
        print("POST /chat {} ->", client.post("/chat", json={}).status_code)
        for text in ("What time is it in Tokyo?", "And in Lima?"):
            body = {"thread_id": "web-1", "message": text}
            with client.stream("POST", "/chat", json=body) as response:
                print(f"POST /chat {body} -> {response.headers['content-type']}")
                for chunk in read_events(response.iter_lines()):
                    print(f"  {chunk.event:8} {describe(chunk)}")
                    if chunk.event == "error":
                        raise SystemExit(1)  # its message is printed above


def main() -> None:
    names = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    app = build_app(names[0] if names else FunctionModel(scripted))
    if "--serve" not in sys.argv:
        demo(app)
        return
    try:
        import uvicorn  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise SystemExit("--serve needs uvicorn: pip install uvicorn") from None
    print("try: curl -N localhost:8000/chat -d " + CURL_BODY)
    uvicorn.run(app, host="127.0.0.1", port=8000)


if __name__ == "__main__":
    main()
