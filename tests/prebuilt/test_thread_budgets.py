"""Thread budgets: limits on what all the runs of one thread spend together, set on
`compile(thread_budget=...)` or per call in `config["thread_budget"]`. What the thread has
spent (its running total, saved with it) is taken off at each run's start; the run's
limits are the tighter of that remainder and its own. A limit of the thread's that ends a run
is reported as ``thread.<limit>``; a thread that is over its budget takes no new run with
`on_exceeded="error"` (nothing of it stored) and ends one at once with "finish". Totals hold
across processes (SQLite, PostgreSQL), subgraphs, parallel Agents and a resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import BudgetExceededError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import AgentState, Message, TokenUsages
from tenxgraph.core.state.budget import Budget
from tenxgraph.core.state.spending import ENDED_KEY
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import (
    BaseCheckpointer,
    InMemoryCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import START
from tests._helpers import Lookups, react, roles, thread, tool_call
from tests.core.graph._support import chain, inp
from tests.storage.conftest import Backend, sql_backend

__all__ = ["sql_backend"]  # the fixture: SQLite and PostgreSQL


class Model:
    """Asks for `fan` lookups when it is offered tools and the user spoke last (`eager`:
    whenever it is offered tools); answers "done" otherwise. Each answer used 10 input and
    5 output tokens and costs `cost`. Records how many tools each call was offered."""

    def __init__(self, fan: int = 2, cost: float = 0.0, eager: bool = False) -> None:
        self.fan = fan
        self.cost = cost
        self.eager = eager
        self.calls: list[int] = []  # the number of tools each call was offered
        self.notes: list[str | None] = []

    def __call__(self, messages: list[Message], info: Any) -> Message:
        self.calls.append(len(info.tools))
        last = messages[-1]
        self.notes.append(last.text() if last.role == "system" else None)
        n = len(self.calls)
        if info.tools and (self.eager or last.role == "user"):
            content = [tool_call("lookup", f"c{n}_{i}", q=f"{n}.{i}") for i in range(self.fan)]
            answer = Message(role="assistant", content=content)
        else:
            answer = Message.text_message("done", "assistant")
        answer.usages = TokenUsages(prompt_tokens=10, completion_tokens=5, total_tokens=15)
        answer.metadata["cost"] = self.cost
        return answer


async def turn(app: Any, config: dict[str, Any], text: str = "go") -> dict[str, Any]:
    result: dict[str, Any] = await app.ainvoke(inp(text), config, response_granularity="full")
    return result


# -- several turns -------------------------------------------------------------------------


async def test_the_third_turn_meets_the_threads_tool_call_limit() -> None:
    """Each turn wants 2 lookups; the thread may run 5: the third turn runs one, the other
    call is answered with an error result naming the thread's budget, and the model is asked
    for a final answer without tools. A fourth turn is offered no tools at all."""
    model, tools = Model(), Lookups()
    app = react(
        model, tools, checkpointer=InMemoryCheckpointer(), thread_budget={"max_tool_calls": 5}
    )
    config = thread()
    for text in ("one", "two"):
        result = await turn(app, config, text)
        assert "budget" not in result
    assert tools.ran == ["1.0", "1.1", "3.0", "3.1"]
    third = await turn(app, config, "three")
    assert tools.ran[4:] == ["5.0"]  # one was left
    refused = [m for m in third["state"].context if m.role == "tool" and "budget" in m.text()]
    assert len(refused) == 1
    assert (
        "this thread's tool-call budget (max_tool_calls=5 over all its runs)" in refused[0].text()
    )
    assert model.calls[-1] == 0
    assert "conversation's max_tool_calls" in (model.notes[-1] or "")
    assert third["budget"]["ended_by"] == "thread.max_tool_calls"
    assert third["budget"]["scope"] == "thread"
    assert third["budget"]["limits"] == {}  # the run had no limits of its own
    assert third["budget"]["thread"]["limits"] == {"max_tool_calls": 5}
    assert third["budget"]["thread"]["spent"]["tool_calls"] == 5
    assert third["budget"]["thread"]["spent"]["model_calls"] == 6
    stored = third["state"].execution_meta
    assert stored.usage.tool_calls == 5
    assert stored.internal_data[ENDED_KEY] == "thread.max_tool_calls"

    before = len(model.calls)
    fourth = await turn(app, config, "four")
    assert model.calls[before:] == [0]  # one call, without tools: an answer
    assert fourth["state"].context[-1].text() == "done"
    assert fourth["budget"]["ended_by"] == "thread.max_tool_calls"
    assert tools.ran[5:] == []


async def test_a_thread_with_no_model_call_left_ends_its_next_run_at_once() -> None:
    """max_model_calls=5, two calls a turn: the third turn gets the last call (without
    tools); the fourth makes none, stores its input and completes, saying why."""
    model, tools = Model(fan=1), Lookups()
    app = react(
        model, tools, checkpointer=InMemoryCheckpointer(), thread_budget=Budget(max_model_calls=5)
    )
    config = thread()
    await turn(app, config, "one")
    await turn(app, config, "two")
    third = await turn(app, config, "three")
    assert model.calls == [1, 1, 1, 1, 0]
    assert third["budget"]["ended_by"] == "thread.max_model_calls"

    chunks = [c async for c in app.astream(inp("four"), config, response_granularity="full")]
    assert len(model.calls) == 5  # no call at all
    spent = [c.data for c in chunks if c.data and c.data.get("status") == "budget_spent"]
    assert spent == [{"status": "budget_spent", "limit": "thread.max_model_calls"}]
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.context[-1].text() == "four"  # its input is kept: the conversation goes on
    assert stored.execution_meta.status == "completed"
    assert stored.execution_meta.internal_data[ENDED_KEY] == "thread.max_model_calls"
    result = await turn(app, config, "five")
    assert result["budget"]["ended_by"] == "thread.max_model_calls"
    assert [m.text() for m in result["messages"]] == ["five"]


async def test_a_cost_limit_counts_the_threads_priced_calls() -> None:
    model, tools = Model(fan=1, cost=0.25), Lookups()
    app = react(model, tools, checkpointer=InMemoryCheckpointer(), thread_budget={"max_cost": 1.25})
    config = thread()
    await turn(app, config, "one")  # 0.50
    await turn(app, config, "two")  # 1.00
    third = await turn(app, config, "three")  # 1.25 after its first call: no second
    assert len(model.calls) == 5
    assert third["budget"]["ended_by"] == "thread.max_cost"
    assert third["budget"]["thread"]["spent"]["cost"] == 1.25
    assert third["budget"]["spent"]["cost"] == 0.25  # the run's part


# -- error mode ----------------------------------------------------------------------------


async def test_with_on_exceeded_error_a_spent_thread_takes_no_run_and_stores_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.db"
    budget = Budget(max_model_calls=2, on_exceeded="error")
    model, tools = Model(fan=1), Lookups()
    app = react(model, tools, checkpointer=SqliteCheckpointer(db), thread_budget=budget)
    config = thread()
    await turn(app, config, "one")  # two calls: the thread's two
    stored = await app.aget_state(config)
    assert stored is not None
    version = await app.checkpointer.aversion(config["thread_id"])

    later = Model(fan=1)
    again = react(later, Lookups(), checkpointer=SqliteCheckpointer(db), thread_budget=budget)
    with pytest.raises(BudgetExceededError, match="thread's budget max_model_calls=2") as caught:
        await again.ainvoke(inp("two"), config)
    assert caught.value.error_code == "BUDGET_002"
    assert caught.value.context["scope"] == "thread"
    assert caught.value.context["spent"]["model_calls"] == 2
    assert caught.value.context["max"] == 2
    with pytest.raises(BudgetExceededError):  # nor is the thread's last run continued
        await again.ainvoke(None, config)
    assert later.calls == []
    assert await again.checkpointer.aversion(config["thread_id"]) == version
    after = await again.aget_state(config)
    assert after is not None
    assert [m.text() for m in after.context] == [m.text() for m in stored.context]
    assert "two" not in [m.text() for m in after.context]
    assert after.execution_meta.status == "completed"


async def test_with_on_exceeded_error_a_run_stops_before_the_call_that_would_cross() -> None:
    model, tools = Model(fan=3), Lookups()
    budget = Budget(max_tool_calls=4, on_exceeded="error")
    app = react(model, tools, checkpointer=InMemoryCheckpointer(), thread_budget=budget)
    config = thread()
    await turn(app, config, "one")  # 3 tools
    with pytest.raises(BudgetExceededError, match="thread's budget max_tool_calls=4"):
        await app.ainvoke(inp("two"), config)
    assert len(tools.ran) == 3  # none of the second turn's three ran
    stored = await app.aget_state(config)
    assert stored is not None
    assert roles(stored.context)[-2:] == ["user", "assistant"]  # its tool step left nothing


# -- config, run budgets ---------------------------------------------------------------------


async def test_config_sets_a_thread_budget_and_tightens_the_graphs() -> None:
    model, tools = Model(fan=1), Lookups()
    app = react(
        model, tools, checkpointer=InMemoryCheckpointer(), thread_budget={"max_model_calls": 10}
    )
    config = {**thread(), "thread_budget": {"max_model_calls": 3}}
    await turn(app, config, "one")
    second = await turn(app, config, "two")
    assert model.calls == [1, 1, 0]  # the config's 3 held, not the graph's 10
    assert second["budget"]["thread"]["limits"] == {"max_model_calls": 3}
    # a larger one in config does not lift the graph's: the tighter holds
    other = {**thread(), "thread_budget": Budget(max_model_calls=50)}
    model.calls.clear()
    for text in ("a", "b", "c", "d", "e", "f"):
        await turn(app, other, text)
    assert len(model.calls) == 10
    # without a graph's: config alone; its on_exceeded too
    plain = react(Model(fan=1), tools, checkpointer=InMemoryCheckpointer())
    strict = {**thread(), "thread_budget": {"max_model_calls": 2, "on_exceeded": "error"}}
    await turn(plain, strict, "one")
    with pytest.raises(BudgetExceededError):
        await plain.ainvoke(inp("two"), strict)
    with pytest.raises(ValueError, match=r"thread_budget.*unknown budget key"):
        await plain.ainvoke(inp("x"), {"thread_budget": {"max_calls": 1}})


async def test_the_tighter_of_the_run_budget_and_the_threads_remainder_holds() -> None:
    model, tools = Model(fan=1, eager=True), Lookups()
    app = react(
        model, tools, checkpointer=InMemoryCheckpointer(), thread_budget={"max_model_calls": 5}
    )
    config = thread()
    # the run's 1 is tighter than the thread's 5: the run's limit ends it
    first = await turn(app, {**config, "max_model_calls": 1}, "one")
    assert model.calls == [0]
    assert first["budget"]["ended_by"] == "max_model_calls"
    assert first["budget"]["scope"] == "run"
    assert first["budget"]["limits"] == {"max_model_calls": 1}
    # 4 left to the thread; a run budget of 3 is tighter: the run's again
    second = await turn(app, {**config, "budget": Budget(max_model_calls=3)}, "two")
    assert model.calls[1:] == [1, 1, 0]
    assert second["budget"]["scope"] == "run"
    # 1 left to the thread; the run's 3 is looser: the thread's ends it
    third = await turn(app, {**config, "max_model_calls": 3}, "three")
    assert model.calls[4:] == [0]
    assert third["budget"]["ended_by"] == "thread.max_model_calls"
    assert third["budget"]["limits"] == {"max_model_calls": 3}
    assert third["budget"]["spent"]["model_calls"] == 1  # the run's
    assert third["budget"]["thread"]["spent"]["model_calls"] == 5  # the thread's


# -- processes, old threads, resume ----------------------------------------------------------


async def test_a_new_app_on_the_same_storage_sees_what_the_thread_spent(
    sql_backend: Backend,
) -> None:
    def app_on(store: BaseCheckpointer, model: Model) -> Any:
        return react(model, Lookups(), checkpointer=store, thread_budget={"max_tool_calls": 3})

    config = thread()
    first = Model(fan=2)
    await turn(app_on(sql_backend.store, first), config, "one")  # two tools
    second = Model(fan=2)
    result = await turn(app_on(sql_backend.open(), second), config, "two")  # a new process's
    assert result["budget"]["ended_by"] == "thread.max_tool_calls"
    assert result["budget"]["thread"]["spent"]["tool_calls"] == 3
    assert second.calls == [1, 0]  # one of its two ran, then the answer without tools
    third = Model(fan=2)
    await turn(app_on(sql_backend.open(), third), config, "three")
    assert third.calls == [0]
    stored = await app_on(sql_backend.open(), Model()).aget_state(config)
    assert stored is not None
    assert stored.execution_meta.usage.tool_calls == 3


async def test_a_thread_stored_before_tool_calls_were_counted_reads_them_as_none(
    sql_backend: Backend,
) -> None:
    """A header whose usage has no `tool_calls` (as written before they were counted):
    the thread reads, its tool calls count from 0, its model calls as stored."""
    config = thread()
    tid = config["thread_id"]
    await turn(react(Model(fan=2), Lookups(), checkpointer=sql_backend.store), config, "one")
    rows = await sql_backend.sql(
        "SELECT version, header FROM tx_checkpoints "
        "WHERE thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?) "
        "ORDER BY version DESC",
        tid,
    )
    version, header = rows[0]
    parsed = json.loads(header)
    assert parsed["execution_meta"]["usage"].pop("tool_calls") == 2
    await sql_backend.sql(
        "UPDATE tx_checkpoints SET header = ? "
        "WHERE thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?) "
        "AND version = ?",
        json.dumps(parsed),
        tid,
        version,
    )
    model, tools = Model(fan=2), Lookups()
    app = react(
        model,
        tools,
        checkpointer=sql_backend.open(),
        thread_budget={"max_tool_calls": 3, "max_model_calls": 4},
    )
    old = await app.aget_state(config)
    assert old is not None
    assert old.execution_meta.usage.tool_calls == 0
    result = await turn(app, config, "two")
    assert tools.ran == ["1.0", "1.1"]  # 3 left by what was stored: both ran
    assert model.calls == [1, 0]  # the 2 model calls stored count: the last without tools
    assert result["budget"]["ended_by"] == "thread.max_model_calls"
    assert result["budget"]["thread"]["spent"]["tool_calls"] == 2


async def test_a_resumed_run_is_not_charged_twice_for_what_it_spent_before_its_pause(
    tmp_path: Path,
) -> None:
    """max_model_calls=2 for the thread: one call, then a pause; resumed in a new app, the
    one call is in the thread's total and in the run's spending, counted once: one call is
    left, the final answer."""
    db = tmp_path / "pause.db"

    def approve(q: str) -> str:
        """Ask a person first."""
        return f"{q}: {interrupt('ok?')}"

    class Asking(Model):
        def __call__(self, messages: list[Message], info: Any) -> Message:
            answer = super().__call__(messages, info)
            for block in answer.tool_call_blocks():
                block.name = "approve"
            return answer

    def build(model: Model) -> Any:
        return ReactAgent(FunctionModel(model), [approve]).compile(
            checkpointer=SqliteCheckpointer(db), thread_budget=Budget(max_model_calls=2)
        )

    config = thread()
    first = Asking(fan=1)
    paused = await build(first).ainvoke(inp("go"), config)
    assert paused["interrupt"]["value"] == "ok?"
    second = Asking(fan=1)
    done = await build(second).ainvoke({"resume": "yes"}, config, response_granularity="full")
    assert second.calls == [0]
    assert done["budget"]["ended_by"] == "thread.max_model_calls"
    assert done["budget"]["thread"]["spent"]["model_calls"] == 2
    assert done["state"].execution_meta.usage.model_calls == 2
    assert done["state"].execution_meta.usage.tool_calls == 1


# -- subgraphs, parallel Agents --------------------------------------------------------------


async def test_a_subgraph_spends_from_its_parents_thread_budget() -> None:
    model, tools = Model(fan=1), Lookups()
    child = react(model, tools)
    app = chain(("research", child), state=AgentState).compile(
        checkpointer=InMemoryCheckpointer(), thread_budget={"max_model_calls": 3}
    )
    config = thread()
    first = await turn(app, config, "one")
    assert model.calls == [1, 1]
    usage = first["state"].execution_meta.usage  # the child's calls are the parent thread's
    assert (usage.model_calls, usage.tool_calls) == (2, 1)
    second = await turn(app, config, "two")
    assert model.calls[2:] == [0]  # the one left: the child's final answer
    assert second["budget"]["ended_by"] == "thread.max_model_calls"


async def test_parallel_agents_cannot_all_take_the_threads_last_calls() -> None:
    model = Model()
    graph = StateGraph(AgentState)
    for name in ("a", "b", "c", "d"):
        graph.add_node(name, Agent(FunctionModel(model)))
        graph.add_edge(START, name)
    app = graph.compile(checkpointer=InMemoryCheckpointer(), thread_budget={"max_model_calls": 6})
    config = thread()
    await turn(app, config, "one")  # four calls
    second = await turn(app, config, "two")
    assert len(model.calls) == 6  # two of the four, not four
    assert second["budget"]["ended_by"] == "thread.max_model_calls"


async def test_a_subgraphs_own_thread_budget_is_not_used() -> None:
    model, tools = Model(fan=1), Lookups()
    child = react(model, tools, thread_budget={"max_model_calls": 0})
    app = chain(("research", child), state=AgentState).compile(checkpointer=InMemoryCheckpointer())
    result = await turn(app, thread(), "one")
    assert model.calls == [1, 1]
    assert "budget" not in result


# -- whose limit, whose rules ----------------------------------------------------------------


async def test_a_run_limit_as_tight_as_what_the_thread_has_left_is_named_the_threads() -> None:
    model = Model(fan=1, eager=True)
    app = react(model, Lookups(), thread_budget={"max_model_calls": 3})
    result = await turn(app, {**thread(), "max_model_calls": 3}, "one")
    assert model.calls == [1, 1, 0]
    assert result["budget"]["ended_by"] == "thread.max_model_calls"


async def test_each_limit_ends_the_run_as_its_own_budget_says() -> None:
    """The thread's limit with on_exceeded="error", the run's with "finish": the run's
    tool-call limit ends the first turn with an answer; the thread's model-call limit fails
    the second, with no last call without tools (that is "finish"'s)."""
    model, tools = Model(fan=1, eager=True), Lookups()
    budget = Budget(max_model_calls=3, on_exceeded="error")
    app = react(model, tools, checkpointer=InMemoryCheckpointer(), thread_budget=budget)
    config = {**thread(), "max_tool_calls": 1}
    first = await turn(app, config, "one")
    assert model.calls == [1, 0]
    assert first["budget"]["ended_by"] == "max_tool_calls"
    with pytest.raises(BudgetExceededError) as caught:
        await app.ainvoke(inp("two"), config)
    assert caught.value.error_code == "BUDGET_002"
    assert model.calls[2:] == [1]  # the thread's last call went with tools, as "error" does


async def test_a_thread_budget_without_a_final_answer_ends_where_it_is_spent() -> None:
    model, tools = Model(fan=2), Lookups()
    budget = Budget(max_tool_calls=2, final_answer=False)
    result = await turn(react(model, tools, thread_budget=budget), thread(), "one")
    assert model.calls == [1]  # no last call for an answer
    assert tools.ran == ["1.0", "1.1"]
    assert result["budget"]["ended_by"] == "thread.max_tool_calls"


async def test_without_a_checkpointer_a_thread_budget_holds_per_run() -> None:
    model, tools = Model(fan=1), Lookups()
    app = react(model, tools, checkpointer=False, thread_budget={"max_model_calls": 3})
    config = thread()
    for text in ("one", "two"):
        assert "budget" not in await turn(app, config, text)
    assert model.calls == [1, 1, 1, 1]


# -- error mode: what is not refused, what is not stored ---------------------------------------


async def test_a_spent_thread_still_answers_a_turn_sent_again_from_what_it_stored() -> None:
    model, tools = Model(fan=1), Lookups()
    budget = Budget(max_model_calls=2, on_exceeded="error")
    app = react(model, tools, checkpointer=InMemoryCheckpointer(), thread_budget=budget)
    config = thread()
    sent = inp("one")
    first = await app.ainvoke(sent, config)
    again = await app.ainvoke(sent, config)  # a retry after a lost answer: no new run
    assert [m.text() for m in again["messages"]] == [m.text() for m in first["messages"]]
    assert len(model.calls) == 2
    with pytest.raises(BudgetExceededError):
        await app.ainvoke(inp("two"), config)


async def test_a_paused_run_of_a_spent_thread_is_not_resumed_and_keeps_its_pause() -> None:
    def approve(q: str) -> str:
        """Ask a person first."""
        return f"{q}: {interrupt('ok?')}"

    def model(messages: list[Message], info: Any) -> Any:
        return [tool_call("approve", "c1", q="refund")]

    app = ReactAgent(FunctionModel(model), [approve]).compile(
        checkpointer=InMemoryCheckpointer(),
        thread_budget=Budget(max_model_calls=1, on_exceeded="error"),
    )
    config = thread()
    await app.ainvoke(inp("go"), config)
    paused = await app.aget_state(config)
    assert paused is not None
    assert paused.execution_meta.is_interrupted()
    with pytest.raises(BudgetExceededError, match="nothing of it was stored"):
        await app.ainvoke({"resume": "yes"}, config)
    after = await app.aget_state(config)
    assert after is not None
    assert after.execution_meta.is_interrupted()
    assert "answers" not in after.execution_meta.internal_data  # the answer was not kept
    assert after.model_dump() == paused.model_dump()
