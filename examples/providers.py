"""Switching providers: the same graph, only the model name changes.

    python examples/providers.py                              # "test" offline, and key checks
    python examples/providers.py anthropic/claude-sonnet-4-5  # also a real provider

"test" is the built-in offline model. A provider's model needs its key in the environment; a
missing key fails before anything is sent, with a `ModelAuthError` naming the variable to set.
Without an argument, this shows that error for each provider whose key is not set (it loads
litellm, which takes a few seconds).
"""

from __future__ import annotations

import asyncio
import os
import sys

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.state import Message

KEYS = {  # model name -> the environment variable(s) its provider reads
    "openai/gpt-4o-mini": ["OPENAI_API_KEY"],
    "anthropic/claude-sonnet-4-5": ["ANTHROPIC_API_KEY"],
    "gemini/gemini-2.5-flash": ["GEMINI_API_KEY", "GOOGLE_API_KEY"],
}


async def ask(model: str, question: str) -> str:
    graph = StateGraph()
    graph.add_node("assistant", Agent(model, system_prompt="One short sentence.", max_tokens=60))
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    result = await graph.compile().ainvoke({"messages": [Message.text_message(question)]})
    answer: str = result["messages"][-1].text()
    return answer


async def main() -> None:
    question = "Name one famous bridge."
    print(f"[test] {await ask('test', question)}")
    chosen = sys.argv[1:2]
    for model in chosen or KEYS:
        names = KEYS.get(model, [])
        if not chosen and any(os.environ.get(name) for name in names):
            print(f"[{model}] {' or '.join(names)} is set: python {sys.argv[0]} {model}")
            continue
        try:
            print(f"[{model}] {await ask(model, question)}")
        except ModelAuthError as exc:  # raised before any request is sent
            print(f"[{model}] ModelAuthError: {exc.message}")


if __name__ == "__main__":
    asyncio.run(main())
