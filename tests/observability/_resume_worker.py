"""A worker process for the resume-across-processes tracing test: with its own tracer provider
and in-memory exporter, resumes the paused thread THREAD kept in the SQLite file DB, then
prints the spans it made as one JSON line.

    python tests/observability/_resume_worker.py DB THREAD
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.observability import Tracing
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import END, START


def ask(state: AgentState) -> Message:
    answer = interrupt("proceed?")
    return Message.text_message(f"told {answer}", "assistant")


def app_for(db: str, tracing: Tracing) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile(checkpointer=SqliteCheckpointer(db), name="approval", tracing=tracing)


def as_json(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": format(context.trace_id, "032x"),
        "span_id": format(context.span_id, "016x"),
        "attributes": dict(span.attributes or {}),
        "links": [
            {
                "trace_id": format(link.context.trace_id, "032x"),
                "span_id": format(link.context.span_id, "016x"),
                "attributes": dict(link.attributes or {}),
            }
            for link in span.links
        ],
    }


async def main(db: str, thread: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = app_for(db, Tracing(tracer_provider=provider))
    result = await app.ainvoke({"resume": "yes"}, {"thread_id": thread})
    await app.aclose()
    spans = [as_json(s) for s in exporter.get_finished_spans()]
    print(json.dumps({"answer": result["messages"][-1].text(), "spans": spans}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
