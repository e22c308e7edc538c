"""Quick start: build a conversation from typed messages and watch the reducers at work.

    python examples/quickstart.py

Runs offline. It builds the kind of history an agent produces (a question, a tool call, its
result, the answer), merges it the way a graph run does, and trims it for the next model call.
"""

from __future__ import annotations

from tenxgraph.core.state import (
    AgentState,
    Message,
    MessageContextManager,
    ReasoningBlock,
    TextBlock,
    TokenUsages,
    ToolCallBlock,
    ToolResultBlock,
    add_messages,
)


class SupportState(AgentState):
    """A custom state: the conversation plus the fields this app needs."""

    customer_id: str = ""


def build_turn(question: str, city: str, weather: str) -> list[Message]:
    call_id = f"call_{city.lower()}"
    return [
        Message.text_message(question),
        Message(
            role="assistant",
            content=[
                ReasoningBlock(summary=f"The user asks about {city}; look it up."),
                ToolCallBlock(id=call_id, name="get_weather", args={"city": city}),
            ],
            usages=TokenUsages(prompt_tokens=42, completion_tokens=9, total_tokens=51),
        ),
        Message.tool_message(
            [ToolResultBlock(call_id=call_id, output={"city": city, "weather": weather})]
        ),
        Message(
            role="assistant",
            content=[TextBlock(text=f"The weather in {city}: {weather}.")],
            usages=TokenUsages(prompt_tokens=70, completion_tokens=8, total_tokens=78),
        ),
    ]


def main() -> None:
    state = SupportState(customer_id="c-42")
    for question, city, weather in [
        ("What is the weather in Paris?", "Paris", "Sunny, 22C"),
        ("And in Tokyo?", "Tokyo", "Cloudy, 18C"),
        ("And in Lima?", "Lima", "Foggy, 16C"),
    ]:
        turn = build_turn(question, city, weather)
        # A node's output merges through the field's reducer; re-sent messages are skipped.
        state.context = add_messages(state.context, turn + turn[:1])

    print(f"customer {state.customer_id}: {len(state.context)} messages")
    for message in state.context:
        calls = ", ".join(f"{c.name}({c.args})" for c in message.tool_call_blocks())
        print(f"  {message.role:>9}: {message.text() or calls}")

    used = sum(m.usages.total_tokens for m in state.context if m.usages)
    print(f"tokens used: {used}")

    trimmed = MessageContextManager(max_messages=1).trim_context(state)
    print(f"the next model call sees {len(trimmed.context)} of {len(state.context)} messages:")
    for message in trimmed.context:
        print(f"  {message.role:>9}: {message.text() or '(tool call)'}")

    restored = SupportState.model_validate_json(state.model_dump_json())
    assert restored == state, "a state round-trips through JSON unchanged"
    print("state round-trips through JSON: ok")


if __name__ == "__main__":
    main()
