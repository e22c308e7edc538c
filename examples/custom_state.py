"""Your own state: an AgentState subclass with plain fields and fields merged by a reducer.

    python examples/custom_state.py                      # offline
    python examples/custom_state.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

A plain field (`customer`, `priority`) is replaced by each update; a field declared as
`Annotated[list, append_items]` (`tags`, `log`) gets each update appended, skipping items whose
`id` it already holds. The `triage` node updates them, and the Agent's system prompt reads them
as `{field}` placeholders. Two turns on one thread show what is kept between runs.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.storage.checkpointer import InMemoryCheckpointer


class TicketState(AgentState):
    customer: str = ""  # replaced
    priority: str = "normal"  # replaced
    tags: Annotated[list[str], append_items] = []  # appended
    log: Annotated[list[dict[str, str]], append_items] = []  # appended, deduplicated by "id"


def triage(state: TicketState) -> dict[str, object]:
    text = state.context[-1].text().lower()
    urgent = any(word in text for word in ("broken", "refund", "urgent"))
    tags = [word for word in ("parcel", "refund", "invoice") if word in text]
    entry = {"id": f"turn-{len(state.context)}", "event": f"triaged as {tags or 'general'}"}
    return {"priority": "high" if urgent else "normal", "tags": tags, "log": [entry, entry]}


def offline(messages: list[Message], info: ModelInfo) -> str:  # stands in for a real model
    return f"[{messages[0].text()}] Noted: {messages[-1].text()!r}"


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(offline)
    prompt = "Customer {customer}, priority {priority}, tags {tags}. Answer in one sentence."
    graph = StateGraph(TicketState)
    graph.add_node(triage)
    graph.add_node("assistant", Agent(model, system_prompt=prompt, max_tokens=100))
    graph.add_edge(START, "triage")
    graph.add_edge("triage", "assistant")
    graph.add_edge("assistant", END)
    app = graph.compile(checkpointer=InMemoryCheckpointer())

    config = {"thread_id": "ticket-1"}
    turns: list[dict[str, Any]] = [
        {"messages": [Message.text_message("My parcel is late")], "state": {"customer": "Ada"}},
        {"messages": [Message.text_message("It arrived broken, I want a refund")]},
    ]
    for turn in turns:
        result = await app.ainvoke(turn, config)
        print("user:     ", result["messages"][0].text())
        print("assistant:", result["messages"][-1].text())
        state = await app.aget_state(config)
        assert isinstance(state, TicketState)
        print(f"  -> customer={state.customer!r} priority={state.priority!r} tags={state.tags}")

    state = await app.aget_state(config)
    assert isinstance(state, TicketState)
    print("log (each entry once, though triage sent it twice):")
    for entry in state.log:
        print(f"  {entry['id']}: {entry['event']}")
    assert state.tags == ["parcel", "refund"]
    assert len(state.log) == 2


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
