"""Tracing: every run as an OpenTelemetry span tree (run, nodes, model calls, tool calls).

    python examples/tracing.py                      # offline: a scripted model
    python examples/tracing.py openai/gpt-4o-mini   # a real model (needs OPENAI_API_KEY)

tenxgraph makes spans only when a tracer provider is configured; here the OpenTelemetry SDK
(``pip install opentelemetry-sdk``) prints each span as it ends. Spans follow the GenAI
semantic conventions (``gen_ai.*`` attributes: model, provider, token usage, tool names).
Prompts, answers and tool arguments are left out unless you ask for them with
``compile(tracing=Tracing(record_content=True))`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. To send spans to Jaeger, Tempo
or any OTLP collector, use an ``OTLPSpanExporter`` in a ``BatchSpanProcessor`` instead.
"""

from __future__ import annotations

import asyncio
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent


def get_weather(city: str) -> str:
    """The current weather in `city`."""
    return f"{city}: 21 C, sunny"


def offline(messages: list[Message], info: ModelInfo) -> str | ToolCallBlock:
    """Stands in for a real model: asks for the weather, then answers with it."""
    if messages[-1].role == "tool":
        return f"Here is the weather: {messages[-1].text()}"
    return ToolCallBlock(id="call_1", name="get_weather", args={"city": "Lisbon"})


def one_line(span: ReadableSpan) -> str:
    """A span as one line: its name, its parent's id and its GenAI attributes."""
    context = span.get_span_context()
    own = format(context.span_id, "016x") if context is not None else "?"
    parent = format(span.parent.span_id, "016x") if span.parent is not None else "-"
    shown = {k: v for k, v in (span.attributes or {}).items() if k.startswith("gen_ai.")}
    return f"{span.name:28} span={own} parent={parent} {shown}\n"


async def main() -> None:
    # the usual SDK setup; tenxgraph uses whatever provider is set globally
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=one_line)))
    trace.set_tracer_provider(provider)

    model = sys.argv[1] if len(sys.argv) > 1 else FunctionModel(offline, model_name="offline")
    app = ReactAgent(model, [get_weather]).compile(name="weather_agent")
    result = await app.ainvoke(
        {"messages": [Message.text_message("What is the weather in Lisbon?")]},
        {"thread_id": "tracing-demo"},
    )
    print("answer:", result["messages"][-1].text())
    provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
