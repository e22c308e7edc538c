"""Your own web service with tenxgraph's server mounted in it (Starlette; FastAPI alike).

    python examples/web_service.py                      # offline, in-process: binds no port
    python examples/web_service.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)
    python examples/web_service.py --serve [model]      # serve on 127.0.0.1:8000 (uvicorn)

The service keeps its own routes (`GET /health` here) and mounts the Agent Protocol server
under `/agent`: threads, background runs, streams, interrupts, the store, and the chat page
at `/agent/`. LangGraph's client talks to it as to LangGraph's server:

    from langgraph_sdk import get_client
    client = get_client(url="http://127.0.0.1:8000/agent")

Without --serve the service is called in-process with Starlette's TestClient and what it
answers is printed. Needs `pip install "tenxgraph[serve]"`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.testclient import TestClient
except ImportError:
    raise SystemExit('this example needs the serve extra: pip install "tenxgraph[serve]"') from None

from tenxgraph.core.llm import FunctionModel, ModelClient, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.serve import create_app

TIMES = {"tokyo": "21:00", "lima": "07:00"}


def local_time(city: str) -> str:
    """The local time in a city."""
    return TIMES.get(city.lower(), "unknown")


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: asks the tool, then answers with its result."""
    if messages[-1].role == "tool":
        return f"It is {messages[-1].text()} there."
    city = messages[-1].text().rstrip("?").split()[-1]
    return ToolCallBlock(id=f"t-{len(messages)}", name="local_time", args={"city": city})


def build_app(model: str | ModelClient, db: str) -> Starlette:
    """The service: its own routes, and the agent server mounted under /agent."""
    graph = ReactAgent(model, [local_time], "Answer in one short sentence.").compile()
    graph.name = "clock"  # the assistant id clients name
    agent = create_app(graph, db=db)  # SQLite here; a postgresql:// DSN for several workers

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with agent.router.lifespan_context(agent):  # a mounted app's own start and stop
            yield

    routes = [Route("/health", health), Mount("/agent", app=agent)]
    return Starlette(routes=routes, lifespan=lifespan)


def demo(app: Starlette) -> None:
    with TestClient(app) as client:  # runs the service in-process, lifespans included
        print("GET /health ->", client.get("/health").json())
        thread = client.post("/agent/threads", json={"metadata": {"user": "ada"}}).json()
        print("POST /agent/threads ->", thread["thread_id"][:8], thread["status"])
        body = {
            "assistant_id": "clock",
            "input": {"messages": [{"type": "human", "content": "What time is it in Tokyo?"}]},
            "stream_mode": ["messages-tuple", "updates"],
        }
        path = f"/agent/threads/{thread['thread_id']}/runs/stream"
        with client.stream("POST", path, json=body) as response:
            print(f"POST {path.replace(thread['thread_id'], '{id}')} ->", response.status_code)
            event = ""
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event in ("messages", "updates", "error"):
                    print(f"  {event:8} {line[6:120]}")
                    if event == "error":
                        raise SystemExit(1)
        state = client.get(f"/agent/threads/{thread['thread_id']}/state").json()
        print("answer:", state["values"]["messages"][-1]["content"])


def main() -> None:
    names = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    model: str | ModelClient = names[0] if names else FunctionModel(scripted)
    if "--serve" not in sys.argv:
        with tempfile.TemporaryDirectory() as folder:
            demo(build_app(model, str(Path(folder) / "server.db")))
        return
    import uvicorn

    print("try: " + json.dumps("curl localhost:8000/agent/assistants/clock"))
    uvicorn.run(build_app(model, "web_service.db"), host="127.0.0.1", port=8000)


if __name__ == "__main__":
    main()
