"""`ReactAgent`: the model -> tools -> model loop, from `Agent`, `ToolNode` and one conditional
edge. It is what you would write by hand; `tools_condition` is public for that."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, overload

from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.graph.results import StateT
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.context_manager import BaseContextManager
from tenxgraph.observability.settings import Tracing
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.utils.constants import END, START

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.storage.store.base import BaseStore


def tools_condition(state: AgentState) -> str:
    """Route after the model: to ``"tools"`` when its last answer asks for tools, else END.

    ``graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})``
    """
    for message in reversed(state.context):
        if message.role == "assistant":
            return "tools" if message.has_tool_calls() else END
        if message.role != "system":
            return END
    return END


class ReactAgent(Generic[StateT]):
    """An agent that answers with the help of `tools`: the model is called, the tools it asks
    for run (in parallel, replay-safe), their results go back to the model, until it answers
    without a tool call.

    ``app = ReactAgent("openai/gpt-4o-mini", [lookup, refund]).compile(checkpointer=...)``

    `model` is any name an `Agent` takes (``"test"`` for the offline model) or a model
    client; `agent_options` go to the `Agent` (temperature, output_schema, fallback_models,
    ...). The nodes are named ``"agent"`` and ``"tools"``. `requires_approval` (True, or
    tool names) makes the run pause before those tools run, for a person to approve, edit or
    reject each call (as `ToolNode(requires_approval=...)`). With `state=MyState` (or an
    instance), `compile()` gives a `CompiledGraph[MyState]`."""

    @overload
    def __init__(
        self: ReactAgent[AgentState],
        model: Any,
        tools: Iterable[Callable[..., Any]] | ToolNode,
        system_prompt: str | list[Any] | None = None,
        *,
        state: None = None,
        context_manager: BaseContextManager[Any] | None = None,
        requires_approval: bool | Iterable[str] = False,
        **agent_options: Any,
    ) -> None: ...

    @overload
    def __init__(
        self,
        model: Any,
        tools: Iterable[Callable[..., Any]] | ToolNode,
        system_prompt: str | list[Any] | None = None,
        *,
        state: type[StateT],
        context_manager: BaseContextManager[Any] | None = None,
        requires_approval: bool | Iterable[str] = False,
        **agent_options: Any,
    ) -> None: ...

    @overload
    def __init__(
        self,
        model: Any,
        tools: Iterable[Callable[..., Any]] | ToolNode,
        system_prompt: str | list[Any] | None = None,
        *,
        state: StateT,
        context_manager: BaseContextManager[Any] | None = None,
        requires_approval: bool | Iterable[str] = False,
        **agent_options: Any,
    ) -> None: ...

    def __init__(
        self,
        model: Any,
        tools: Iterable[Callable[..., Any]] | ToolNode,
        system_prompt: str | list[Any] | None = None,
        *,
        state: AgentState | type[AgentState] | None = None,
        context_manager: BaseContextManager[Any] | None = None,
        requires_approval: bool | Iterable[str] = False,
        **agent_options: Any,
    ) -> None:
        if isinstance(tools, ToolNode):
            if requires_approval is not False:
                raise TypeError(
                    "ReactAgent(requires_approval=...) is for a list of tools; with a ToolNode, "
                    "pass it to the ToolNode: ToolNode(tools, requires_approval=...)"
                )
            self.tool_node = tools
        else:
            self.tool_node = ToolNode(tools, requires_approval=requires_approval)
        self.agent = Agent(
            model, system_prompt=system_prompt, tool_node=self.tool_node, **agent_options
        )
        graph = StateGraph(state, context_manager=context_manager)
        self.graph: StateGraph[StateT] = graph  # type: ignore[assignment]  # (the overloads say)
        graph.add_node("agent", self.agent)
        graph.add_node("tools", self.tool_node)
        graph.add_edge(START, "agent")
        routes: Mapping[str, str] = {"tools": "tools", END: END}
        graph.add_conditional_edges("agent", tools_condition, routes)
        graph.add_edge("tools", "agent")

    def compile(
        self,
        checkpointer: BaseCheckpointer | Literal[False] | None = None,
        interrupt_before: Iterable[str] | None = None,
        interrupt_after: Iterable[str] | None = None,
        store: BaseStore | None = None,
        *,
        name: str | None = None,
        hooks: Any = None,
        tracing: Tracing | bool | None = None,
        budget: Budget | dict[str, Any] | None = None,
        thread_budget: Budget | dict[str, Any] | None = None,
    ) -> CompiledGraph[StateT]:
        """Like `StateGraph.compile`: without a checkpointer, threads are kept in memory;
        `name`, `hooks` and `tracing` say how its runs are observed (named ``"agent"``);
        tools taking a `store` parameter get `store`; `budget` limits every run,
        `thread_budget` every thread's runs together."""
        return self.graph.compile(
            checkpointer=checkpointer,
            interrupt_before=interrupt_before,
            interrupt_after=interrupt_after,
            store=store,
            name=name or "agent",
            hooks=hooks,
            tracing=tracing,
            budget=budget,
            thread_budget=thread_budget,
        )


__all__ = ["ReactAgent", "tools_condition"]
