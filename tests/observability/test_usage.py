"""What model calls cost: a run's `token_usage` and a thread's running `execution_meta.usage`.

Every call is counted once, priced from litellm's table (never guessed: an unknown price makes
the total cost None), and the thread's total is kept with its checkpoints.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

import asyncio
import copy
import pickle
import uuid
from pathlib import Path
from typing import Any

import litellm
import pytest
import respx

from tenxgraph.core.exceptions import ModelUnavailableError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.llm.retry import RetryConfig
from tenxgraph.core.llm.summary import SummaryContextManager
from tenxgraph.core.state import AgentState, ExecutionState, Message, TokenUsages
from tenxgraph.core.state.usage import NO_USAGE, Usage
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.interrupt import interrupt
from tests.observability._usage_models import Priced, add, tool_rounds
from tests.providers.test_agent_end_to_end import QUESTION, WeatherTools, build_app
from tests.providers.test_transcripts import KEY_ENVS, Provider, providers
from tests.storage.conftest import Backend

RETRY = RetryConfig(max_retries=2, initial_delay=0, jitter=False)


def said(text: str) -> dict[str, Any]:
    return {"messages": [Message.text_message(text)]}


def thread() -> dict[str, Any]:
    return {"thread_id": uuid.uuid4().hex}


@pytest.fixture(autouse=True)
def _no_keys_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_ENVS:
        monkeypatch.delenv(name, raising=False)


# -- the recorded providers: streamed and not, the same usage and litellm's price ------------


def price(model: str, prompt: int, completion: int) -> float:
    into, out = litellm.cost_per_token(
        model=model, prompt_tokens=prompt, completion_tokens=completion
    )
    return float(into + out)


async def _tool_loop(provider: Provider, streamed: bool) -> dict[str, Any]:
    """The weather tool loop on `provider`'s transcripts; its result's `token_usage`."""
    calls, text = ("stream_tools", "stream_text") if streamed else ("parallel_tools", "plain")
    app = build_app(provider, WeatherTools())
    config = thread()
    with respx.mock(using="httpx") as mock:
        provider.route(mock).mock(
            side_effect=[provider.case(calls).http_response(), provider.case(text).http_response()]
        )
        if not streamed:
            result = await app.ainvoke(said(QUESTION), config)
            usage: dict[str, Any] = result["token_usage"]
        else:
            chunks = [c async for c in app.astream(said(QUESTION), config, "full")]
            assert any(c.message is not None and c.message.delta for c in chunks)
            ended = [c.data for c in chunks if c.data and c.data.get("status") == "graph_invoked"]
            usage = ended[-1]["token_usage"]
    stored = await app.aget_state(config)
    assert stored is not None
    assert stored.execution_meta.usage.as_token_usage() == usage  # the thread's total: one run
    return usage


def _recorded(provider: Provider, *cases: str) -> tuple[int, int, int]:
    """(prompt, completion, reasoning) tokens the transcripts' `expect` says."""
    found = [provider.case(c).expect["usage"] for c in cases]
    return (
        sum(u["prompt_tokens"] for u in found),
        sum(u["completion_tokens"] for u in found),
        sum(u.get("reasoning_tokens", 0) for u in found),
    )


@pytest.mark.parametrize("provider", providers(), ids=lambda p: p.name)
async def test_streamed_and_not_streamed_runs_cost_the_same(provider: Provider) -> None:
    plain = await _tool_loop(provider, streamed=False)
    streamed = await _tool_loop(provider, streamed=True)
    assert streamed == plain
    prompt, completion, reasoning = _recorded(provider, "parallel_tools", "plain")
    assert (prompt, completion, reasoning) == _recorded(provider, "stream_tools", "stream_text")
    assert plain["total_input_tokens"] == prompt
    assert plain["total_output_tokens"] == completion
    assert plain["total_reasoning_tokens"] == reasoning
    assert plain["total_tokens"] == prompt + completion
    assert plain["model_calls"] == 2
    if provider.key_env is None:  # a local server: litellm has no price for it
        assert plain["cost"] is None
        assert plain["unpriced_calls"] == 2
    else:
        per_call = [
            price(provider.model, u["prompt_tokens"], u["completion_tokens"])
            for u in (provider.case(c).expect["usage"] for c in ("parallel_tools", "plain"))
        ]
        assert plain["cost"] == pytest.approx(sum(per_call), rel=1e-9)
        assert plain["cost"] > 0
        assert plain["unpriced_calls"] == 0


def _local() -> Provider:
    return next(p for p in providers() if p.key_env is None)


@pytest.mark.parametrize("streamed", [False, True], ids=["ainvoke", "astream"])
async def test_one_call_to_a_local_server_has_no_price(streamed: bool) -> None:
    provider = _local()
    with pytest.raises(Exception, match="isn't mapped"):  # litellm knows no price for it
        price(provider.model, 1, 1)
    graph = StateGraph()
    graph.add_node("agent", Agent(provider.model, retry_config=False, **provider.call_settings()))
    graph.add_edge(START, "agent")
    app = graph.compile()
    case = provider.case("stream_text" if streamed else "plain")
    with respx.mock(using="httpx") as mock:
        provider.route(mock).mock(return_value=case.http_response())
        if streamed:
            chunks = [c async for c in app.astream(said("Hello"), thread(), "full")]
            usage = next(
                c.data["token_usage"]
                for c in chunks
                if c.data and c.data.get("status") == "graph_invoked"
            )
        else:
            usage = (await app.ainvoke(said("Hello"), thread()))["token_usage"]
    assert usage["model_calls"] == 1
    assert usage["unpriced_calls"] == 1
    assert usage["cost"] is None
    assert usage["total_input_tokens"] == case.expect["usage"]["prompt_tokens"]


# -- a tool loop: every call of a run, every run of a thread --------------------------------


def react(model: Priced, checkpointer: Any, **kwargs: Any) -> Any:
    return ReactAgent(model, [add], retry_config=RETRY, **kwargs).compile(checkpointer=checkpointer)


def as_usage(usage: dict[str, Any]) -> tuple[int, int, float | None, int]:
    return (
        usage["total_input_tokens"],
        usage["total_output_tokens"],
        usage["cost"],
        usage["model_calls"],
    )


async def test_a_run_counts_every_model_call_of_its_tool_loop() -> None:
    model = Priced(tool_rounds(2))
    result = await react(model, InMemoryCheckpointer()).ainvoke(said("sum"), thread())
    assert model.calls == 3
    into, out, cost = model.expected()
    usage = result["token_usage"]
    assert as_usage(usage) == (into, out, pytest.approx(cost), 3)
    assert usage["unpriced_calls"] == 0


async def test_the_thread_total_adds_up_its_runs(backend: Backend) -> None:
    model = Priced(tool_rounds(2))
    app = react(model, backend.store)
    config = thread()
    first = (await app.ainvoke(said("one"), config))["token_usage"]
    second = (await app.ainvoke(said("two"), config))["token_usage"]
    assert first["model_calls"] == second["model_calls"] == 3
    assert first != second  # different calls, different numbers: nothing counted twice
    state = await app.aget_state(config)
    assert state is not None
    total = state.execution_meta.usage
    into, out, cost = model.expected()
    assert (total.input_tokens, total.output_tokens, total.model_calls) == (into, out, 6)
    assert total.input_tokens == first["total_input_tokens"] + second["total_input_tokens"]
    assert total.cost == pytest.approx(first["cost"] + second["cost"])
    assert total.cost == pytest.approx(cost)
    if not backend.is_sql:
        return
    # a new app on the same storage (as a new process would) reads the same total
    again = await react(Priced(tool_rounds(2)), backend.open()).aget_state(config)
    assert again is not None
    assert again.execution_meta.usage == total


async def test_the_thread_total_survives_a_new_process_on_the_same_sqlite_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    config = thread()
    store = SqliteCheckpointer(path)
    try:
        first = await react(Priced(tool_rounds(1)), store).ainvoke(said("one"), config)
    finally:
        await store.aclose()
    store = SqliteCheckpointer(path)  # a new process: nothing kept in memory
    try:
        model = Priced(tool_rounds(1))
        second = await react(model, store).ainvoke(said("two"), config)
        state = await react(model, store).aget_state(config)
    finally:
        await store.aclose()
    assert state is not None
    total = state.execution_meta.usage
    runs = [first["token_usage"], second["token_usage"]]
    assert total.model_calls == 4
    assert total.input_tokens == sum(u["total_input_tokens"] for u in runs)
    assert total.cost == pytest.approx(sum(u["cost"] for u in runs))


async def test_a_paused_and_resumed_run_keeps_counting(backend: Backend) -> None:
    model = Priced(tool_rounds(1))
    app = react(model, backend.store, requires_approval=True)
    config = thread()
    paused = await app.ainvoke(said("sum"), config)
    assert paused["interrupted"]["node"] == "tools"
    assert paused["token_usage"]["model_calls"] == 1  # the call that asked for the tools
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.usage.model_calls == 1  # kept with the paused thread
    pending = state.context[-1].tool_call_blocks()
    resumed = await app.ainvoke({"resume": {c.id: "approve" for c in pending}}, config)
    assert "interrupted" not in resumed
    assert resumed["token_usage"]["model_calls"] == 1  # the answer after the tools
    state = await app.aget_state(config)
    assert state is not None
    into, out, cost = model.expected()
    total = state.execution_meta.usage
    assert (total.input_tokens, total.output_tokens, total.model_calls) == (into, out, 2)
    assert total.cost == pytest.approx(cost)


async def test_a_turn_sent_again_adds_nothing(backend: Backend) -> None:
    model = Priced(tool_rounds(1))
    app = react(model, backend.store)
    config = thread()
    turn = said("sum")
    first = await app.ainvoke(turn, config)
    before = await app.aget_state(config)
    assert before is not None
    again = await app.ainvoke(turn, config)  # the same message (id) again: its answer again
    assert model.calls == 2  # the model was not asked again
    assert [m.message_id for m in again["messages"]] == [m.message_id for m in first["messages"]]
    assert again["token_usage"]["model_calls"] == 0
    assert again["token_usage"]["cost"] == 0.0
    after = await app.aget_state(config)
    assert after is not None
    assert after.execution_meta.usage == before.execution_meta.usage
    assert after.execution_meta.usage.model_calls == 2


async def test_a_streamed_run_counts_as_the_same_run_not_streamed() -> None:
    plain = await react(Priced(tool_rounds(2)), InMemoryCheckpointer()).ainvoke(
        said("sum"), thread()
    )
    app = react(Priced(tool_rounds(2)), InMemoryCheckpointer())
    chunks = [c async for c in app.astream(said("sum"), thread(), "full")]
    assert any(c.message is not None and c.message.delta for c in chunks)
    ended = [c.data for c in chunks if c.data and c.data.get("status") == "graph_invoked"]
    assert ended[-1]["token_usage"] == plain["token_usage"]


# -- retries, fallbacks, the summary model --------------------------------------------------


async def test_a_failed_attempt_then_an_answer_is_one_priced_call() -> None:
    down = ModelUnavailableError("down", context={"status_code": 503})
    model = Priced(tool_rounds(0), failures={0: down})
    app = react(model, InMemoryCheckpointer())
    usage = (await app.ainvoke(said("hi"), thread()))["token_usage"]
    assert model.calls == 2  # one failed attempt, one answer
    assert usage["model_calls"] == 1
    assert usage["unpriced_calls"] == 0
    into, out, cost = model.expected()
    assert (usage["total_input_tokens"], usage["total_output_tokens"]) == (into, out)
    assert usage["cost"] == pytest.approx(cost)


async def test_a_failed_stream_attempt_then_an_answer_is_one_priced_call() -> None:
    down = ModelUnavailableError("down", context={"status_code": 503})
    model = Priced(tool_rounds(0), failures={0: down})
    app = react(model, InMemoryCheckpointer())
    chunks = [c async for c in app.astream(said("hi"), thread(), "full")]
    usage = next(
        c.data["token_usage"] for c in chunks if c.data and c.data.get("status") == "graph_invoked"
    )
    assert model.calls == 2
    assert usage["model_calls"] == 1
    assert usage["cost"] == pytest.approx(model.expected()[2])


async def test_a_fallback_models_answer_is_counted_once() -> None:
    down = ModelUnavailableError("down", context={"status_code": 503})
    primary = Priced(tool_rounds(0), failures={0: down, 1: down, 2: down})
    backup = Priced(tool_rounds(0), priced=False)
    app = react(primary, InMemoryCheckpointer(), fallback_models=[backup])
    usage = (await app.ainvoke(said("hi"), thread()))["token_usage"]
    assert primary.calls == 3
    assert backup.calls == 1
    assert usage["model_calls"] == 1
    assert usage["unpriced_calls"] == 1  # the backup's price is unknown
    assert usage["cost"] is None


def summary_model(messages: list[Message]) -> str:
    return "a summary"


async def test_the_summary_models_call_is_counted() -> None:
    summarizer = Priced(summary_model)
    manager: SummaryContextManager[AgentState] = SummaryContextManager(
        summarizer, max_messages=3, keep_recent=1
    )
    model = Priced(tool_rounds(0))
    graph = StateGraph(context_manager=manager)
    graph.add_node("agent", Agent(model, trim_context=True, retry_config=RETRY))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    app = graph.compile()
    config = thread()
    runs = [(await app.ainvoke(said(f"q{i}"), config))["token_usage"] for i in range(3)]
    assert summarizer.calls >= 1, "the context should have been summarised"
    assert model.calls == 3
    last = runs[-1]
    # the run that summarised counts both models' calls
    assert sum(u["model_calls"] for u in runs) == model.calls + summarizer.calls
    state = await app.aget_state(config)
    assert state is not None
    total = state.execution_meta.usage
    m_in, m_out, m_cost = model.expected()
    s_in, s_out, s_cost = summarizer.expected()
    assert total.model_calls == model.calls + summarizer.calls
    assert (total.input_tokens, total.output_tokens) == (m_in + s_in, m_out + s_out)
    assert total.cost == pytest.approx(m_cost + s_cost)
    assert last["model_calls"] >= 1


# -- an unknown price: the cost is unknown, never a guess -----------------------------------


async def test_a_mix_of_priced_and_unpriced_calls_has_no_cost() -> None:
    model = Priced(tool_rounds(1), priced=[True, False])
    usage = (await react(model, InMemoryCheckpointer()).ainvoke(said("sum"), thread()))[
        "token_usage"
    ]
    assert usage["model_calls"] == 2
    assert usage["unpriced_calls"] == 1
    assert usage["cost"] is None


async def test_an_unpriced_run_leaves_the_thread_total_unknown_for_good() -> None:
    priced = Priced(tool_rounds(0))
    unpriced = Priced(tool_rounds(0), priced=False)
    store = InMemoryCheckpointer()
    config = thread()
    first = await react(unpriced, store).ainvoke(said("one"), config)
    second = await react(priced, store).ainvoke(said("two"), config)
    assert first["token_usage"]["cost"] is None
    assert second["token_usage"]["cost"] == pytest.approx(priced.expected()[2])
    state = await react(priced, store).aget_state(config)
    assert state is not None
    total = state.execution_meta.usage
    assert total.cost is None
    assert total.unpriced_calls == 1
    assert total.priced_cost == pytest.approx(priced.expected()[2])  # what is known, kept apart


async def test_an_offline_model_costs_zero_not_unknown() -> None:
    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(lambda messages, info: "ok")))
    graph.add_edge(START, "agent")
    usage = (await graph.compile().ainvoke(said("hi"), thread()))["token_usage"]
    assert usage["model_calls"] == 1
    assert usage["cost"] == 0.0
    assert usage["unpriced_calls"] == 0


async def test_answers_a_plain_node_made_are_counted_at_commit() -> None:
    def node(state: AgentState) -> dict[str, Any]:
        answer = Message.text_message("hi", "assistant")
        answer.usages = TokenUsages(prompt_tokens=5, completion_tokens=2, total_tokens=7)
        answer.metadata["cost"] = 0.25
        return {"context": [answer]}

    graph = StateGraph()
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    usage = (await graph.compile().ainvoke(said("hi"), thread()))["token_usage"]
    assert as_usage(usage) == (5, 2, 0.25, 1)


def test_a_stored_total_that_cannot_be_read_counts_as_nothing() -> None:
    def read(value: object) -> Usage:
        return ExecutionState.model_validate({"current_node": "n", "usage": value}).usage

    assert read("garbage") == Usage()
    assert read({"input_tokens": "x", "model_calls": 2}) == Usage()
    assert read({"input_tokens": 3, "priced_cost": 1}) == Usage(input_tokens=3, priced_cost=1.0)
    assert ExecutionState(current_node="n").usage == Usage()  # a thread saved before usage


async def test_an_interrupt_in_a_node_keeps_the_runs_calls_in_the_thread() -> None:
    model = Priced(tool_rounds(0))

    def ask(state: AgentState) -> None:
        interrupt({"q": 1}, message="go on?")

    graph = StateGraph()
    graph.add_node("agent", Agent(model, retry_config=RETRY))
    graph.add_node("ask", ask)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "ask")
    app = graph.compile()
    config = thread()
    paused = await app.ainvoke(said("hi"), config)
    assert paused["interrupted"]["node"] == "ask"
    assert paused["token_usage"]["model_calls"] == 1
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.usage.model_calls == 1
    await app.ainvoke({"resume": "yes"}, config)
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.usage.model_calls == 1  # resuming called no model


async def test_a_step_that_fails_after_a_call_still_adds_it_to_the_thread(
    backend: Backend,
) -> None:
    answered = asyncio.Event()

    def reply(messages: list[Message]) -> str:
        answered.set()
        return "ok"

    model = Priced(reply)

    async def boom(state: AgentState) -> None:  # beside the agent, in the same step
        await answered.wait()
        raise ValueError("after the model answered")

    graph = StateGraph()
    graph.add_node("agent", Agent(model, retry_config=RETRY))
    graph.add_node("boom", boom)
    graph.add_edge(START, "agent")
    graph.add_edge(START, "boom")
    app = graph.compile(checkpointer=backend.store)
    config = thread()
    with pytest.raises(Exception, match="after the model answered"):
        await app.ainvoke(said("hi"), config)
    state = await app.aget_state(config)
    assert state is not None
    assert [m.role for m in state.context] == ["user"]  # the failed step left nothing...
    total = state.execution_meta.usage
    assert total.model_calls == 1  # ...but the money it spent
    assert total.cost == pytest.approx(model.expected()[2])


# -- the running total is counted in place: what that must not change -----------------------


def _answering(costs: list[object], per_run: int = 1) -> Any:
    """A graph whose node answers `per_run` times a run (5 input, 2 output tokens each),
    each answer priced at the next of `costs`."""
    left = list(costs)

    def node(state: AgentState) -> dict[str, Any]:
        answer = Message.text_message("hi", "assistant")
        answer.usages = TokenUsages(prompt_tokens=5, completion_tokens=2, total_tokens=7)
        answer.metadata["cost"] = left.pop(0)
        return {"context": [answer]}

    def again(state: AgentState) -> str:
        roles = [m.role for m in state.context]
        answered = len(roles) - 1 - max(i for i, role in enumerate(roles) if role == "user")
        return "n" if answered < per_run else END

    graph = StateGraph()
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    graph.add_conditional_edges("n", again, {"n": "n", END: END})
    return graph


async def test_a_runs_cost_is_the_sum_of_its_calls_on_a_thread_that_had_spent() -> None:
    # the thread's total is counted into in place and the run's share taken back out of it:
    # the cost must be the run's own sum, not a difference of two sums (0.3 - 0.1 != 0.2)
    app = _answering([0.1, 0.2]).compile(checkpointer=InMemoryCheckpointer())
    config = thread()
    first = (await app.ainvoke(said("one"), config))["token_usage"]
    second = (await app.ainvoke(said("two"), config))["token_usage"]
    assert (first["cost"], first["model_calls"]) == (0.1, 1)
    assert (second["cost"], second["model_calls"]) == (0.2, 1)
    assert second["total_input_tokens"] == 5
    state = await app.aget_state(config)
    assert state is not None
    assert state.execution_meta.usage.model_calls == 2
    assert state.execution_meta.usage.cost == 0.1 + 0.2


async def test_a_cost_too_large_for_a_float_is_unknown_and_the_thread_keeps_its_calls(
    tmp_path: Path,
) -> None:
    # (an infinite or NaN cost is refused with the message that holds it, when it is saved)
    cost = 10**400
    path = tmp_path / "threads.db"
    config = thread()
    store = SqliteCheckpointer(path)
    try:
        usage = (await _answering([cost]).compile(checkpointer=store).ainvoke(said("hi"), config))[
            "token_usage"
        ]
    finally:
        await store.aclose()
    assert (usage["cost"], usage["unpriced_calls"], usage["model_calls"]) == (None, 1, 1)
    store = SqliteCheckpointer(path)  # a new process
    try:
        state = await _answering([]).compile(checkpointer=store).aget_state(config)
    finally:
        await store.aclose()
    assert state is not None
    total = state.execution_meta.usage
    assert (total.model_calls, total.input_tokens, total.unpriced_calls) == (1, 5, 1)
    assert total.cost is None


async def test_the_states_a_stream_handed_out_keep_the_total_of_their_step() -> None:
    app = _answering([0.5, 0.25, 0.125, 1.0, 1.0, 1.0], 3).compile(
        checkpointer=InMemoryCheckpointer()
    )
    config = thread()
    states = [c.state async for c in app.astream(said("hi"), config, "full") if c.state]
    counted = [(s.execution_meta.usage.model_calls, s.execution_meta.usage.cost) for s in states]
    assert counted[-3:] == [(1, 0.5), (2, 0.75), (3, 0.875)]
    kept = await app.aget_state(config)
    assert kept is not None
    handed = kept.execution_meta.usage
    await app.ainvoke(said("again"), config)  # a later run counts into a total of its own
    assert (handed.model_calls, handed.cost) == (3, 0.875)


def test_a_thread_that_has_spent_nothing_shares_one_total_that_cannot_change() -> None:
    meta = ExecutionState(current_node="n")
    assert meta.usage is NO_USAGE
    assert ExecutionState.model_validate_json('{"current_node": "n"}').usage is NO_USAGE
    assert Usage() == NO_USAGE
    assert Usage(model_calls=1) != NO_USAGE
    with pytest.raises(TypeError, match=r"Usage\(\) of your own"):
        meta.usage.model_calls += 1
    assert NO_USAGE.model_calls == 0
    assert repr(NO_USAGE) == repr(Usage())
    assert copy.deepcopy(meta).usage is NO_USAGE
    assert copy.copy(NO_USAGE) is NO_USAGE
    assert pickle.loads(pickle.dumps(meta)).usage is NO_USAGE
    own = NO_USAGE.copy()
    own.model_calls += 1  # a copy is an ordinary total
    assert own.model_calls == 1
