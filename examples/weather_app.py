"""A small app for the `tenxgraph` command: a ReactAgent with one tool.

    tenxgraph graph examples/weather_app.py:app
    tenxgraph run examples/weather_app.py:app --input "Weather in Oslo?" --stream
    python examples/weather_app.py                 # the same run, from Python

Offline by default ("test" model); set TENXGRAPH_MODEL=openai/gpt-4o-mini (and its key) for a
real model.
"""

from __future__ import annotations

import os

from tenxgraph.core.state import Message
from tenxgraph.prebuilt import ReactAgent


def weather(city: str) -> str:
    """Today's weather in a city.

    Args:
        city: The city, e.g. "Oslo".
    """
    return f"18°C and sunny in {city}"


app = ReactAgent(
    os.environ.get("TENXGRAPH_MODEL", "test"),
    [weather],
    system_prompt="Answer weather questions with the weather tool.",
).compile()

if __name__ == "__main__":
    result = app.invoke({"messages": [Message.text_message("Weather in Oslo?")]})
    for message in result["messages"]:
        print(f"{message.role}: {message.text()}")
