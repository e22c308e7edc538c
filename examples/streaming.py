"""Streaming to a terminal with `astream`: tokens as they arrive, tool calls as they start and
end, and the token usage of the run at the end.

    python examples/streaming.py                      # offline: a model that "types" slowly
    python examples/streaming.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

Each `StreamChunk` is one event: `message` chunks carry partial (`delta=True`) or complete
messages, `updates` chunks carry progress such as a tool starting (`"invoking_tool"`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

from tenxgraph.core.exceptions import ModelAuthError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, StreamEvent, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent


async def get_weather(city: str) -> str:
    """Today's weather in a city."""
    await asyncio.sleep(0.3)  # a slow service
    return f"{city}: 24 C and sunny"


async def typing_model(
    messages: list[Message], info: ModelInfo
) -> AsyncIterator[str | ToolCallBlock]:
    """Stands in for a real model: asks for the weather, then answers word by word."""
    if messages[-1].role != "tool":
        yield ToolCallBlock(id="w1", name="get_weather", args={"city": "Lisbon"})
        return
    answer = f"Good news: it is {messages[-1].text().split(': ')[1]} in Lisbon today, enjoy!"
    for i, word in enumerate(answer.split(" ")):
        await asyncio.sleep(0.03)
        yield word if i == 0 else " " + word


async def main() -> None:
    offline = FunctionModel(lambda messages, info: "(used by ainvoke only)", typing_model)
    model = sys.argv[1] if len(sys.argv) > 1 else offline
    app = ReactAgent(model, [get_weather], "Use the tools; answer in one sentence.").compile()
    question = Message.text_message("What's the weather in Lisbon?")

    usage = {"in": 0, "out": 0}
    printing: str | int | None = None  # the id of the answer being printed
    async for chunk in app.astream({"messages": [question]}, {"thread_id": "weather-1"}):
        message, data = chunk.message, chunk.data or {}
        if chunk.event == StreamEvent.UPDATES and data.get("status") == "invoking_tool":
            print(f"[tool {data['tool_name']}({data['args']}) started]")
        elif data.get("status") == "tool_result":
            print(f"[tool {data['tool_name']} done in {data['duration_ms']:.0f} ms: ", end="")
            print(f"{message.text() if message else ''}]")
        elif message is not None and message.role == "assistant":
            if message.delta and message.text():
                if printing != message.message_id:
                    printing = message.message_id
                    print("assistant: ", end="")
                print(message.text(), end="", flush=True)  # a piece of the answer
            elif not message.delta:
                if printing == message.message_id:
                    print()  # the complete message follows its pieces
                if message.usages is not None:
                    usage["in"] += message.usages.prompt_tokens
                    usage["out"] += message.usages.completion_tokens
    print(f"tokens: {usage['in']} in, {usage['out']} out (over every model call of the run)")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except ModelAuthError as exc:
        raise SystemExit(str(exc)) from None
