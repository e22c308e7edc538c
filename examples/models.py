"""An Agent node streaming its answer, on any model litellm knows, or offline.

    python examples/models.py                               # offline: the built-in "test" model
    python examples/models.py openai/gpt-4o-mini            # needs OPENAI_API_KEY
    python examples/models.py anthropic/claude-sonnet-4-5   # needs ANTHROPIC_API_KEY
    python examples/models.py gemini/gemini-2.5-flash       # needs GEMINI_API_KEY

Only the model name changes; the graph is the same. The answer streams token by token, then the
complete message (with its token usage) is what the thread keeps.
"""

from __future__ import annotations

import asyncio
import sys

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import AgentState, Message


class SupportState(AgentState):
    customer: str = "Ada"


def build(model: str) -> CompiledGraph:
    graph = StateGraph(SupportState)
    graph.add_node(
        "assistant",
        Agent(
            model,
            system_prompt="You help {customer} with their orders. Answer in one sentence.",
            max_tokens=200,
        ),
    )
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    return graph.compile()


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else "test"
    app = build(model)
    question = Message.text_message("Where is my parcel?")
    print(f"[{model}] assistant: ", end="", flush=True)
    final: Message | None = None
    async for chunk in app.astream({"messages": [question]}, {"thread_id": "support-1"}):
        message = chunk.message
        if message is None or message.role != "assistant":
            continue
        if message.delta:
            print(message.text(), end="", flush=True)
        else:
            final = message
    print()
    if final is None or not final.text():
        raise SystemExit("the model gave no answer")
    if final.usages is not None:
        usage = final.usages
        print(f"tokens: {usage.prompt_tokens} in, {usage.completion_tokens} out")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelError as error:  # a missing key, a refused request: say what, no traceback
        raise SystemExit(f"\n{error}") from None
