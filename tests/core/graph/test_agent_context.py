"""The Agent and the graph's context manager: registration and warnings, trimming what the model
sees, summaries carried in the thread, nothing lost from the stored log, one trim-and-retry on
a context-window error, and a 500-turn conversation on SQLite."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import ModelContextWindowError
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.llm.tokens import TokenCounter
from tenxgraph.core.state import (
    AgentState,
    BaseContextManager,
    Message,
    MessageContextManager,
    SummaryContextManager,
)
from tenxgraph.storage.checkpointer import (
    BaseCheckpointer,
    InMemoryCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.utils.constants import END, START
from tests._helpers import Summarizer, call, msg, result, tool_pairs_intact
from tests.core.graph._support import texts
from tests.core.llm._support import drain

AGENT_LOGGER = "tenxgraph.core.graph.agent"
NOTE = "Summary of the earlier conversation:\n"


# -- helpers --------------------------------------------------------------------------------


def said(*texts: str) -> dict[str, Any]:
    """A run input: one user message per text."""
    return {"messages": [msg("user", t) for t in texts]}


class Recorder:
    """A FunctionModel function: answers with `reply(messages)` (default "ok") and keeps
    every list of messages it was sent."""

    def __init__(self, reply: Callable[[list[Message]], str] | None = None) -> None:
        self.reply = reply or (lambda _: "ok")
        self.calls: list[list[Message]] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.calls.append(messages)
        return self.reply(messages)

    @property
    def seen(self) -> list[str]:
        """The texts of the messages of the last call."""
        return texts(self.calls[-1])


class Refuser:
    """A FunctionModel function that refuses more than `limit` messages as too long for its
    context window (as the litellm adapter reports ContextWindowExceededError)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.sizes: list[int] = []
        self.raised: list[ModelContextWindowError] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.sizes.append(len(messages))
        if len(messages) > self.limit:
            error = ModelContextWindowError(
                f"{len(messages)} messages do not fit the context window",
                context={"provider": "offline", "model": info.model, "status_code": 400},
            )
            self.raised.append(error)
            raise error
        return "fits"


def app_of(
    agent: Agent,
    manager: BaseContextManager[Any] | None = None,
    checkpointer: BaseCheckpointer | None = None,
) -> CompiledGraph:
    """START -> agent -> END, with `manager` registered on the graph."""
    graph = StateGraph(context_manager=manager)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=checkpointer)


def looping_app(agent: Agent, rounds: int) -> CompiledGraph:
    """The agent runs `rounds` times in one run (no context manager registered)."""
    graph = StateGraph()
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")

    def again(state: AgentState) -> str:
        answers = sum(m.role == "assistant" for m in state.context)
        return "agent" if answers % rounds else END

    graph.add_conditional_edges("agent", again, ["agent", END])
    return graph.compile()


def agent_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == AGENT_LOGGER]


async def chat(app: CompiledGraph, config: dict[str, Any], turns: range) -> None:
    for i in turns:
        await app.ainvoke(said(f"question {i}"), config)


# -- registration ---------------------------------------------------------------------------


async def test_a_registered_manager_trims_what_the_model_receives() -> None:
    model = Recorder()
    app = app_of(Agent(FunctionModel(model), trim_context=True), MessageContextManager(2))
    await app.ainvoke(said("q0", "q1", "q2", "q3", "q4"))
    assert model.seen == ["q0", "q3", "q4"]


async def test_trim_context_false_sends_everything_despite_a_registered_manager() -> None:
    model = Recorder()
    app = app_of(Agent(FunctionModel(model), trim_context=False), MessageContextManager(2))
    await app.ainvoke(said("q0", "q1", "q2", "q3", "q4"))
    assert model.seen == ["q0", "q1", "q2", "q3", "q4"]


async def test_trim_context_without_a_manager_trims_nothing_and_warns_how_to_register_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = Recorder()
    app = app_of(Agent(FunctionModel(model), trim_context=True))
    with caplog.at_level(logging.WARNING, logger=AGENT_LOGGER):
        await app.ainvoke(said("q0", "q1", "q2"))
    assert model.seen == ["q0", "q1", "q2"]
    (warning,) = agent_warnings(caplog)
    assert "no context manager" in warning
    assert "StateGraph(..., context_manager=" in warning


async def test_the_missing_manager_warning_comes_once_per_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = Recorder()
    app = looping_app(Agent(FunctionModel(model), trim_context=True), rounds=3)
    with caplog.at_level(logging.WARNING, logger=AGENT_LOGGER):
        await app.ainvoke(said("first run"))
        assert len(model.calls) == 3
        assert len(agent_warnings(caplog)) == 1
        await app.ainvoke(said("second run"))
        assert len(model.calls) == 6
        assert len(agent_warnings(caplog)) == 2


async def test_no_warning_without_trim_context(caplog: pytest.LogCaptureFixture) -> None:
    app = app_of(Agent(FunctionModel(Recorder())))
    with caplog.at_level(logging.WARNING, logger=AGENT_LOGGER):
        await app.ainvoke(said("hi"))
    assert agent_warnings(caplog) == []


async def test_one_agent_serves_graphs_with_and_without_a_manager(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = Recorder()
    agent = Agent(FunctionModel(model), trim_context=True)
    trimmed = app_of(agent, MessageContextManager(1))
    plain = app_of(agent)
    with caplog.at_level(logging.WARNING, logger=AGENT_LOGGER):
        await trimmed.ainvoke(said("q0", "q1", "q2"))
        assert model.seen == ["q0", "q2"]
        assert agent_warnings(caplog) == []
        await plain.ainvoke(said("q0", "q1", "q2"))
        assert model.seen == ["q0", "q1", "q2"]
        assert len(agent_warnings(caplog)) == 1


# -- MessageContextManager through the Agent --------------------------------------------------


async def test_the_first_message_system_messages_and_the_last_user_turns_are_kept() -> None:
    model = Recorder()
    history = [
        msg("user", "first"),
        msg("system", "rules"),
        msg("assistant", "a0"),
        msg("user", "u1"),
        msg("assistant", "a1"),
        msg("system", "more rules"),
        msg("user", "u2"),
        msg("assistant", "a2"),
        msg("user", "u3"),
    ]
    app = app_of(Agent(FunctionModel(model), trim_context=True), MessageContextManager(2))
    await app.ainvoke({"messages": history})
    assert model.seen == ["first", "rules", "more rules", "u2", "a2", "u3"]


async def test_tool_exchanges_around_the_cut_stay_whole() -> None:
    model = Recorder()
    history = [
        msg("user", "first"),
        msg("user", "u1"),
        call("c0"),
        result("c0"),  # right before the cut
        msg("user", "u2"),  # the cut
        call("c1", "c2"),
        result("c1"),
        result("c2"),
        msg("assistant", "a2"),
        msg("user", "u3"),
    ]
    app = app_of(Agent(FunctionModel(model), trim_context=True), MessageContextManager(2))
    await app.ainvoke({"messages": history})
    received = model.calls[-1]
    assert model.seen == ["first", "u2", "", "result of c1", "result of c2", "a2", "u3"]
    assert tool_pairs_intact(received)


async def test_a_first_message_calling_tools_keeps_its_results() -> None:
    model = Recorder()
    history = [call("c0"), result("c0"), msg("user", "u1"), msg("assistant", "a1")]
    history += [msg("user", "u2")]
    app = app_of(Agent(FunctionModel(model), trim_context=True), MessageContextManager(1))
    await app.ainvoke({"messages": history})
    assert model.seen == ["", "result of c0", "u2"]
    assert tool_pairs_intact(model.calls[-1])


# -- SummaryContextManager through the Agent --------------------------------------------------


def summary_app(
    model: Recorder, summarizer: Summarizer, checkpointer: BaseCheckpointer, **kwargs: Any
) -> CompiledGraph:
    kwargs = {"max_messages": 6, "keep_recent": 2, **kwargs}
    manager: SummaryContextManager[AgentState] = SummaryContextManager(
        FunctionModel(summarizer), **kwargs
    )
    return app_of(Agent(FunctionModel(model), trim_context=True), manager, checkpointer)


async def test_the_summary_is_stored_in_the_thread() -> None:
    config = {"thread_id": "summary"}
    app = summary_app(Recorder(), Summarizer(), InMemoryCheckpointer())
    await chat(app, config, range(4))  # the 4th run sends 7 messages: over 6
    state = await app.aget_state(config)
    assert state is not None
    assert state.context_summary == "summary 1"


async def test_the_model_gets_the_summary_as_a_system_note_and_the_recent_messages() -> None:
    model = Recorder()
    app = summary_app(model, Summarizer(), InMemoryCheckpointer())
    await chat(app, {"thread_id": "note"}, range(4))
    assert model.calls[-1][0].role == "system"
    assert model.seen == [NOTE + "summary 1", "question 2", "ok", "question 3"]


async def test_the_summary_is_carried_to_later_runs_without_asking_the_summarizer_again() -> None:
    model, summarizer = Recorder(), Summarizer()
    config = {"thread_id": "carried"}
    app = summary_app(model, summarizer, InMemoryCheckpointer())
    calls_after_each_run = []
    for i in range(8):
        await app.ainvoke(said(f"question {i}"), config)
        calls_after_each_run.append(len(summarizer.calls))
    # a summary keeps 3 messages; each run adds 2, so every second run passes 6 again
    assert calls_after_each_run == [0, 0, 0, 1, 1, 2, 2, 3]
    assert model.seen[0] == NOTE + "summary 3"
    run_4 = texts(model.calls[4])
    assert run_4 == [NOTE + "summary 1", "question 2", "ok", "question 3", "ok", "question 4"]


async def test_a_summary_with_unchanged_text_is_not_remade_at_every_run() -> None:
    summarizer = Summarizer(reply="nothing worth keeping")
    config = {"thread_id": "same-text"}
    app = summary_app(Recorder(), summarizer, InMemoryCheckpointer())
    calls_after_each_run = []
    for i in range(8):
        await app.ainvoke(said(f"question {i}"), config)
        calls_after_each_run.append(len(summarizer.calls))
    assert calls_after_each_run == [0, 0, 0, 1, 1, 2, 2, 3]


async def test_the_summary_survives_reopening_the_sqlite_store(tmp_path: Path) -> None:
    config = {"thread_id": "reopened"}
    summarizer = Summarizer()
    first = summary_app(Recorder(), summarizer, SqliteCheckpointer(tmp_path / "threads.db"))
    await chat(first, config, range(4))
    await first.aclose()
    assert len(summarizer.calls) == 1
    model = Recorder()
    again = summary_app(model, summarizer, SqliteCheckpointer(tmp_path / "threads.db"))
    await again.ainvoke(said("question 4"), config)
    await again.aclose()
    assert len(summarizer.calls) == 1  # the record of what summary 1 covers was stored too
    assert model.seen == [NOTE + "summary 1", "question 2", "ok", "question 3", "ok", "question 4"]


async def test_under_astream_a_new_summary_is_stored_too() -> None:
    config = {"thread_id": "streamed"}
    app = summary_app(Recorder(), Summarizer(), InMemoryCheckpointer())
    for i in range(4):
        await drain(app.astream(said(f"question {i}"), config), [])
    state = await app.aget_state(config)
    assert state is not None
    assert state.context_summary == "summary 1"


# -- nothing is lost --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_manager",
    [
        lambda: MessageContextManager(1),
        lambda: SummaryContextManager(FunctionModel(Summarizer()), max_messages=3, keep_recent=1),
    ],
    ids=["message", "summary"],
)
async def test_the_stored_log_keeps_every_message_on_sqlite(
    tmp_path: Path, make_manager: Callable[[], BaseContextManager[Any]]
) -> None:
    model = Recorder(lambda m: f"answer to {m[-1].text()}")
    config = {"thread_id": "everything"}
    store = SqliteCheckpointer(tmp_path / "threads.db")
    app = app_of(Agent(FunctionModel(model), trim_context=True), make_manager(), store)
    await chat(app, config, range(6))
    assert len(model.seen) < 12 - 1  # the model saw a trimmed context
    expected = []
    for i in range(6):
        expected += [f"question {i}", f"answer to question {i}"]

    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == expected
    history = await app.aget_state_history(config)
    assert history[0].message_count == 12
    for info in history:  # every saved version still reads back whole
        old = await app.aget_state({**config, "checkpoint_version": info.version})
        assert old is not None
        assert texts(old.context) == expected[: info.message_count]
    await app.aclose()


# -- one trim-and-retry on a context-window error -----------------------------------------------

TWELVE = [f"q{i}" for i in range(12)]


async def test_a_context_window_error_is_retried_once_with_the_managers_overflow_trim() -> None:
    refuser = Refuser(limit=8)
    manager: MessageContextManager[AgentState] = MessageContextManager(10)
    app = app_of(Agent(FunctionModel(refuser), trim_context=False), manager)
    result = await app.ainvoke(said(*TWELVE))
    expected = await manager.atrim_overflow(AgentState(context=said(*TWELVE)["messages"]))
    assert refuser.sizes == [12, len(expected.context)]
    assert result["messages"][-1].text() == "fits"


async def test_the_overflow_retry_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = app_of(Agent(FunctionModel(Refuser(limit=8))), MessageContextManager(10))
    with caplog.at_level(logging.WARNING, logger=AGENT_LOGGER):
        await app.ainvoke(said(*TWELVE))
    (warning,) = agent_warnings(caplog)
    assert "too long" in warning
    assert "retrying" in warning


async def test_an_overflow_retry_with_a_summary_manager_stores_the_forced_summary() -> None:
    refuser, summarizer = Refuser(limit=4), Summarizer()
    manager: SummaryContextManager[AgentState] = SummaryContextManager(
        FunctionModel(summarizer), max_messages=30, keep_recent=4
    )
    config = {"thread_id": "forced"}
    app = app_of(Agent(FunctionModel(refuser), trim_context=True), manager, InMemoryCheckpointer())
    await app.ainvoke(said(*TWELVE[:6]), config)
    assert len(summarizer.calls) == 1
    assert refuser.sizes == [6, 3]  # the note and the last 2 messages
    state = await app.aget_state(config)
    assert state is not None
    assert state.context_summary == "summary 1"
    assert len(state.context) == 7  # nothing lost


async def test_a_retry_still_too_long_fails_saying_also_after_trimming() -> None:
    refuser = Refuser(limit=3)
    app = app_of(Agent(FunctionModel(refuser)), MessageContextManager(10))
    with pytest.raises(ModelContextWindowError) as info:
        await app.ainvoke(said(*TWELVE))
    assert len(refuser.sizes) == 2
    assert "also after trimming" in info.value.message
    assert info.value.error_code == "MODEL_CONTEXT_001"  # not wrapped in a NodeError


async def test_without_a_manager_the_error_propagates_unchanged_after_one_call() -> None:
    refuser = Refuser(limit=3)
    app = app_of(Agent(FunctionModel(refuser)))
    with pytest.raises(ModelContextWindowError) as info:
        await app.ainvoke(said(*TWELVE))
    assert refuser.sizes == [12]
    assert info.value is refuser.raised[0]
    assert info.value.message == "12 messages do not fit the context window"


async def test_under_astream_a_context_window_error_is_retried_once() -> None:
    refuser = Refuser(limit=8)
    app = app_of(Agent(FunctionModel(refuser)), MessageContextManager(10))
    chunks: list[Any] = []
    await drain(app.astream(said(*TWELVE)), chunks)
    assert refuser.sizes == [12, 6]
    assert any(getattr(c, "message", None) and c.message.text() == "fits" for c in chunks)


async def test_under_astream_a_retry_still_too_long_fails_saying_also_after_trimming() -> None:
    refuser = Refuser(limit=3)
    app = app_of(Agent(FunctionModel(refuser)), MessageContextManager(10))
    with pytest.raises(ModelContextWindowError) as info:
        await drain(app.astream(said(*TWELVE)), [])
    assert len(refuser.sizes) == 2
    assert "also after trimming" in info.value.message


async def test_under_astream_without_a_manager_the_error_propagates_after_one_call() -> None:
    refuser = Refuser(limit=3)
    app = app_of(Agent(FunctionModel(refuser)))
    with pytest.raises(ModelContextWindowError) as info:
        await drain(app.astream(said(*TWELVE)), [])
    assert refuser.sizes == [12]
    assert info.value is refuser.raised[0]


# -- 500 turns on SQLite ------------------------------------------------------------------------

TOKENIZER = "openai/gpt-4o-mini"
BUDGET = 400
FACT = re.compile(r"fact (\d+) is (\w+)")
FACTS = {3: "teal", 150: "amber", 333: "violet"}
TURNS = 500


def turn_text(turn: int) -> str:
    if turn in FACTS:
        return f"turn {turn}: please remember that fact {turn} is {FACTS[turn]}"
    if turn == TURNS:
        return f"turn {turn}: what is fact 3?"
    return f"turn {turn}: some small talk about the weather, nothing to remember"


class FactKeeper:
    """The summary model: the summary lists every "fact N is X" found in the summary so far
    and the new messages."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.calls += 1
        facts = dict(FACT.findall(messages[-1].text()))
        return "; ".join(f"fact {n} is {facts[n]}" for n in sorted(facts, key=int)) or "no facts"


class Assistant:
    """The Agent's model: counts the tokens it is sent, and answers a question about a fact
    from whatever it was sent."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.tokens: list[int] = []
        self.last: list[Message] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.tokens.append(self.counter.messages(messages))
        self.last = messages
        asked = re.search(r"what is fact (\d+)\?", messages[-1].text())
        if asked is None:
            return "noted"
        known = dict(FACT.findall("\n".join(m.text() for m in messages)))
        return f"fact {asked.group(1)} is {known.get(asked.group(1), 'unknown')}"


@dataclass
class LongChat:
    """What a 500-turn conversation left: the Agent's model, the summary model, the last
    answer, and the thread as read back from a fresh SQLite store."""

    assistant: Assistant
    summarizer: FactKeeper
    answer: str
    stored: AgentState


async def long_chat(db: Path) -> LongChat:
    assistant, summarizer = Assistant(TokenCounter(TOKENIZER)), FactKeeper()
    manager: SummaryContextManager[AgentState] = SummaryContextManager(
        FunctionModel(summarizer),
        token_budget=BUDGET,
        max_messages=60,
        keep_recent=6,
        max_summary_tokens=120,
        tokenizer_model=TOKENIZER,
    )
    config = {"thread_id": "long"}
    agent = Agent(FunctionModel(assistant), trim_context=True)
    app = app_of(agent, manager, SqliteCheckpointer(db))
    for turn in range(1, TURNS + 1):
        result = await app.ainvoke({"messages": [msg("user", turn_text(turn))]}, config)
    await app.aclose()
    reopened = SqliteCheckpointer(db)
    stored = await reopened.aget_state(config)
    await reopened.aclose()
    assert stored is not None
    return LongChat(assistant, summarizer, result["messages"][-1].text(), stored)


@pytest.fixture(scope="module")
def chat_500(tmp_path_factory: pytest.TempPathFactory) -> LongChat:
    """One 500-turn conversation on SQLite, shared by the tests below (a few seconds)."""
    return asyncio.run(long_chat(tmp_path_factory.mktemp("long") / "long.db"))


def test_500_turns_each_reach_the_model(chat_500: LongChat) -> None:
    assert len(chat_500.assistant.tokens) == TURNS


def test_500_turns_every_model_call_stays_within_the_budget(chat_500: LongChat) -> None:
    assert max(chat_500.assistant.tokens) <= BUDGET


def test_500_turns_a_fact_from_turn_3_reaches_turn_500_through_the_summary(
    chat_500: LongChat,
) -> None:
    assert chat_500.answer == "fact 3 is teal"
    note, *history = chat_500.assistant.last
    assert note.role == "system"
    assert note.text() == NOTE + "fact 3 is teal; fact 150 is amber; fact 333 is violet"
    assert not any("fact 3 " in m.text() for m in history[:-1])
    assert len(history) < 60


def test_500_turns_the_whole_log_reads_back_from_sqlite(chat_500: LongChat) -> None:
    context = chat_500.stored.context
    assert len(context) == 2 * TURNS
    assert texts(context[::2]) == [turn_text(t) for t in range(1, TURNS + 1)]
    assert texts(context[1::2]) == ["noted"] * (TURNS - 1) + ["fact 3 is teal"]
    assert chat_500.stored.context_summary is not None


def test_500_turns_call_the_summarizer_only_when_over_budget(chat_500: LongChat) -> None:
    assert chat_500.summarizer.calls < TURNS // 4
