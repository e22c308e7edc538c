"""A human in the loop: a tool that asks for approval with `interrupt()` before it acts.

    python examples/human_approval.py                      # offline: a scripted model
    python examples/human_approval.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

The run pauses inside the `transfer` tool and the thread is saved. The caller answers with
`{"resume": answer}`; the tool runs again from its top and this time `interrupt()` returns the
answer. Two threads: one approved, one declined.
"""

from __future__ import annotations

import asyncio
import sys

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import interrupt, pending_interrupt

SENT: list[str] = []  # the side effect: what was really transferred


async def transfer(amount: int, to: str) -> str:
    """Send money to someone (a human approves it first)."""
    answer = interrupt({"amount": amount, "to": to}, message=f"Send {amount} EUR to {to}?")
    if answer != "yes":  # side effects only after the question: the tool reruns on resume
        return f"The transfer was declined by a human: {answer}."
    SENT.append(f"{amount} EUR to {to}")
    return f"Sent {amount} EUR to {to}."


def scripted(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: asks for the transfer, then reports the tool's answer."""
    if messages[-1].role == "tool":
        return messages[-1].text()
    return ToolCallBlock(id="t1", name="transfer", args={"amount": 40, "to": "Bob"})


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(scripted)
    prompt = "You move money with the transfer tool. Answer in one sentence."
    app = ReactAgent(model, [transfer], prompt).compile(checkpointer=InMemoryCheckpointer())

    for thread, human in (("pay-1", "yes"), ("pay-2", "no, not today")):
        config = {"thread_id": thread}
        ask = Message.text_message("Please send 40 EUR to Bob")
        paused = await app.ainvoke({"messages": [ask]}, config)
        asked = paused.get("interrupt")
        if asked is None:  # a real model may answer without calling the tool
            print(f"[{thread}] no transfer asked: {paused['messages'][-1].text()}")
            continue
        print(f"[{thread}] paused in {asked['node']!r}: {asked['message']} {asked['value']}")
        state = await app.aget_state(config)
        assert state is not None
        assert pending_interrupt(state) is not None  # the pause is saved with the thread

        done = await app.ainvoke({"resume": human}, config)  # later, maybe in another process
        print(f"[{thread}] human: {human!r} -> assistant: {done['messages'][-1].text()}")
    print("transfers really made:", SENT)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
