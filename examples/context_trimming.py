"""Long conversations: what the model sees is trimmed, what the thread stores is not.

    python examples/context_trimming.py                      # offline
    python examples/context_trimming.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

The same seven turns go to two graphs whose Agent has `trim_context=True`:
`MessageContextManager(max_messages=2)` keeps the first message and the last two user turns;
`SummaryContextManager` folds older messages into `context_summary` and keeps the recent ones.
A small wrapper around the model records what each call was really sent.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, LiteLLMClient, ModelClient, ModelInfo, ModelRequest
from tenxgraph.core.state import (
    AgentState,
    BaseContextManager,
    Message,
    MessageContextManager,
    SummaryContextManager,
)
from tenxgraph.storage.checkpointer import InMemoryCheckpointer

TURNS = [
    "I'm Ada.",
    "I live in Lisbon.",
    "My cat is called Miso.",
    "I work nights.",
    "I like jazz.",
    "I'm learning Japanese.",
    "What is my cat called?",
]


class Recorder:
    """Any model client, remembering the messages of each request."""

    def __init__(self, client: ModelClient, name: str) -> None:
        self.client, self.model_name = client, name
        self.sent: list[list[Message]] = []

    async def acomplete(self, request: ModelRequest) -> Message:
        self.sent.append(request.messages)
        return await self.client.acomplete(request)

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        self.sent.append(request.messages)
        async for message in self.client.astream(request):
            yield message


def chat(messages: list[Message], info: ModelInfo) -> str:  # stands in for a real model
    if not messages[-1].text().endswith("?"):
        return "Noted."
    seen = " ".join(m.text() for m in messages)
    return "Your cat is Miso." if "Miso" in seen else "I don't know your cat's name."


def summarize(messages: list[Message], info: ModelInfo) -> str:  # a real one writes prose
    lines = messages[-1].text().splitlines()  # the summary so far, then the new messages
    facts = [f for line in lines if line.startswith("User said: ") for f in line[11:].split(" | ")]
    facts += [line.removeprefix("[user] ") for line in lines if line.startswith("[user] ")]
    return "User said: " + " | ".join(facts)


def recorded(name: str | None) -> Recorder:
    """The chat model: the offline one, or `name` through litellm."""
    return Recorder(LiteLLMClient(), name) if name else Recorder(FunctionModel(chat), "chat")


async def run(title: str, model: Recorder, manager: BaseContextManager[AgentState]) -> None:
    graph = StateGraph(context_manager=manager)
    graph.add_node("assistant", Agent(model, system_prompt="Be brief.", trim_context=True))
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": title}
    stored: list[int] = []
    for text in TURNS:
        turn = {"messages": [Message.text_message(text)]}
        result = await app.ainvoke(turn, config, response_granularity="partial")
        stored.append(len(result["context"]))  # "partial" adds the whole stored context
    print(f"{title}\n  stored after each turn: {stored}")
    print(
        f"  sent to the model:      {[len(sent) for sent in model.sent]} (system prompt included)"
    )
    for message in model.sent[-1]:
        print(f"    {message.role:9} {message.text()[:80]!r}")
    print(f"  answer: {result['messages'][-1].text()}")
    if result["summary"]:
        print(f"  context_summary in the state: {result['summary']}")


async def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else None
    await run("MessageContextManager(max_messages=2)", recorded(name), MessageContextManager(2))
    summarizer = name or FunctionModel(summarize)
    manager = SummaryContextManager[AgentState](summarizer, max_messages=6, keep_recent=2)
    await run("SummaryContextManager(max_messages=6, keep_recent=2)", recorded(name), manager)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
