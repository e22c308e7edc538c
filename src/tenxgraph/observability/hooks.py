"""`RunHooks`: code of yours told what a run does (metrics, audits, a UI), without OpenTelemetry.

Subclass `RunHooks` and override the methods you need, or pass any callable taking one event.
Register them with ``graph.compile(hooks=[...])`` or per call with ``config={"hooks": [...]}``.
A method may be a plain function or a coroutine function (awaited in the run, so keep it
quick). An exception in a hook is logged on the ``tenxgraph.hooks`` logger and the run goes on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tenxgraph.core.redaction import get_logger

if TYPE_CHECKING:  # the events are loaded by the first run that has hooks
    from tenxgraph.observability.events import (
        Interrupted,
        ModelCallFinished,
        NodeFinished,
        NodeStarted,
        RunFinished,
        RunStarted,
        ToolFinished,
    )

logger = get_logger("tenxgraph.hooks")


class RunHooks:
    """Override what you need; every method does nothing by default."""

    def on_run_start(self, event: RunStarted) -> Any:
        pass

    def on_run_end(self, event: RunFinished) -> Any:
        pass

    def on_node_start(self, event: NodeStarted) -> Any:
        pass

    def on_node_end(self, event: NodeFinished) -> Any:
        pass

    def on_model_call(self, event: ModelCallFinished) -> Any:
        pass

    def on_tool_end(self, event: ToolFinished) -> Any:
        pass

    def on_interrupt(self, event: Interrupted) -> Any:
        pass


_METHODS: dict[type, str] = {}  # event type -> the RunHooks method told of it


def _methods() -> dict[type, str]:
    if not _METHODS:
        from tenxgraph.observability import events

        _METHODS.update(
            {
                events.RunStarted: "on_run_start",
                events.RunFinished: "on_run_end",
                events.NodeStarted: "on_node_start",
                events.NodeFinished: "on_node_end",
                events.ModelCallFinished: "on_model_call",
                events.ToolFinished: "on_tool_end",
                events.Interrupted: "on_interrupt",
            }
        )
    return _METHODS


Hook = RunHooks | Callable[[Any], Any]


class Dispatch:
    """The hooks of one run (as `hooks_from` checked them), sorted by event type once: an
    event nobody overrode costs a dict lookup."""

    __slots__ = ("by_type",)

    def __init__(self, hooks: Iterable[Hook]) -> None:
        by_type: dict[type, list[Callable[[Any], Any]]] = {}
        methods = _methods()
        for hook in hooks:
            if isinstance(hook, RunHooks):
                for kind, name in methods.items():
                    method = getattr(type(hook), name)
                    if method is not getattr(RunHooks, name):  # overridden
                        by_type.setdefault(kind, []).append(getattr(hook, name))
            else:
                for kind in methods:
                    by_type.setdefault(kind, []).append(hook)
        self.by_type = {k: tuple(v) for k, v in by_type.items()}

    async def emit(self, event: Any) -> None:
        for hook in self.by_type.get(type(event), ()):
            try:
                result = hook(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception(
                    "hook %r failed on %s; the run goes on", hook, type(event).__name__
                )


def hooks_from(value: Any, where: str) -> list[Hook]:
    """A list of hooks from what was given (`None`, one hook, or several)."""
    if value is None:
        return []
    if isinstance(value, RunHooks) or callable(value):
        _check(value, where)
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, str | bytes | dict):
        found = list(value)
        for hook in found:
            _check(hook, f"{where}: a hook")
        return found
    raise TypeError(f"{where} must be a RunHooks, a callable, or a list of them, not {value!r}")


def _check(hook: Any, where: str) -> None:
    """Refuse what cannot be a hook now, not at the first event: not callable, or a
    `RunHooks` class where an instance of it was meant (called with an event, it would
    only fail)."""
    if isinstance(hook, type) and issubclass(hook, RunHooks):
        raise TypeError(
            f"{where} must be a RunHooks instance, not the class {hook.__name__}: pass "
            f"{hook.__name__}()"
        )
    if not (isinstance(hook, RunHooks) or callable(hook)):
        raise TypeError(
            f"{where} must be a RunHooks instance or a callable taking one event, not "
            f"{type(hook).__name__}"
        )


__all__ = ["Dispatch", "Hook", "RunHooks", "hooks_from"]
