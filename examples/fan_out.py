"""Fan-out and join: several branches run at once, their results merge through reducers.

    python examples/fan_out.py                      # offline
    python examples/fan_out.py openai/gpt-4o-mini   # the join writes with a real model

`plan` has three static out-edges, so `flights`, `hotels` and `tours` run concurrently in one
step. Each returns its part of `offers` (an `append_items` field) and of `budget` (a field with
a reducer of our own that adds). Updates merge in the order the nodes were added, not the order
they finish. `recommend`, which all three lead to, runs once, after all of them.
"""

from __future__ import annotations

import asyncio
import operator
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Annotated

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, append_items


class TripState(AgentState):
    city: str = ""
    offers: Annotated[list[str], append_items] = []
    budget: Annotated[int, operator.add] = 0  # each branch adds its share


Update = dict[str, object]


def plan(state: TripState) -> dict[str, str]:
    return {"city": state.context[-1].text().split()[-1].strip("?.!")}


def branch(kind: str, seconds: float, price: int) -> Callable[[TripState], Awaitable[Update]]:
    async def look_up(state: TripState) -> Update:
        await asyncio.sleep(seconds)  # a slow service; the three wait at the same time
        return {"offers": [f"{kind} for {state.city}: {price} EUR"], "budget": price}

    return look_up


def offline(messages: list[Message], info: ModelInfo) -> str:  # stands in for a real model
    return "Booked! " + messages[0].text().split(" sentences. ", 1)[1].replace("\n", " ")


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(offline)
    prompt = "Recommend this trip in two sentences. Total {budget} EUR. Offers:\n{offers}"
    graph = StateGraph(TripState)
    graph.add_node(plan)
    graph.add_node("flights", branch("flight", 0.3, 120))
    graph.add_node("hotels", branch("hotel", 0.1, 300))
    graph.add_node("tours", branch("food tour", 0.2, 60))
    graph.add_node("recommend", Agent(model, system_prompt=prompt, max_tokens=150))
    graph.add_edge(START, "plan")
    for name in ("flights", "hotels", "tours"):
        graph.add_edge("plan", name)  # fan out
        graph.add_edge(name, "recommend")  # join
    graph.add_edge("recommend", END)
    app = graph.compile()

    started = time.perf_counter()
    ask = Message.text_message("Plan a weekend in Porto")
    result = await app.ainvoke({"messages": [ask]}, response_granularity="full")
    state: TripState = result["state"]
    elapsed = time.perf_counter() - started
    print(f"run: {elapsed:.2f} s for branches of 0.3, 0.1 and 0.2 s, and the model call")
    print("offers, in graph order:", state.offers)
    print("budget, summed by the reducer:", state.budget)
    print("assistant:", result["messages"][-1].text())
    assert [o.split()[0] for o in state.offers] == ["flight", "hotel", "food"]
    assert sum(m.role == "assistant" for m in state.context) == 1  # the join ran once


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
