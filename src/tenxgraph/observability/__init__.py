"""Seeing what runs do: OpenTelemetry traces, hooks, and what model calls cost.

- Traces: install ``tenxgraph[otel]`` and configure the OpenTelemetry SDK as you already do
  (OTLP, console, Logfire, Jaeger...); every run then gives a span tree (run, nodes, model
  calls, tool calls) following the GenAI semantic conventions. `Tracing` picks another
  provider or records message contents (off by default).
- Hooks: `RunHooks` (or any callable taking one event), on ``compile(hooks=...)`` or per call
  in ``config["hooks"]``.
- Logs: the ``tenxgraph`` logger hierarchy (``tenxgraph.run``, ``.model``, ``.tools``,
  ``.context``, ``.threads``, ``.hooks``); no message contents or credentials at any level.
- Usage: a run's ``token_usage`` and a thread's ``execution_meta.usage``.

The names are imported on first use: a run that nobody watches never loads the events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenxgraph._lazy import lazy_getattr

_EVENTS = "tenxgraph.observability.events"
_LAZY: dict[str, str] = {
    "Event": _EVENTS,
    "Interrupted": _EVENTS,
    "ModelCallFinished": _EVENTS,
    "NodeFinished": _EVENTS,
    "NodeStarted": _EVENTS,
    "RunFinished": _EVENTS,
    "RunStarted": _EVENTS,
    "ToolFinished": _EVENTS,
    "RunHooks": "tenxgraph.observability.hooks",
    "CONTENT_ENV": "tenxgraph.observability.settings",
    "Tracing": "tenxgraph.observability.settings",
    "Usage": "tenxgraph.core.state.usage",
}

if TYPE_CHECKING:
    from tenxgraph.core.state.usage import Usage
    from tenxgraph.observability.events import (
        Event,
        Interrupted,
        ModelCallFinished,
        NodeFinished,
        NodeStarted,
        RunFinished,
        RunStarted,
        ToolFinished,
    )
    from tenxgraph.observability.hooks import RunHooks
    from tenxgraph.observability.settings import CONTENT_ENV, Tracing

__getattr__ = lazy_getattr(__name__, globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "CONTENT_ENV",
    "Event",
    "Interrupted",
    "ModelCallFinished",
    "NodeFinished",
    "NodeStarted",
    "RunFinished",
    "RunHooks",
    "RunStarted",
    "ToolFinished",
    "Tracing",
    "Usage",
]
