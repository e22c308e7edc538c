"""A tool that returns a `Command`: its update is applied, its tool message stored, and the run
goes where it says after the tool step (how one agent hands the conversation to another)."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError, UnreachableNodesWarning
from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils import Command
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.interrupt import interrupt
from tests._helpers import asking, results, roles, thread, tool_call


class Desk(AgentState):
    active: str = "triage"


def transfer_to_billing(reason: str) -> Command:
    """Hand the customer to billing."""
    return Command(goto="billing", update={"active": "billing"})


def transfer_to_sales() -> Command:
    """Hand the customer to sales."""
    return Command(goto=["sales"], update="Sales will take it from here.")


def lookup() -> str:
    """Look something up."""
    return "found"


def approve() -> str:
    """Ask a person."""
    return f"approved: {interrupt('ok?')}"


def desk(tools: list[Any], checkpointer: Any = None) -> Any:
    """START -> tools -> triage; billing and sales only reachable by a tool's Command."""
    ran: list[str] = []

    def agent(name: str) -> Any:
        def node(state: Desk) -> str:
            ran.append(name)
            return f"{name} here"

        return node

    graph = StateGraph(Desk)
    graph.add_node("tools", ToolNode(tools))
    for name in ("triage", "billing", "sales"):
        graph.add_node(name, agent(name))
        graph.add_edge(name, END)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", "triage")
    with pytest.warns(UnreachableNodesWarning):  # billing and sales: no edge leads there
        app = graph.compile(checkpointer=checkpointer if checkpointer is not None else False)
    return app, ran


def asked(*calls: Any) -> dict[str, Any]:
    return {"messages": [Message.text_message("help"), asking(*calls)]}


async def test_a_tools_command_routes_the_run_and_applies_its_update() -> None:
    app, ran = desk([transfer_to_billing, lookup])
    result = await app.ainvoke(
        asked(tool_call("transfer_to_billing", "c1", reason="refund")), response_granularity="full"
    )
    assert ran == ["billing"]  # not triage, where the tool node's edge leads
    state = result["state"]
    assert state.active == "billing"
    assert roles(state.context) == ["user", "assistant", "tool", "assistant"]
    assert results(state.context)["c1"].output == "Handed over to billing."
    assert state.context[-1].text() == "billing here"


async def test_without_a_command_the_edges_decide() -> None:
    app, ran = desk([transfer_to_billing, lookup])
    await app.ainvoke(asked(tool_call("lookup", "c1")))
    assert ran == ["triage"]


async def test_a_commands_update_may_be_the_tools_answer() -> None:
    app, ran = desk([transfer_to_sales])
    result = await app.ainvoke(
        asked(tool_call("transfer_to_sales", "c1")), response_granularity="full"
    )
    assert ran == ["sales"]
    assert results(result["state"].context)["c1"].output == "Sales will take it from here."


async def test_commands_of_parallel_calls_go_to_all_their_nodes_once() -> None:
    app, ran = desk([transfer_to_billing, transfer_to_sales])
    await app.ainvoke(
        asked(
            tool_call("transfer_to_billing", "c1", reason="x"),
            tool_call("transfer_to_sales", "c2"),
            tool_call("transfer_to_billing", "c3", reason="y"),
        )
    )
    assert sorted(ran) == ["billing", "sales"]


async def test_a_command_to_no_node_is_a_graph_error_naming_it() -> None:
    def nowhere() -> Command:
        """Go nowhere."""
        return Command(goto="nowhere")

    app, _ = desk([nowhere])
    with pytest.raises(GraphError, match="nowhere") as caught:
        await app.ainvoke(asked(tool_call("nowhere", "c1")))
    assert caught.value.error_code == "GRAPH_004"


async def test_a_command_to_the_parent_graph_outside_a_subgraph_is_refused_clearly() -> None:
    def up() -> Command:
        """Go up."""
        return Command(goto="billing", graph=Command.PARENT)

    app, ran = desk([up])
    with pytest.raises(GraphError, match="not running as a subgraph"):
        await app.ainvoke(asked(tool_call("up", "c1")))
    assert ran == []


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_replayed_call_routes_as_it_did(kind: str, tmp_path: Any) -> None:
    """The handoff is recorded with the call: when the step runs again after another call of
    it paused, the recorded call is replayed, not run, and still hands over."""
    handed: list[str] = []

    def transfer() -> Command:
        """Hand over to billing."""
        handed.append("once")
        return Command(goto="billing", update={"active": "billing"})

    store: Any = (
        InMemoryCheckpointer() if kind == "memory" else SqliteCheckpointer(tmp_path / "t.db")
    )
    app, ran = desk([transfer, approve], checkpointer=store)
    config = thread()
    first = await app.ainvoke(
        asked(tool_call("transfer", "c1"), tool_call("approve", "c2")), config
    )
    assert "interrupt" in first
    assert ran == []
    await app.ainvoke({"resume": "yes"}, config)
    assert handed == ["once"]  # replayed from the ledger, not run again
    assert ran == ["billing"]
    state = await app.aget_state(config)
    assert state is not None
    assert state.active == "billing"
    assert results(state.context)["c2"].output == "approved: yes"
    await app.aclose()
