"""Handoffs: a triage agent hands the conversation to a billing agent (swarm style).

    python examples/handoffs.py                      # offline: scripted models
    python examples/handoffs.py openai/gpt-4o-mini   # real models decide (needs OPENAI_API_KEY)

A handoff is a tool that returns `Command(goto=..., update=...)`: its tool message is stored,
the state says who has the conversation (`active`), and the run goes to that agent instead
of back to the caller. The next turn of the thread starts with whoever has it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.prebuilt import tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import Command
from tenxgraph.utils.constants import END, START


class Desk(AgentState):
    active: str = "triage"  # the agent that has the conversation


def transfer_to_billing() -> Command:
    """Hand the customer to the billing agent, for payments, invoices and refunds."""
    return Command(goto="billing", update={"active": "billing"})


def transfer_to_triage() -> Command:
    """Hand the customer back to triage, for anything that is not billing."""
    return Command(goto="triage", update={"active": "triage"})


def refund(order_id: int) -> str:
    """Refund an order."""
    return f"Order {order_id} refunded."


def triage_model(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: money questions go to billing."""
    last = messages[-1]
    if last.role == "user" and "refund" in last.text().lower():
        return ToolCallBlock(id="t1", name="transfer_to_billing", args={})
    return "Triage here: how can I help?"


def billing_model(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: refund order 42, then say so; anything else goes back."""
    last = messages[-1]
    if last.role == "tool" and last.metadata.get("function_name") == "refund":
        return f"Billing here: {last.text()}"
    if last.role == "user" and "thanks" in last.text().lower():
        return ToolCallBlock(id="b2", name="transfer_to_triage", args={})
    return ToolCallBlock(id="b1", name="refund", args={"order_id": 42})


def build(model: str | None) -> Any:
    graph = StateGraph(Desk)
    for name, tools, scripted, prompt in (
        ("triage", [transfer_to_billing], triage_model, "You triage support requests."),
        ("billing", [refund, transfer_to_triage], billing_model, "You handle billing."),
    ):
        graph.add_node(f"{name}_tools", ToolNode(tools))
        graph.add_node(
            name,
            Agent(
                model or FunctionModel(scripted), system_prompt=prompt, tool_node=f"{name}_tools"
            ),
        )
        graph.add_conditional_edges(
            name,
            lambda state, tools=f"{name}_tools": (
                tools if tools_condition(state) == "tools" else END
            ),
            {f"{name}_tools": f"{name}_tools", END: END},
        )
        graph.add_edge(f"{name}_tools", name)  # back to its agent, unless a tool hands over
    # a new turn goes to whoever has the conversation
    graph.add_conditional_edges(
        START, lambda state: state.active, {"triage": "triage", "billing": "billing"}
    )
    return graph.compile(checkpointer=InMemoryCheckpointer(), name="support")


async def main() -> None:
    app = build(sys.argv[1] if len(sys.argv) > 1 else None)
    config = {"thread_id": "customer-7"}
    for text in ("I want a refund for order 42", "Thanks!"):
        result = await app.ainvoke({"messages": [Message.text_message(text)]}, config)
        for message in result["messages"]:
            if message.role == "tool":
                print(f"  tool {message.metadata['function_name']} -> {message.text()}")
            elif message.text():
                print(f"{message.role}: {message.text()}")
        state = await app.aget_state(config)
        print(f"  (the conversation is with {state.active})")
    assert state.active == "triage"


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
