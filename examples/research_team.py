"""Map-reduce over a subgraph: a planner splits a question into topics, one researcher
subgraph runs per topic in parallel (`Send`), and a writer answers from their notes.

    python examples/research_team.py                      # offline: scripted models
    python examples/research_team.py openai/gpt-4o-mini   # real models (needs OPENAI_API_KEY)

The researcher is a compiled graph used as a node: each `Send` runs it with its own payload
(its fields, and its conversation under `context`),
its progress is kept under the parent's thread, its chunks stream with the namespace
`("research[0]",)`, `("research[1]",)`..., and the notes it adds come back through the
parent's `append_items` reducer in the order the topics were sent.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import Send
from tenxgraph.utils.constants import END, START


class Team(AgentState):
    topics: list[str] = []
    notes: Annotated[list[str], append_items] = []  # one note per researcher, merged in order


class Researcher(AgentState):
    topic: str = ""
    notes: list[str] = []


def researcher_model(messages: list[Message], info: ModelInfo) -> str:
    """Stands in for a real model: a one-line finding about the topic in the prompt."""
    topic = messages[0].text().rsplit(" ", 1)[-1].rstrip(".")
    return f"{topic} matter because they are understudied."


def writer_model(messages: list[Message], info: ModelInfo) -> str:
    """Stands in for a real model: the notes, joined."""
    notes = messages[0].text().split("Notes: ", 1)[1]
    return f"Summary: {notes}"


def brief(topic: str) -> dict[str, Any]:
    """A researcher's input: its topic, and the question as its conversation (payloads are
    JSON, so the message goes as a dict)."""
    question = Message.text_message(f"What do we know about {topic}?")
    return {"topic": topic, "context": [question.model_dump(mode="json")]}


def build(model: str | None) -> Any:
    # the researcher: ask a model about one topic, keep its answer as a note
    research = StateGraph(Researcher)
    research.add_node(
        "ask",
        Agent(model or FunctionModel(researcher_model), system_prompt="Research {topic}."),
    )
    research.add_node("note", lambda state: {"notes": [state.context[-1].text()]})
    research.add_edge(START, "ask")
    research.add_edge("ask", "note")
    research.add_edge("note", END)

    team = StateGraph(Team)
    team.add_node("plan", lambda state: {"topics": state.context[-1].text().split(" and ")})
    team.add_node("research", research.compile(name="researcher"))
    team.add_node(
        "write",
        Agent(model or FunctionModel(writer_model), system_prompt="Notes: {notes}"),
    )
    team.add_edge(START, "plan")
    team.add_conditional_edges(
        "plan", lambda state: [Send("research", brief(t)) for t in state.topics]
    )
    team.add_edge("research", "write")
    team.add_edge("write", END)
    return team.compile(checkpointer=InMemoryCheckpointer(), name="research-team")


async def main() -> None:
    app = build(sys.argv[1] if len(sys.argv) > 1 else None)
    config = {"thread_id": "question-1", "max_concurrency": 4}
    question = Message.text_message("bats and moths")
    async for chunk in app.astream({"messages": [question]}, config):
        message = chunk.message
        if message is not None and not message.delta and message.role == "assistant":
            where = "/".join(chunk.namespace) or "team"
            print(f"[{where}] {message.text()}")
    state = await app.aget_state(config)
    print("notes:", state.notes)
    assert len(state.notes) == 2


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
