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
"""

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
