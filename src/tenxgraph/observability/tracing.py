"""OpenTelemetry spans of a run, following the GenAI semantic conventions.

Imported only when a tracer provider is configured (see `tracer_for`): without
``opentelemetry-api`` installed, or with no provider set, nothing here is loaded. No exporter
is chosen for the user: the spans go wherever their SDK setup sends them.

Message contents (prompts, answers, tool arguments and results) are recorded only when asked
(`Tracing(record_content=True)` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``);
whatever is recorded, content and error text alike, has credentials redacted first.
"""

from __future__ import annotations

import json
import traceback
from asyncio import CancelledError
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tenxgraph.core.redaction import redact
from tenxgraph.core.state.message import Message, TokenUsages
from tenxgraph.core.state.usage import Usage

Tracer = trace.Tracer
Context = otel_context.Context

# litellm's provider names -> the conventions' `gen_ai.provider.name`
_PROVIDERS = {
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
    "cohere_chat": "cohere",
}

# request settings recorded as `gen_ai.request.*` (nothing else of the settings: they may
# hold credentials, endpoints and headers)
_REQUEST_SETTINGS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
}


def provider_name(provider: str | None) -> str | None:
    if provider is None:
        return None
    return _PROVIDERS.get(provider, provider)


def _bare_model(model: str) -> str:
    """The model as its provider names it: litellm's ``openai/gpt-4o-mini`` -> ``gpt-4o-mini``."""
    return model.split("/", 1)[1] if "/" in model else model


# -- runs and nodes ----------------------------------------------------------------------------


def start_run(tracer: Tracer, graph: str, thread_id: str, run_id: str) -> tuple[Span, Context]:
    """The run's span, a child of whatever span is current where the run was started."""
    span = tracer.start_span(
        f"invoke_agent {graph}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": graph,
            "gen_ai.conversation.id": thread_id,
            "tenxgraph.graph": graph,
            "tenxgraph.thread_id": thread_id,
            "tenxgraph.run_id": run_id,
        },
    )
    return span, trace.set_span_in_context(span)


def end_run(
    span: Span,
    status: str,
    usage: Usage,
    error: BaseException | None,
    interrupt: tuple[str, str] | None,
) -> None:
    span.set_attribute("tenxgraph.status", status)
    if interrupt is not None:
        span.set_attribute("tenxgraph.interrupt.node", interrupt[0])
        span.set_attribute("tenxgraph.interrupt.reason", interrupt[1])
    if usage.model_calls:
        span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
        span.set_attribute("tenxgraph.model_calls", usage.model_calls)
        cost = usage.cost
        if cost is not None:
            span.set_attribute("tenxgraph.cost", cost)
    finish(span, error)


def mark(span: Span) -> dict[str, str]:
    """Where a paused run's span is, stored with the thread for the run that resumes it."""
    found = span.get_span_context()
    return {"trace_id": format(found.trace_id, "032x"), "span_id": format(found.span_id, "016x")}


def link_to(span: Span, paused: Any) -> None:
    """Link a resuming run's span to the span of the run that paused (maybe in another
    process); a mark that is not one is ignored."""
    try:
        trace_id = int(paused["trace_id"], 16)
        span_id = int(paused["span_id"], 16)
    except (TypeError, KeyError, ValueError):
        return
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
    if context.is_valid:
        span.add_link(context, {"tenxgraph.link": "resumes"})


def start_node(tracer: Tracer, parent: Context, node: str, step: int) -> Context:
    span = tracer.start_span(
        f"node {node}",
        context=parent,
        attributes={"tenxgraph.node": node, "tenxgraph.step": step},
    )
    return trace.set_span_in_context(span, parent)


def with_span(span: Span) -> Context:
    """The current context with `span` as its current span."""
    return trace.set_span_in_context(span)


def span_of(context: Context) -> Span:
    return trace.get_current_span(context)


def attach(context: Context) -> object:
    return otel_context.attach(context)


def current() -> Context:
    return otel_context.get_current()


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


# -- model calls -------------------------------------------------------------------------------


def start_model(
    tracer: Tracer,
    model: str,
    provider: str | None,
    streamed: bool,
    settings: Mapping[str, Any],
    messages: Sequence[Message] | None,
) -> Span:
    """A model call's span (`chat {model}`), a child of the current span (the node's)."""
    bare = _bare_model(model)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": bare,
        "gen_ai.request.stream": streamed,
        "tenxgraph.model": model,
    }
    name = provider_name(provider)
    if name is not None:
        attributes["gen_ai.provider.name"] = name
    for key, attribute in _REQUEST_SETTINGS.items():
        value = settings.get(key)
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            attributes[attribute] = value
    stop = settings.get("stop")
    if isinstance(stop, str):
        attributes["gen_ai.request.stop_sequences"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        attributes["gen_ai.request.stop_sequences"] = stop
    if messages is not None:
        attributes["gen_ai.input.messages"] = _content(messages)
    return tracer.start_span(f"chat {bare}", kind=SpanKind.CLIENT, attributes=attributes)


def end_model(
    span: Span,
    answer: Message | None,
    cost: float | None,
    first_chunk: float | None,
    error: BaseException | None,
    record_content: bool,
) -> None:
    if first_chunk is not None:
        span.set_attribute("gen_ai.response.time_to_first_chunk", first_chunk)
    if answer is not None:
        meta = answer.metadata
        response_model = meta.get("model")
        if isinstance(response_model, str):
            span.set_attribute("gen_ai.response.model", _bare_model(response_model))
        response_id = meta.get("response_id")
        if isinstance(response_id, str):
            span.set_attribute("gen_ai.response.id", response_id)
        reason = meta.get("finish_reason")
        if isinstance(reason, str):
            span.set_attribute("gen_ai.response.finish_reasons", [reason])
        _usage(span, answer.usages)
        if cost is not None:
            span.set_attribute("tenxgraph.cost", cost)
        if record_content:
            span.set_attribute("gen_ai.output.messages", _content([answer]))
    finish(span, error)


def _usage(span: Span, usage: TokenUsages | None) -> None:
    if usage is None:
        return
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if usage.reasoning_tokens:
        span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)
    if usage.cache_read_input_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_input_tokens)
    if usage.cache_creation_input_tokens:
        span.set_attribute(
            "gen_ai.usage.cache_creation.input_tokens", usage.cache_creation_input_tokens
        )


def _content(messages: Sequence[Message]) -> str:
    """Messages as the conventions' JSON (role and parts), credentials redacted."""
    items = []
    for message in messages:
        parts = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
        items.append({"role": message.role, "parts": parts})
    return redact(json.dumps(items, ensure_ascii=False, default=str))


# -- tool calls --------------------------------------------------------------------------------


def start_tool(tracer: Tracer, tool: str, call_id: str, args: Any | None) -> Span:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
    }
    if args is not None:
        attributes["gen_ai.tool.call.arguments"] = redact(
            json.dumps(args, ensure_ascii=False, default=str)
        )
    return tracer.start_span(f"execute_tool {tool}", kind=SpanKind.INTERNAL, attributes=attributes)


def end_tool(
    span: Span,
    replayed: bool,
    is_error: bool,
    result: Message | None,
    error: BaseException | None,
    paused: bool = False,
) -> None:
    span.set_attribute("tenxgraph.tool.replayed", replayed)
    if paused:
        span.set_attribute("tenxgraph.paused", True)
    if result is not None:
        span.set_attribute("gen_ai.tool.call.result", _content([result]))
    if is_error and error is None:  # the tool's error went back to the model as its result
        span.set_attribute("error.type", "tool_error")
        span.set_status(Status(StatusCode.ERROR, "the tool call failed"))
    finish(span, error)


# -- errors ------------------------------------------------------------------------------------


def finish(span: Span, error: BaseException | None) -> None:
    """End a span; an error is recorded on it (text redacted) with status ERROR."""
    if error is not None:
        if isinstance(error, GeneratorExit | CancelledError):  # stopped, not failed
            span.set_attribute("tenxgraph.cancelled", True)
        else:
            kind = type(error).__qualname__
            span.set_attribute("error.type", kind)
            text = redact(str(error))
            span.add_event(
                "exception",
                {
                    "exception.type": kind,
                    "exception.message": text,
                    "exception.stacktrace": redact("".join(traceback.format_exception(error))),
                },
            )
            span.set_status(Status(StatusCode.ERROR, f"{kind}: {text}"[:1024]))
    span.end()


__all__ = [
    "Link",
    "attach",
    "current",
    "detach",
    "end_model",
    "end_run",
    "end_tool",
    "finish",
    "link_to",
    "mark",
    "provider_name",
    "span_of",
    "start_model",
    "start_node",
    "start_run",
    "start_tool",
    "with_span",
]
