"""Run budgets: limits on model calls, tool calls, tokens and cost, set on `compile()`, on an
`Agent` or per run in `config`. By default a run that reaches one ends gracefully (a last call
without tools, asked for a final answer; `result["budget"]` says which limit ended it); with
`on_exceeded="error"`, `BudgetExceededError` comes before the call that would cross it and
nothing of that step is stored. Budgets hold across parallel tool calls, subgraphs and a resume
in another process."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import BudgetExceededError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message, TokenUsages
from tenxgraph.core.state.budget import Budget
from tenxgraph.core.state.spending import ENDED_KEY, SPENT_KEY
from tenxgraph.prebuilt import ReactAgent, tools_condition
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import END, START
from tests._helpers import Lookups, react, roles, thread, tool_call
from tests.core.graph._support import chain, inp


class Model:
    """A model that asks for `fan` lookups whenever it is offered tools, and answers "done"
    when it is not; it records what each call was offered and the settings it got."""

    def __init__(self, fan: int = 1, cost: float | None = None) -> None:
        self.fan = fan
        self.cost = cost
        self.calls: list[dict[str, Any]] = []

    def __call__(self, messages: list[Message], info: Any) -> Any:
        last = messages[-1]
        self.calls.append(
            {
                "tools": len(info.tools),
                "note": last.text() if last.role == "system" else None,
                "max_tokens": info.settings.get("max_tokens"),
            }
        )
        n = len(self.calls)
        if not info.tools:
            answer = Message.text_message("done", "assistant")
        else:
            calls = [tool_call("lookup", f"c{n}_{i}", q=f"{n}.{i}") for i in range(self.fan)]
            answer = Message(role="assistant", content=calls)
        answer.usages = TokenUsages(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        if self.cost is not None:
            answer.metadata["cost"] = self.cost
        return answer


async def full(app: Any, config: dict[str, Any], data: Any = None) -> dict[str, Any]:
    result: dict[str, Any] = await app.ainvoke(
        inp("go") if data is None else data, config, response_granularity="full"
    )
    return result


# -- the budget itself ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"max_model_calls": -1},
        {"max_tool_calls": True},
        {"max_total_tokens": 1.5},
        {"max_cost": math.nan},
        {"max_cost": "1"},
        {"on_exceeded": "stop"},
    ],
)
def test_a_budget_refuses_values_that_are_not_limits(bad: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
        Budget(**bad)


async def test_config_takes_the_budget_keys_and_refuses_look_alikes_with_a_hint() -> None:
    app = react(Model(), Lookups())
    with pytest.raises(ValueError, match="unknown budget key"):
        await app.ainvoke(inp("go"), {"budget": {"max_calls": 1}})
    with pytest.raises(ValueError, match="max_model_calls"):
        await app.ainvoke(inp("go"), {"max_turns": 3})
    with pytest.raises(ValueError, match="max_total_tokens"):
        await app.ainvoke(inp("go"), {"max_tokens": 100})


# -- tool calls ----------------------------------------------------------------------------


async def test_a_fan_out_past_the_tool_budget_runs_what_fits_and_ends_with_a_final_answer() -> None:
    model, tools = Model(fan=8), Lookups()
    app = react(model, tools, checkpointer=InMemoryCheckpointer())
    config = {**thread(), "max_tool_calls": 3}
    result = await full(app, config)
    assert tools.ran == ["1.0", "1.1", "1.2"]  # the first three, in the model's order
    context = result["state"].context
    refused = [m for m in context if m.role == "tool" and "budget" in m.text()]
    assert len(refused) == 5
    assert all("max_tool_calls=3" in m.text() for m in refused)
    # the model was asked once more, without tools, for its final answer
    assert [c["tools"] for c in model.calls] == [1, 0]
    assert "max_tool_calls" in model.calls[1]["note"]
    assert context[-1].text() == "done"
    assert result["budget"]["ended_by"] == "max_tool_calls"
    assert result["budget"]["spent"]["tool_calls"] == 3
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.status == "completed"
    assert stored.execution_meta.internal_data[ENDED_KEY] == "max_tool_calls"
    assert SPENT_KEY not in stored.execution_meta.internal_data  # a finished run's is dropped


async def test_with_on_exceeded_error_the_tool_step_fails_before_any_tool_runs() -> None:
    model, tools = Model(fan=8), Lookups()
    app = react(model, tools, checkpointer=InMemoryCheckpointer())
    config = {**thread(), "budget": Budget(max_tool_calls=3, on_exceeded="error")}
    with pytest.raises(BudgetExceededError) as caught:
        await app.ainvoke(inp("go"), config)
    assert caught.value.error_code == "BUDGET_001"
    assert caught.value.context["limit"] == "max_tool_calls"
    assert tools.ran == []
    stored = await app.aget_state(config)
    assert stored is not None
    assert roles(stored.context) == ["user", "assistant"]  # the tool step left nothing
    assert stored.execution_meta.status == "error"


# -- model calls, tokens, cost -------------------------------------------------------------


async def test_the_last_model_call_the_budget_allows_is_made_without_tools() -> None:
    model, tools = Model(), Lookups()
    result = await full(react(model, tools), {"max_model_calls": 3})
    assert [c["tools"] for c in model.calls] == [1, 1, 0]
    assert tools.ran == ["1.0", "2.0"]
    assert result["budget"]["ended_by"] == "max_model_calls"
    assert result["state"].context[-1].text() == "done"


async def test_with_on_exceeded_error_no_model_call_goes_past_the_limit() -> None:
    model, tools = Model(), Lookups()
    budget = {"max_model_calls": 2, "on_exceeded": "error"}
    with pytest.raises(BudgetExceededError, match="max_model_calls=2"):
        await react(model, tools).ainvoke(inp("go"), {"budget": budget})
    assert len(model.calls) == 2  # both with tools: no graceful last call in this mode


async def test_without_a_final_answer_the_run_just_ends_where_the_budget_does() -> None:
    model, tools = Model(), Lookups()
    app = react(model, tools, budget=Budget(max_tool_calls=1, final_answer=False))
    chunks = [c async for c in app.astream(inp("go"), thread(), response_granularity="full")]
    assert len(model.calls) == 1
    assert tools.ran == ["1.0"]
    spent = [c.data for c in chunks if c.data and c.data.get("status") == "budget_spent"]
    assert spent == [{"status": "budget_spent", "limit": "max_tool_calls"}]


async def test_token_budgets_cap_each_call_and_end_the_run_once_spent() -> None:
    model, tools = Model(), Lookups()
    result = await full(react(model, tools), {"max_output_tokens": 12})
    # 5 output tokens a call: 12 left, then 7, then 2; after the third, nothing is left
    assert [c["max_tokens"] for c in model.calls] == [12, 7, 2]
    assert result["budget"]["ended_by"] == "max_output_tokens"
    assert result["budget"]["spent"]["output_tokens"] == 15


async def test_a_cost_budget_counts_the_priced_calls() -> None:
    model, tools = Model(cost=0.02), Lookups()
    result = await full(react(model, tools), {"max_cost": 0.05})
    assert len(model.calls) == 3  # 0.02, 0.04, 0.06: the third crossed it, no fourth
    assert result["budget"]["ended_by"] == "max_cost"
    assert result["budget"]["spent"]["cost"] == pytest.approx(0.06)


async def test_the_smallest_limit_of_compile_agent_and_config_holds() -> None:
    model, tools = Model(), Lookups()
    agent = Agent(FunctionModel(model), tool_node="tools", budget=Budget(max_model_calls=4))
    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([tools.lookup]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    app = graph.compile(budget={"max_model_calls": 6})
    await app.ainvoke(inp("go"), {"max_model_calls": 5})
    assert [c["tools"] for c in model.calls] == [1, 1, 1, 0]  # the Agent's 4
    model.calls.clear()
    await app.ainvoke(inp("go"), {"max_model_calls": 2})
    assert [c["tools"] for c in model.calls] == [1, 0]  # the config's 2


# -- across subgraphs and processes --------------------------------------------------------


async def test_a_subgraph_spends_from_its_parents_budget() -> None:
    model, tools = Model(), Lookups()
    child = react(model, tools)
    app = chain(("research", child), ("again", child), state=AgentState).compile()
    result = await full(app, {"max_model_calls": 3})
    # the parent's three calls: the first subgraph run makes them all (the last without
    # tools); the second finds none left, and the run ends there
    assert [c["tools"] for c in model.calls] == [1, 1, 0]
    assert result["budget"]["spent"]["model_calls"] == 3


async def test_a_run_resumed_in_a_new_app_goes_on_from_what_it_had_spent(tmp_path: Path) -> None:
    db = tmp_path / "budget.db"
    asked: list[str] = []

    def approve(q: str) -> str:
        """Ask a person first."""
        asked.append(q)
        return f"{q}: {interrupt('ok?')}"

    def build(model: Model) -> Any:
        return ReactAgent(FunctionModel(model), [approve]).compile(
            checkpointer=SqliteCheckpointer(db), budget=Budget(max_model_calls=2)
        )

    class Asking(Model):
        def __call__(self, messages: list[Message], info: Any) -> Any:
            answer = super().__call__(messages, info)
            for block in answer.tool_call_blocks():
                block.name = "approve"
            return answer

    first = Asking()
    config = thread()
    paused = await build(first).ainvoke(inp("go"), config)
    assert paused["interrupt"]["value"] == "ok?"
    assert len(first.calls) == 1

    second = Asking()  # a new app, as another process would build it
    done = await full(build(second), config, {"resume": "yes"})
    assert [c["tools"] for c in second.calls] == [0]  # one call was left: the final answer
    assert done["budget"] == {
        "ended_by": "max_model_calls",
        "scope": "run",
        "limits": {"max_model_calls": 2},
        "spent": {
            "model_calls": 2,
            "tool_calls": 0,
            "input_tokens": 20,
            "output_tokens": 10,
            "cost": 0.0,
        },
    }


async def test_a_new_turn_starts_with_nothing_spent() -> None:
    model, tools = Model(), Lookups()
    app = react(model, tools, checkpointer=InMemoryCheckpointer())
    config = {**thread(), "max_model_calls": 2}
    await app.ainvoke(inp("go"), config)
    model.calls.clear()
    result = await full(app, config, inp("again"))
    assert [c["tools"] for c in model.calls] == [1, 0]
    assert result["budget"]["spent"]["model_calls"] == 2


async def test_parallel_agents_cannot_all_take_the_last_model_calls() -> None:
    """Four Agents in one step against max_model_calls=2: two calls are made, not four (a call
    is counted when it is let through, before it answers); the run ends there, and the step
    that could not finish is not stored."""
    model = Model()
    graph = StateGraph(AgentState)
    for name in ("a", "b", "c", "d"):
        graph.add_node(name, Agent(FunctionModel(model)))
        graph.add_edge(START, name)
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    config = {**thread(), "max_model_calls": 2}
    result = await full(app, config)
    assert len(model.calls) == 2
    assert result["budget"]["ended_by"] == "max_model_calls"
    assert roles(result["state"].context) == ["user"]


async def test_a_subgraphs_own_budget_limits_it_further() -> None:
    model, tools = Model(), Lookups()
    child = react(model, tools, budget=Budget(max_model_calls=2))
    graph = StateGraph(AgentState)
    graph.add_node("research", child)
    graph.add_edge(START, "research")
    graph.add_edge("research", END)
    await graph.compile().ainvoke(inp("go"), {"max_model_calls": 5})
    assert [c["tools"] for c in model.calls] == [1, 0]


async def test_calls_replayed_from_the_ledger_are_not_counted_again() -> None:
    """Two calls against max_tool_calls=2, the second pausing for a person: on resume the
    first is replayed (not counted again) and the second runs; neither is refused."""
    ran: list[str] = []

    def lookup(q: str) -> str:
        """Look something up."""
        ran.append(q)
        return f"found {q}"

    def approve(q: str) -> str:
        """Ask a person."""
        ran.append(f"approve {q}")
        return f"{q}: {interrupt('ok?')}"

    def model(messages: list[Message], info: Any) -> Any:
        if messages[-1].role == "user":
            return [tool_call("lookup", "c1", q="a"), tool_call("approve", "c2", q="b")]
        return "done"

    app = ReactAgent(FunctionModel(model), [lookup, approve]).compile(
        checkpointer=InMemoryCheckpointer(), budget=Budget(max_tool_calls=2)
    )
    config = thread()
    await app.ainvoke(inp("go"), config)
    result = await full(app, config, {"resume": "yes"})
    assert ran == ["a", "approve b", "approve b"]  # c1 ran once; c2 again after the pause
    assert not [m for m in result["state"].context if "budget" in m.text()]  # none refused
    assert result["budget"]["spent"]["tool_calls"] == 2  # (so the last call had no tools)
    assert result["state"].execution_meta.usage.tool_calls == 2  # the thread's count too
