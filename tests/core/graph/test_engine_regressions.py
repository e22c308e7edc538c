"""Bugs found while building the engine, kept from coming back."""

from __future__ import annotations

from typing import Annotated

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message, append_items
from tenxgraph.utils.constants import END, START


class TripState(AgentState):
    city: str = ""
    visited: Annotated[list[str], append_items] = []


async def test_replaced_and_reduced_fields_in_one_update_both_apply() -> None:
    # pydantic's validate_assignment swaps the model's __dict__; a reducer write that followed a
    # replaced field used to land in the discarded dict and vanish.
    def pick(state: TripState) -> dict[str, object]:
        return {"city": "Lisbon", "visited": ["Lisbon"]}

    def check(state: TripState) -> str:
        return f"{state.city}:{','.join(state.visited)}"

    graph = StateGraph(TripState)
    graph.add_node(pick)
    graph.add_node(check)
    graph.add_edge(START, "pick")
    graph.add_edge("pick", "check")
    graph.add_edge("check", END)
    result = await graph.compile().ainvoke(
        {"messages": [Message.text_message("go")]}, response_granularity="full"
    )
    assert result["state"].visited == ["Lisbon"]
    assert result["messages"][-1].text() == "Lisbon:Lisbon"


async def test_a_step_keeps_the_history_id_index() -> None:
    # Undoing a node's (absent) in-place appends used to truncate the history even when
    # nothing was appended, which dropped add_messages' id index: every step then rebuilt it,
    # a cost growing with the history.
    from tenxgraph.core.graph.merge import view_changes
    from tenxgraph.core.state import add_messages

    state = TripState()
    state.context = add_messages([], [Message.text_message("a"), Message.text_message("b")])
    pre = dict(state.__dict__)
    assert view_changes(state, pre["context"], pre, 2, {}) == []
    assert state.context._index is not None  # type: ignore[attr-defined]


async def test_a_finished_run_is_not_kept_alive_by_its_cancelled_timer() -> None:
    # the run's one timer (node timeouts, lease beats) used to capture the run's context, and a
    # cancelled timer stays in the loop's queue until it is due (15 minutes for the default
    # node timeout): every run stayed alive that long, and each collection walked them all
    import gc

    from tenxgraph.core.graph.engine import Run

    async def node(state: AgentState) -> str:
        return "ok"

    graph = StateGraph(AgentState)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_edge("node", END)
    app = graph.compile(checkpointer=False)
    for _ in range(20):
        await app.ainvoke({"messages": [Message.text_message("x")]})
    gc.collect()
    ours = [o for o in gc.get_objects() if type(o) is Run and o.program is app._program]
    assert ours == []
