"""Assistants through LangGraph's own client: one per served graph."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError

from tenxgraph.serve.server import assistant_uuid


async def test_search_lists_every_graph_and_filters_by_graph_id(client: LangGraphClient) -> None:
    found = await client.assistants.search()
    graphs = {"agent", "approval", "held", "nested", "failing", "progress", "steps"}
    assert {a["graph_id"] for a in found} == graphs
    only = await client.assistants.search(graph_id="agent")
    assert [a["assistant_id"] for a in only] == [assistant_uuid("agent")]
    assert len(await client.assistants.search(limit=2, offset=1)) == 2


async def test_get_by_graph_id_and_by_uuid(client: LangGraphClient) -> None:
    by_name = await client.assistants.get("agent")
    by_uuid = await client.assistants.get(assistant_uuid("agent"))
    assert by_name == by_uuid
    assert by_name["graph_id"] == "agent"
    with pytest.raises(NotFoundError):
        await client.assistants.get("nobody")


async def test_graph_drawing_has_the_agents_nodes(client: LangGraphClient) -> None:
    drawing = await client.assistants.get_graph("agent")
    ids = {node["id"] for node in drawing["nodes"]}
    assert ids == {"__start__", "agent", "tools", "__end__"}
    assert {"source": "__start__", "target": "agent"}.items() <= drawing["edges"][0].items()
    assert all({"source", "target"} <= set(edge) for edge in drawing["edges"])


async def test_schemas_describe_the_state(client: LangGraphClient) -> None:
    schemas = await client.assistants.get_schemas("agent")
    assert schemas["graph_id"] == "agent"
    assert "properties" in schemas["state_schema"]


async def test_count(client: LangGraphClient) -> None:
    assert await client.assistants.count() == 7
    assert await client.assistants.count(graph_id="held") == 1
