"""`Program`: what a compiled graph runs, worked out once at compile time.

The engine reads only this (nodes, edges, reducers, breakpoints, the checkpointer), never the
app object that holds it, so the run loop depends on what it runs and nothing else.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from tenxgraph.core.graph.node import NodeSpec
from tenxgraph.core.graph.routing import Routing
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.agent_state import Reducer
from tenxgraph.core.state.reducers import add_messages
from tenxgraph.observability.hooks import Dispatch, Hook
from tenxgraph.observability.settings import DEFAULT_TRACING, Tracing

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer
    from tenxgraph.storage.media.offload import MediaOffload


class Program:
    """A graph's nodes, edges and merge rules, as every run of it uses them."""

    __match_args__ = (
        "state_type",
        "specs",
        "routing",
        "checkpointer",
        "interrupt_before",
        "interrupt_after",
        "fields",
        "reducers",
        "merge_messages",
        "append_only",
        "name",
        "hooks",
        "dispatch",
        "tracing",
        "budget",
        "thread_budget",
        "media",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        state_type: type[AgentState],
        specs: dict[str, NodeSpec],
        routing: Routing,
        checkpointer: BaseCheckpointer | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
        fields: frozenset[str],  # the state's field names
        reducers: dict[str, Reducer],  # by field, `context` apart
        merge_messages: Reducer,  # the `context` reducer
        append_only: bool,  # `merge_messages` is `add_messages`, which only appends
        name: str = "graph",  # what traces, logs and hooks call it
        hooks: tuple[Hook, ...] = (),
        dispatch: Dispatch | None = None,  # `hooks`, sorted once
        tracing: Tracing = DEFAULT_TRACING,
        budget: Budget | None = None,  # `compile(budget=...)`: every run's limits
        thread_budget: Budget | None = None,  # `compile(thread_budget=...)`: every thread's
        media: MediaOffload | None = None,  # the media store and offload threshold of saves
    ) -> None:
        self.state_type = state_type
        self.specs = specs
        self.routing = routing
        self.checkpointer = checkpointer
        self.interrupt_before = interrupt_before
        self.interrupt_after = interrupt_after
        self.fields = fields
        self.reducers = reducers
        self.merge_messages = merge_messages
        self.append_only = append_only
        self.name = name
        self.hooks = hooks
        self.dispatch = dispatch
        self.tracing = tracing
        self.budget = budget
        self.thread_budget = thread_budget
        self.media = media

    def stored_in(
        self, checkpointer: BaseCheckpointer | None, media: MediaOffload | None
    ) -> Program:
        """This program keeping its threads in `checkpointer` and its media in `media`."""
        program = copy.copy(self)
        program.checkpointer = checkpointer
        program.media = media
        return program

    @classmethod
    def build(
        cls,
        state_type: type[AgentState],
        specs: dict[str, NodeSpec],
        routing: Routing,
        checkpointer: BaseCheckpointer | None,
        interrupt_before: frozenset[str],
        interrupt_after: frozenset[str],
        name: str = "graph",
        hooks: tuple[Hook, ...] = (),
        tracing: Tracing = DEFAULT_TRACING,
        budget: Budget | None = None,
        media: MediaOffload | None = None,
        thread_budget: Budget | None = None,
    ) -> Program:
        reducers = dict(state_type.field_reducers())
        merge_messages = reducers.pop("context", add_messages)
        return cls(
            state_type,
            specs,
            routing,
            checkpointer,
            interrupt_before,
            interrupt_after,
            frozenset(state_type.model_fields),
            reducers,
            merge_messages,
            merge_messages is add_messages,
            name,
            hooks,
            Dispatch(hooks) if hooks else None,
            tracing,
            budget,
            thread_budget,
            media,
        )


__all__ = ["Program"]
