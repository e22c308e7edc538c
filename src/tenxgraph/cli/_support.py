"""The demo's support agent: two tools (the refund asks a person first, with `interrupt()`) and
a scripted offline model that reasons, talks and calls them the way a real model would."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.llm.offline import assistant_message, tool_results_by_name
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ReasoningBlock, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import interrupt

USER_MESSAGE = "Hi! My order 1042 arrived broken: the teapot is cracked. Can I get my money back?"

SYSTEM_PROMPT = (
    "You are the support agent of a small online shop. Look an order up with lookup_order "
    "before acting on it. A damaged item is refunded in full with the refund tool; a person "
    "approves every refund, so say that you are asking for it. Answer in two sentences at most."
)

ORDERS: dict[int, dict[str, Any]] = {
    1042: {
        "order_id": 1042,
        "item": "ceramic teapot",
        "total_eur": 59.9,
        "status": "delivered",
        "delivered_on": "2025-03-03",
    },
}


def lookup_order(order_id: int) -> dict[str, Any] | str:
    """Find an order: what was bought, its total and its delivery status.

    Args:
        order_id: The order number on the customer's receipt.
    """
    return ORDERS.get(order_id) or f"There is no order {order_id}."


async def refund(
    order_id: int, amount_eur: float, reason: Literal["damaged", "late", "other"]
) -> str:
    """Refund an order to the customer's card. A person must approve every refund first.

    Args:
        order_id: The order to refund.
        amount_eur: How much to pay back, in euros.
        reason: Why the customer gets the money back.
    """
    answer = interrupt(
        {"order_id": order_id, "amount_eur": amount_eur, "reason": reason},
        message=f"Approve a refund of {amount_eur:.2f} EUR for order {order_id}?",
    )
    if answer != "yes":
        return "The refund was not approved: nothing was paid back."
    return f"Refunded {amount_eur:.2f} EUR for order {order_id} (refund RF-{order_id})."


# -- the scripted model ----------------------------------------------------------------------

Turn = tuple[str, str, list[ToolCallBlock]]  # reasoning, text, tool calls


def script(messages: list[Message]) -> Turn:
    """The next answer, from the conversation since the last user message."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    recent = messages[start + 1 :]
    asked = messages[start].text() if start >= 0 else ""
    turn = sum(1 for m in messages if m.role == "user")
    results = tool_results_by_name(recent)
    number = re.search(r"\d{3,}", asked)
    order_id = int(number.group()) if number else 1042
    if "lookup_order" not in results:
        return (
            f"The customer says order {order_id} arrived broken and wants their money back. "
            "I'll look the order up before promising anything.",
            "",
            [
                ToolCallBlock(
                    id=f"call_lookup_{turn}", name="lookup_order", args={"order_id": order_id}
                )
            ],
        )
    order = results["lookup_order"]
    if not isinstance(order, dict) or "total_eur" not in order:
        return (
            "That order is not on file, so there is nothing to refund.",
            f"I can't find order {order_id}. Could you check the number on your receipt?",
            [],
        )
    total = float(order["total_eur"])
    if "refund" not in results:
        args = {"order_id": order_id, "amount_eur": total, "reason": "damaged"}
        return (
            f"Order {order_id} was delivered and cost {total:.2f} EUR. A damaged item gets a "
            "full refund, but refunds need a person's approval, so I'll ask for one.",
            f"I found order {order_id} ({order['item']}, {total:.2f} EUR, delivered on "
            f"{order['delivered_on']}). I'm asking for a full refund; a colleague has to "
            "approve it.",
            [ToolCallBlock(id=f"call_refund_{turn}", name="refund", args=args)],
        )
    if "not approved" in str(results["refund"]):
        return (
            "The refund was declined, so I must not promise any money back.",
            f"The refund for order {order_id} was not approved, so nothing has been paid back "
            "yet. I've noted the damage and a colleague will contact you about a replacement.",
            [],
        )
    return (
        "The refund went through; the customer wants to know when the money arrives.",
        f"Done: {total:.2f} EUR is on its way back to your card for order {order_id}; it "
        "usually arrives within 3-5 business days. Sorry about the teapot!",
        [],
    )


def _pieces(text: str, size: int) -> list[str]:
    words = text.split(" ")
    return [
        " ".join(words[i : i + size]) + (" " if i + size < len(words) else "")
        for i in range(0, len(words), size)
    ]


def scripted_model(delay: float = 0.0) -> FunctionModel:
    """The offline stand-in for a real model. `delay` (seconds per piece) lets a person watch
    it stream; tests use none."""

    def answer(messages: list[Message], info: ModelInfo) -> Message:
        reasoning, text, calls = script(messages)
        message = assistant_message(text, calls, model="scripted-support", prompt=messages)
        message.content.insert(0, ReasoningBlock(summary=reasoning))
        message.reasoning = reasoning
        return message

    async def stream(
        messages: list[Message], info: ModelInfo
    ) -> AsyncIterator[str | ToolCallBlock | ReasoningBlock]:
        reasoning, text, calls = script(messages)
        for piece in _pieces(reasoning, 3):
            if delay:
                await asyncio.sleep(delay)
            yield ReasoningBlock(summary=piece)
        for piece in _pieces(text, 2) if text else ():
            if delay:
                await asyncio.sleep(delay)
            yield piece
        for call in calls:
            yield call

    return FunctionModel(answer, stream_function=stream, model_name="scripted-support")


def support_app(model: str | None, db: Path, delay: float = 0.0) -> CompiledGraph:
    """The demo agent on SQLite at `db`: the scripted model when `model` is None, else the
    named one (``"test"``, ``"openai/gpt-4o-mini"``, ...)."""
    client: Any = scripted_model(delay) if model is None else model
    agent = ReactAgent(client, [lookup_order, refund], system_prompt=SYSTEM_PROMPT)
    return agent.compile(checkpointer=SqliteCheckpointer(db))


__all__ = ["USER_MESSAGE", "lookup_order", "refund", "script", "scripted_model", "support_app"]
