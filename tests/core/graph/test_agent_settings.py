"""Model settings per run and per call (`config["model_settings"]`,
`config["model_settings_by_node"]`, `Agent(model_settings=...)`, `call_settings`,
`call_request(overrides=...)`), read from the request body litellm sends; and Anthropic prompt
caching: `cache_control` on text blocks and system prompts, cache tokens in the usage."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import NodeError
from tenxgraph.core.graph import Agent, ToolNode
from tenxgraph.core.llm.settings import KNOWN_SETTINGS
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.message_block import TextBlock
from tests.core.graph._support import chain, inp, linear
from tests.core.llm._support import completion, sent

KEY = "sk-test-0123456789abcdef"
MODEL = "openai/gpt-4o-mini"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"


@pytest.fixture
def answered(openai_api: respx.Route) -> respx.Route:
    openai_api.mock(side_effect=lambda request: httpx.Response(200, json=completion("ok")))
    return openai_api


def two_agents(a: Agent, b: Agent) -> Any:
    return chain(("a", a), ("b", b)).compile()


async def test_run_settings_override_the_agents_for_every_agent_and_per_node(
    answered: respx.Route,
) -> None:
    app = two_agents(
        Agent(MODEL, api_key=KEY, temperature=0.7, max_tokens=100),
        Agent(MODEL, api_key=KEY, temperature=0.7, max_tokens=100, seed=3),
    )
    config = {
        "model_settings": {"temperature": 0, "max_tokens": 50},
        "model_settings_by_node": {"b": {"temperature": 0.2, "seed": None}},
    }
    await app.ainvoke(inp("hi"), config)
    first, second = sent(answered, 0), sent(answered, 1)
    assert (first["temperature"], first["max_tokens"]) == (0, 50)
    assert (second["temperature"], second["max_tokens"]) == (0.2, 50)
    assert "seed" not in second  # None: the provider's default
    await app.ainvoke(inp("hi"))  # the next run without them: the Agents' own settings
    assert (sent(answered)["temperature"], sent(answered)["max_tokens"]) == (0.7, 100)
    assert sent(answered)["seed"] == 3


async def test_a_run_may_ask_for_another_model_and_reasoning_effort(
    answered: respx.Route,
) -> None:
    agent = Agent(MODEL, api_key=KEY)
    config = {"model_settings": {"model": "openai/o4-mini", "reasoning_effort": "low"}}
    await linear(("agent", agent)).ainvoke(inp("hi"), config)
    body = sent(answered)
    assert body["model"] == "o4-mini"
    assert body["reasoning_effort"] == "low"
    assert answered.calls[0].request.headers["authorization"] == f"Bearer {KEY}"


async def test_tool_choice_and_parallel_tool_calls_per_run(answered: respx.Route) -> None:
    def lookup(q: str) -> str:
        """Look something up."""
        return q

    agent = Agent(MODEL, api_key=KEY, tool_node=ToolNode([lookup]))
    config = {"model_settings": {"tool_choice": "required", "parallel_tool_calls": False}}
    await linear(("agent", agent)).ainvoke(inp("hi"), config)
    body = sent(answered)
    assert body["tool_choice"] == "required"
    assert body["parallel_tool_calls"] is False
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]


async def test_provider_extras_go_under_extra_body_or_extra(answered: respx.Route) -> None:
    agent = Agent(MODEL, api_key=KEY)
    config = {
        "model_settings": {
            "extra_body": {"custom_flag": True},
            "extra": {"logprobs": True, "top_logprobs": 2},
        }
    }
    await linear(("agent", agent)).ainvoke(inp("hi"), config)
    body = sent(answered)
    assert body["custom_flag"] is True
    assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
    assert "extra" not in body


async def test_per_call_settings_from_a_function_and_their_order(answered: respx.Route) -> None:
    seen: list[dict[str, Any]] = []

    def per_call(state: AgentState, config: dict[str, Any]) -> dict[str, Any]:
        seen.append(config)
        return {"max_tokens": 10 * len(state.context), "temperature": 0.3, "seed": 1}

    agent = Agent(MODEL, api_key=KEY, temperature=0.9, model_settings=per_call)
    app = linear(("agent", agent))
    await app.ainvoke(inp("a", "b"))
    body = sent(answered)
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (20, 0.3, 1)
    # the run's settings beat the node's own, its per-node ones beat the run's
    config = {
        "model_settings": {"temperature": 0.5, "seed": 2},
        "model_settings_by_node": {"agent": {"seed": 4}},
    }
    await app.ainvoke(inp("a"), config)
    body = sent(answered)
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (10, 0.5, 4)
    assert seen[-1]["model_settings"] == {"temperature": 0.5, "seed": 2}


async def test_a_subclass_may_decide_the_settings_of_each_call(answered: respx.Route) -> None:
    class Careful(Agent):
        async def call_settings(self, state: AgentState, config: dict[str, Any]) -> Any:
            long = len(state.context) > 1
            return {"temperature": 0, "max_tokens": 500 if long else 50}

    app = linear(("agent", Careful(MODEL, api_key=KEY)))
    await app.ainvoke(inp("one"))
    assert (sent(answered)["temperature"], sent(answered)["max_tokens"]) == (0, 50)
    await app.ainvoke(inp("one", "two"))
    assert sent(answered)["max_tokens"] == 500


async def test_unknown_setting_names_are_refused_with_the_known_ones(
    answered: respx.Route,
) -> None:
    app = linear(("agent", Agent(MODEL, api_key=KEY)))
    with pytest.raises(ValueError, match="temprature") as info:
        await app.ainvoke(inp("hi"), {"model_settings": {"temprature": 0}})
    assert "'temperature'" in str(info.value)
    assert "extra_body" in str(info.value)
    with pytest.raises(ValueError, match="bogus"):
        await app.ainvoke(inp("hi"), {"model_settings_by_node": {"agent": {"bogus": 1}}})
    with pytest.raises(ValueError, match="nope"):
        Agent(MODEL, model_settings={"nope": 1})
    per_call = Agent(MODEL, api_key=KEY, model_settings=lambda state, config: {"tmp": 1})
    with pytest.raises(NodeError) as failed:  # found as the node runs: a node error
        await linear(("agent", per_call)).ainvoke(inp("hi"))
    assert isinstance(failed.value.__cause__, ValueError)
    assert "tmp" in str(failed.value)
    assert answered.call_count == 0
    assert {"temperature", "max_tokens", "tool_choice", "parallel_tool_calls"} <= KNOWN_SETTINGS
    assert {"reasoning_effort", "model", "extra_body", "extra"} <= KNOWN_SETTINGS


async def test_call_request_takes_the_runtimes_own_overrides() -> None:
    """The seam for the runtime itself (a last call without tools, say): overrides on top of
    everything, and the tools left out."""

    def lookup(q: str) -> str:
        """Look something up."""
        return q

    agent = Agent(MODEL, api_key=KEY, tool_node=ToolNode([lookup]), temperature=0.4)
    state = AgentState(context=[Message.text_message("hi")])
    config = {"model_settings": {"tool_choice": "auto", "temperature": 0.1}}
    request = await agent.call_request(state, config)
    assert [t["function"]["name"] for t in request.tools] == ["lookup"]
    assert request.settings == {"api_key": KEY, "temperature": 0.1, "tool_choice": "auto"}
    last = await agent.call_request(state, config, overrides={"tool_choice": None}, tools=False)
    assert last.tools == []
    assert last.settings == {"api_key": KEY, "temperature": 0.1}
    assert agent.llm_kwargs == {"api_key": KEY, "temperature": 0.4}  # the Agent is unchanged
    with pytest.raises(ValueError, match="max_model_calls"):
        await agent.call_request(state, overrides={"max_model_calls": 1})


async def test_another_provider_asked_per_run_does_not_get_the_agents_key() -> None:
    agent = Agent(MODEL, api_key=KEY, api_base="http://proxy.local/v1", temperature=0.2)
    state = AgentState(context=[Message.text_message("hi")])
    same = await agent.call_request(state, {"model_settings": {"model": "openai/gpt-4o"}})
    assert (same.model, same.settings["api_key"]) == ("openai/gpt-4o", KEY)
    other = await agent.call_request(
        state, {"model_settings": {"model": "anthropic/claude-sonnet-4-5"}}
    )
    assert other.model == "anthropic/claude-sonnet-4-5"
    assert other.settings == {"temperature": 0.2}


# -- Anthropic prompt caching ----------------------------------------------------------------


def test_text_blocks_take_a_cache_control() -> None:
    block = TextBlock(text="rules", cache_control={"type": "ephemeral"})
    assert block.model_dump() == {
        "type": "text",
        "text": "rules",
        "annotations": [],
        "cache_control": {"type": "ephemeral"},
    }
    assert "cache_control" not in TextBlock(text="x").model_dump()  # unset: not dumped
    message = Message.model_validate(
        {
            "role": "user",
            "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}],
        }
    )
    assert message.content[0] == TextBlock(text="q", cache_control={"type": "ephemeral"})
    assert Message.model_validate_json(message.model_dump_json()) == message


async def test_cache_control_reaches_the_anthropic_wire_and_cache_tokens_come_back() -> None:
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 50,
            "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 60,
        },
    }
    agent = Agent(
        "anthropic/claude-sonnet-4-5",
        api_key=KEY,
        max_tokens=256,
        system_prompt=[
            {"role": "system", "content": "Long rules.", "cache_control": {"type": "ephemeral"}},
            "Short note for {user_name}.",
        ],
    )
    question = Message(
        role="user",
        content=[TextBlock(text="The document...", cache_control={"type": "ephemeral"})],
    )

    class Named(AgentState):
        user_name: str = "Ada"

    with respx.mock(using="httpx") as mock:
        route = mock.post(ANTHROPIC_URL).mock(return_value=httpx.Response(200, json=answer))
        result = await linear(("agent", agent), state=Named).ainvoke({"messages": [question]})
    body = sent(route)
    assert body["system"] == [
        {"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Short note for Ada."},
    ]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "The document...", "cache_control": {"type": "ephemeral"}}
    ]
    usages = result["messages"][-1].usages
    assert usages.cache_creation_input_tokens == 20
    assert usages.cache_read_input_tokens == 60
    assert agent.system_prompt == ["Long rules.", "Short note for {user_name}."]
