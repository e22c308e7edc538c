"""Tools: plain functions the model may call, run by a ReactAgent loop (model -> tools -> model).

    python examples/tools.py                      # offline: a scripted model picks the calls
    python examples/tools.py openai/gpt-4o-mini   # a real model decides (needs OPENAI_API_KEY)

`search_products` is a plain function: its schema comes from its signature and docstring.
`add_to_cart` is renamed with `@tool` and returns a `ToolResult`, which both answers the model
and adds the item to the `cart` field of the state.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import AgentState, Message, ToolCallBlock, ToolResult, append_items
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import tool

PRODUCTS = [
    {"sku": "mug-01", "name": "Blue mug", "price": 9},
    {"sku": "tee-02", "name": "Grey tee", "price": 15},
]


class CartState(AgentState):
    cart: Annotated[list[dict[str, object]], append_items] = []


def search_products(query: str) -> list[dict[str, object]]:
    """Find products whose name contains the query.

    Args:
        query: A word from the product name, e.g. "mug".
    """
    return [p for p in PRODUCTS if query.lower() in str(p["name"]).lower()]


@tool(name="add_to_cart", tags={"shop"})
def add(sku: str, quantity: int = 1) -> ToolResult:
    """Put a product in the customer's cart."""
    item = {"id": sku, "sku": sku, "quantity": quantity}
    return ToolResult(f"Added {quantity} x {sku} to the cart.", state={"cart": [item]})


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: search, then add the first hit, then answer."""
    last = messages[-1]
    if last.role == "user":
        return ToolCallBlock(id="c1", name="search_products", args={"query": "mug"})
    if last.metadata.get("function_name") == "search_products":
        return ToolCallBlock(id="c2", name="add_to_cart", args={"sku": "mug-01", "quantity": 2})
    return f"Done: {last.text()}"


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(scripted)
    agent = ReactAgent(
        model, [search_products, add], "You run a small shop. Be brief.", state=CartState
    )
    for schema in agent.tool_node.all_tools_sync():  # what the model is shown
        function = schema["function"]
        print(f"tool {function['name']}{list(function['parameters']['properties'])}: ", end="")
        print(function["description"].splitlines()[0])
    app = agent.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "shop-1"}

    result = await app.ainvoke(
        {"messages": [Message.text_message("Two blue mugs, please")]}, config
    )
    for message in result["messages"]:
        if message.role == "tool":
            print(f"  tool {message.metadata['function_name']} -> {message.text()}")
        else:
            calls = [f"{c.name}({c.args})" for c in message.tool_call_blocks()]
            print(f"{message.role}: {message.text() or 'calls ' + ', '.join(calls)}")
    state = await app.aget_state(config)
    assert isinstance(state, CartState)
    print("cart in the state:", state.cart)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
