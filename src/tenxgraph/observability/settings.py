"""How a graph's runs are traced: `Tracing`, and the tracer it comes to (or none).

Nothing here imports OpenTelemetry: a provider is looked for only where the application has
imported it already, and `tracing_module` loads our spans' code on first use.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

#: the environment variable of the GenAI conventions that opts in to recording contents
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = frozenset({"true", "1", "yes", "span_only", "span_and_event", "event_only"})


@dataclass(frozen=True, slots=True)
class Tracing:
    """How a graph's runs are traced with OpenTelemetry.

    `tracer_provider`: None uses the global one (``trace.set_tracer_provider``), if one was
    set; a provider object uses that one. `record_content`: whether prompts, answers, tool
    arguments and results go on the spans; None reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_
    MESSAGE_CONTENT`` (off unless it says ``true``). `enabled=False` traces nothing.
    """

    tracer_provider: Any = None
    record_content: bool | None = None
    enabled: bool = True

    def content(self) -> bool:
        if self.record_content is not None:
            return self.record_content
        return os.environ.get(CONTENT_ENV, "").strip().lower() in _CONTENT_ON


DEFAULT_TRACING = Tracing()
_tracers: dict[int, tuple[Any, Any]] = {}  # id(provider) -> (provider, its tracer)


def tracer_for(settings: Tracing) -> Any:
    """The tracer runs use, or None when nobody configured tracing: OpenTelemetry not
    imported by anyone (so not set up), or its global provider never set."""
    if not settings.enabled:
        return None
    provider = settings.tracer_provider
    if provider is None:
        api = sys.modules.get("opentelemetry.trace")
        if api is None:
            return None
        provider = api.get_tracer_provider()
        if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
            return None
    found = _tracers.get(id(provider))
    if found is None or found[0] is not provider:
        from tenxgraph import __version__

        found = (provider, provider.get_tracer("tenxgraph", __version__))
        if len(_tracers) > 64:
            _tracers.clear()
        _tracers[id(provider)] = found
    return found[1]


_loaded: list[Any] = []


def tracing_module() -> Any:
    """The OpenTelemetry part, imported on first use (only ever with a tracer)."""
    if not _loaded:
        from tenxgraph.observability import tracing

        _loaded.append(tracing)
    return _loaded[0]


__all__ = ["CONTENT_ENV", "DEFAULT_TRACING", "Tracing", "tracer_for", "tracing_module"]
