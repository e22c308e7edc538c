"""Structured output: an Agent with `output_schema=` answers with an object, not just text.

    python examples/structured_output.py                      # offline
    python examples/structured_output.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

The schema (a pydantic model) is sent to the model; the answer's JSON is validated into it and
put in the message's `parsed_content`, ready to use as a typed object. An answer that does
not fit is sent back to the model with the validation errors (`output_retries`, default 1);
if it still does not fit, `OutputValidationError` is raised.
"""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Literal

from pydantic import BaseModel, Field

from tenxgraph import END, START, Agent, StateGraph
from tenxgraph.core.exceptions import ModelAuthError, OutputValidationError
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer


class Booking(BaseModel):
    """A table reservation taken from a customer's message."""

    name: str = Field(description="Who the table is for")
    guests: int = Field(ge=1, description="How many people")
    day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    notes: list[str] = Field(default_factory=list, description="Allergies, wishes")


def offline(messages: list[Message], info: ModelInfo) -> dict[str, object]:
    """Stands in for a real model: a few regular expressions fill the schema."""
    assert info.output_schema is Booking  # the Agent passes the schema on to the model
    text = messages[-1].text()
    guests = re.search(r"(\d+) (?:people|guests)", text)
    day = re.search(r"(mon|tue|wed|thu|fri|sat|sun)\w*day", text.lower())
    return {
        "name": text.split("I'm ", 1)[1].split()[0].strip(",."),
        "guests": int(guests.group(1)) if guests else 1,
        "day": day.group(1) if day else "mon",
        "notes": ["nut allergy"] if "nut" in text else [],
    }


async def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(offline)
    graph = StateGraph()
    prompt = "Extract the booking from the customer's message."
    graph.add_node("extract", Agent(model, system_prompt=prompt, output_schema=Booking))
    graph.add_edge(START, "extract")
    graph.add_edge("extract", END)
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "booking-1"}

    text = "Hi, I'm Grace. A table for 4 people on Friday please; one of us has a nut allergy."
    result = await app.ainvoke({"messages": [Message.text_message(text)]}, config)
    answer = result["messages"][-1]
    print("the model's text:", answer.text())
    booking = answer.parsed_content  # an off-schema answer is corrected, or raises
    assert isinstance(booking, Booking)
    print(f"parsed_content:   {booking!r}")
    print(f"a typed object:   {booking.guests} guests for {booking.name} on {booking.day}")

    state = await app.aget_state(config)  # stored as JSON: it comes back as a dict
    assert state is not None
    stored = state.context[-1].parsed_content
    print(f"from the thread:  {stored!r}")
    assert Booking.model_validate(stored) == booking


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (ModelAuthError, OutputValidationError) as exc:
        raise SystemExit(str(exc)) from None
