"""`ToolSpec.from_schema`: a tool described by a JSON schema (a remote tool), run by a ToolNode."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.graph import ToolNode
from tenxgraph.core.graph.tool_spec import ToolSpec, tool_spec
from tests._helpers import tool_call
from tests.core.graph.test_tool_node import run_node

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "title": "City"}},
    "required": ["city"],
}


async def remote(**arguments: Any) -> str:
    return f"called with {arguments}"


def test_the_schema_is_shown_as_given_and_the_spec_is_its_own_spec() -> None:
    spec = ToolSpec.from_schema("weather", SCHEMA, remote, description="The weather.")
    assert spec.schema == {
        "type": "function",
        "function": {"name": "weather", "description": "The weather.", "parameters": SCHEMA},
    }
    assert spec.is_async
    assert spec.injected == frozenset()
    assert tool_spec(spec) is spec


def test_the_arguments_go_on_unchecked() -> None:
    spec = ToolSpec.from_schema("weather", SCHEMA, remote)
    assert spec.validate({"town": 3}) == {"town": 3}  # the schema's owner checks them


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid tool name"):
        ToolSpec.from_schema("has.dot", SCHEMA, remote)


async def test_a_tool_node_runs_it() -> None:
    node = ToolNode([ToolSpec.from_schema("weather", SCHEMA, remote)])
    assert node.all_tools_sync()[0]["function"]["parameters"] == SCHEMA
    ran = await run_node(node, tool_call("weather", "c1", city="Oslo"))
    block = ran.block(0)
    assert block.output == "called with {'city': 'Oslo'}"
    assert not block.is_error


def test_two_specs_with_one_name_clash_but_the_same_one_twice_does_not() -> None:
    spec = ToolSpec.from_schema("weather", SCHEMA, remote)
    node = ToolNode([spec, spec])
    assert list(node.tools) == ["weather"]
    with pytest.raises(ValueError, match="Two tools"):
        node.add_tool(ToolSpec.from_schema("weather", SCHEMA, lambda **kw: kw))
