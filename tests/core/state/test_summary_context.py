"""SummaryContextManager on its own: when it summarises, what the summary model is asked, what
the model would see afterwards, token budgets, and argument checks.

The graph side (the summary stored in the thread and carried to later runs) is in
tests/core/graph/test_agent_context.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tenxgraph.core.graph import Agent
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.llm.summary import DEFAULT_SUMMARY_PROMPT
from tenxgraph.core.llm.tokens import TokenCounter
from tenxgraph.core.state import (
    AgentState,
    Message,
    SummaryContextManager,
)
from tests._helpers import Summarizer, call, msg, result, tool_pairs_intact
from tests.core.graph._support import texts

TOKENIZER = "openai/gpt-4o-mini"


# -- helpers --------------------------------------------------------------------------------


def conversation(turns: int, start: int = 0) -> list[Message]:
    """`turns` question/answer pairs, then the next question (as the model would see it)."""
    messages: list[Message] = []
    for i in range(start, start + turns):
        messages += [msg("user", f"question {i}"), msg("assistant", f"answer {i}")]
    return [*messages, msg("user", f"question {start + turns}")]


def manager(summarizer: Summarizer, **kwargs: Any) -> SummaryContextManager[AgentState]:
    kwargs.setdefault("tokenizer_model", TOKENIZER)
    return SummaryContextManager(FunctionModel(summarizer), **kwargs)


def carried(state: AgentState, view: AgentState, *more: Message) -> AgentState:
    """The next state as a graph keeps it: the whole history plus `more`, and the summary
    (with its record in execution_meta) from the view the model saw."""
    return state.model_copy(
        update={
            "context": [*state.context, *more],
            "context_summary": view.context_summary,
            "execution_meta": view.execution_meta,
        }
    )


async def sent_to_model(view: AgentState) -> list[Message]:
    """What an Agent would send for `view`: the summary note, then the context."""
    return (await Agent("test").build_request(view)).messages


# -- when a summary is made -------------------------------------------------------------------


async def test_under_the_limit_the_same_state_comes_back_without_a_model_call() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(3))  # 7 messages
    assert await manager(summarizer, max_messages=7, keep_recent=2).atrim_context(state) is state
    assert summarizer.calls == []


async def test_over_the_limit_the_summary_model_is_asked_once() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))  # 9 messages
    view = await manager(summarizer, max_messages=8, keep_recent=2).atrim_context(state)
    assert len(summarizer.calls) == 1
    assert view.context_summary == "summary 1"


async def test_the_summary_model_gets_the_older_messages_and_the_summary_prompt() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))
    await manager(summarizer, max_messages=8, keep_recent=2).atrim_context(state)
    system, user = summarizer.calls[0][0]
    assert (system.role, system.text()) == ("system", DEFAULT_SUMMARY_PROMPT)
    assert user.role == "user"
    assert "Summary so far" not in user.text()
    for i in range(3):  # the older turns
        assert f"[user] question {i}\n[assistant] answer {i}" in user.text()
    assert "question 3" not in user.text()  # kept verbatim
    assert "question 4" not in user.text()


async def test_the_summary_model_is_limited_to_max_summary_tokens_with_extra_settings() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))
    mgr = manager(summarizer, max_messages=8, keep_recent=2, max_summary_tokens=123, temperature=0)
    await mgr.atrim_context(state)
    assert summarizer.calls[0][1].settings == {"max_tokens": 123, "temperature": 0}


async def test_a_custom_summary_system_prompt_replaces_the_default() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))
    mgr = manager(summarizer, max_messages=8, keep_recent=2, summary_system_prompt="Be brief.")
    await mgr.atrim_context(state)
    assert summarizer.calls[0][0][0].text() == "Be brief."


async def test_the_most_recent_messages_are_kept_verbatim_from_a_user_turn() -> None:
    state = AgentState(context=conversation(10))  # 21 messages, the last a question
    view = await manager(Summarizer(), max_messages=8, keep_recent=4).atrim_context(state)
    # the last 4 start with an answer: the cut moves back to that answer's question
    assert all(m is o for m, o in zip(view.context, state.context[16:], strict=True))
    assert len(view.context) == 5
    assert view.context[0].role == "user"


async def test_a_tool_call_is_never_separated_from_its_results() -> None:
    history = [
        *conversation(2)[:-1],
        msg("user", "look both up"),
        call("c1", "c2"),
        result("c1"),
        result("c2"),  # keep_recent=3 would cut here
        msg("assistant", "both found"),
        msg("user", "thanks"),
    ]
    state = AgentState(context=history)
    view = await manager(Summarizer(), max_messages=6, keep_recent=3).atrim_context(state)
    assert texts(view.context)[0] == "look both up"
    assert len(view.context) == 6
    assert tool_pairs_intact(view.context)


async def test_tool_exchanges_reach_the_summary_model_as_text() -> None:
    summarizer = Summarizer()
    history = [
        msg("user", "look it up"),
        call("c1"),
        result("c1"),
        msg("assistant", "found it"),
        *conversation(4),
    ]
    await manager(summarizer, max_messages=8, keep_recent=2).atrim_context(
        AgentState(context=history)
    )
    assert '[assistant] (called lookup {"q": "c1"})' in summarizer.asked
    assert "[tool] (tool result: result of c1)" in summarizer.asked


async def test_system_messages_are_kept_and_not_summarized() -> None:
    summarizer = Summarizer()
    rules = msg("system", "Answer in French.")
    state = AgentState(context=[rules, *conversation(5)])
    view = await manager(summarizer, max_messages=8, keep_recent=2).atrim_context(state)
    assert view.context[0] is rules
    assert view.context[1].role == "user"
    assert "French" not in summarizer.asked


async def test_an_empty_summary_leaves_the_context_untrimmed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = AgentState(context=conversation(4))
    with caplog.at_level(logging.WARNING, logger="tenxgraph.core.llm.summary"):
        view = await manager(Summarizer(reply="  "), max_messages=8, keep_recent=2).atrim_context(
            state
        )
    assert texts(view.context) == texts(state.context)
    assert view.context_summary is None
    assert "returned no text" in caplog.text


# -- summaries over time ----------------------------------------------------------------------


async def test_between_summaries_the_model_sees_the_summary_and_what_came_after_it() -> None:
    summarizer = Summarizer()
    mgr = manager(summarizer, max_messages=8, keep_recent=2)
    state = AgentState(context=conversation(4))
    first = await mgr.atrim_context(state)
    later = carried(state, first, msg("assistant", "answer 4"), msg("user", "question 5"))
    view = await mgr.atrim_context(later)
    assert len(summarizer.calls) == 1
    assert view.context_summary == "summary 1"
    assert texts(view.context) == ["question 3", "answer 3", "question 4", "answer 4", "question 5"]


async def test_a_second_summary_folds_in_the_first() -> None:
    summarizer = Summarizer()
    mgr = manager(summarizer, max_messages=8, keep_recent=2)
    state = AgentState(context=conversation(4))
    first = await mgr.atrim_context(state)
    later = carried(state, first, *conversation(4, start=4)[1:])  # question 4 was there
    view = await mgr.atrim_context(later)
    assert len(summarizer.calls) == 2
    assert summarizer.asked.startswith("Summary so far:\nsummary 1\n\nNew messages:\n")
    assert "question 2" not in summarizer.asked  # covered by the first summary
    assert "[user] question 3" in summarizer.asked
    assert view.context_summary == "summary 2"
    assert texts(view.context) == ["question 7", "answer 7", "question 8"]


async def test_a_summary_with_the_same_text_as_before_still_moves_on() -> None:
    summarizer = Summarizer(reply="nothing new")
    mgr = manager(summarizer, max_messages=8, keep_recent=2)
    state = AgentState(context=conversation(4))
    first = await mgr.atrim_context(state)
    later = carried(state, first, *conversation(4, start=4)[1:])
    second = await mgr.atrim_context(later)
    assert second.execution_meta.internal_data != first.execution_meta.internal_data
    assert texts(second.context) == ["question 7", "answer 7", "question 8"]


# -- the input state --------------------------------------------------------------------------


async def test_atrim_context_does_not_modify_the_input_state() -> None:
    state = AgentState(context=conversation(4))
    before = state.model_dump()
    context = list(state.context)
    view = await manager(Summarizer(), max_messages=8, keep_recent=2).atrim_context(state)
    assert view.context_summary == "summary 1"
    assert state.model_dump() == before
    assert all(a is b for a, b in zip(state.context, context, strict=True))


def check_sync_trim() -> None:
    """`trim_context` (sync) summarizes and keeps the recent turns, leaving the state as it was."""
    state = AgentState(context=conversation(4))
    before = state.model_dump()
    view = manager(Summarizer(), max_messages=8, keep_recent=2).trim_context(state)
    assert view.context_summary == "summary 1"
    assert texts(view.context) == ["question 3", "answer 3", "question 4"]
    assert state.model_dump() == before


def test_trim_context_works_without_a_running_event_loop() -> None:
    check_sync_trim()


async def test_trim_context_works_inside_a_running_event_loop() -> None:
    check_sync_trim()


# -- after the model refused the context as too long -------------------------------------------


async def test_atrim_overflow_summarizes_under_the_limit_and_keeps_fewer_messages() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))  # under max_messages=30
    view = await manager(summarizer, max_messages=30, keep_recent=4).atrim_overflow(state)
    assert len(summarizer.calls) == 1
    assert texts(view.context) == ["question 3", "answer 3", "question 4"]  # from keep 2


# -- token budgets ----------------------------------------------------------------------------


def test_count_uses_the_tokenizer_models_counter() -> None:
    messages = conversation(3)
    mgr = manager(Summarizer(), token_budget=1000)
    assert mgr.count(messages) == TokenCounter(TOKENIZER).messages(messages)


async def test_a_token_budget_is_not_exceeded_at_exactly_the_count() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))
    tokens = TokenCounter(TOKENIZER).messages(state.context)
    mgr = manager(summarizer, max_messages=100, keep_recent=2, token_budget=tokens)
    assert await mgr.atrim_context(state) is state
    assert summarizer.calls == []


async def test_a_token_budget_trims_one_token_over_it() -> None:
    summarizer = Summarizer()
    state = AgentState(context=conversation(4))
    tokens = TokenCounter(TOKENIZER).messages(state.context)
    mgr = manager(
        summarizer, max_messages=100, keep_recent=2, token_budget=tokens - 1, max_summary_tokens=5
    )
    view = await mgr.atrim_context(state)
    assert len(summarizer.calls) == 1
    assert texts(view.context) == ["question 3", "answer 3", "question 4"]


async def test_under_a_budget_fewer_recent_messages_are_kept_to_leave_room_for_the_summary() -> (
    None
):
    state = AgentState(context=conversation(10))
    counter = TokenCounter(TOKENIZER)
    budget = 60
    mgr = manager(
        Summarizer(), max_messages=100, keep_recent=8, token_budget=budget, max_summary_tokens=20
    )
    view = await mgr.atrim_context(state)
    assert len(view.context) < 8
    assert texts(view.context)[-1] == "question 10"  # the last turn always stays
    assert view.context[0].role == "user"
    assert counter.messages(view.context) <= budget - 20


async def test_right_after_a_summary_the_model_call_fits_the_budget() -> None:
    state = AgentState(context=conversation(10))
    counter = TokenCounter(TOKENIZER)
    mgr = manager(
        Summarizer(), max_messages=100, keep_recent=8, token_budget=80, max_summary_tokens=20
    )
    view = await mgr.atrim_context(state)
    assert view.context_summary == "summary 1"
    assert counter.messages(await sent_to_model(view)) <= 80


async def test_between_summaries_the_model_call_stays_within_the_budget() -> None:
    counter = TokenCounter(TOKENIZER)
    state = AgentState(context=conversation(3))
    first = await manager(Summarizer(), max_messages=6, keep_recent=2).atrim_context(state)
    later = carried(state, first, msg("assistant", "answer 3"), msg("user", "question 4"))
    covered = first.execution_meta.internal_data["context_summary"]["upto"] + 1
    budget = counter.messages(later.context[covered:]) + counter.text("summary 1")
    summarizer = Summarizer()
    mgr = manager(summarizer, max_messages=100, keep_recent=2, token_budget=budget)
    view = await mgr.atrim_context(later)
    assert counter.messages(await sent_to_model(view)) <= budget


def test_a_fraction_budget_is_that_share_of_the_tokenizer_models_window() -> None:
    mgr = manager(Summarizer(), token_budget=0.5, tokenizer_model="openai/gpt-4o-mini")
    assert mgr.budget == 64000


def test_a_fraction_budget_defaults_to_the_summary_models_window() -> None:
    assert SummaryContextManager("openai/gpt-4o-mini", token_budget=0.25).budget == 32000


def test_an_int_budget_is_used_as_it_is() -> None:
    assert manager(Summarizer(), token_budget=1234).budget == 1234
    assert manager(Summarizer()).budget is None


async def test_a_fraction_budget_with_an_unknown_window_raises_naming_tokenizer_model() -> None:
    mgr: SummaryContextManager[AgentState] = SummaryContextManager(
        FunctionModel(Summarizer()), token_budget=0.5
    )
    with pytest.raises(ValueError, match="tokenizer_model"):
        _ = mgr.budget
    with pytest.raises(ValueError, match="tokenizer_model"):
        await mgr.atrim_context(AgentState(context=conversation(1)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"keep_recent": 0}, "keep_recent must be at least 1"),
        ({"max_messages": 8, "keep_recent": 8}, r"max_messages \(8\) must be larger"),
        ({"max_messages": 5, "keep_recent": 8}, r"max_messages \(5\) must be larger"),
        ({"token_budget": 1.5}, "fraction"),
        ({"token_budget": 0}, "must be positive"),
        ({"token_budget": -100}, "must be positive"),
        ({"token_budget": 0.0}, "must be positive"),
        ({"max_summary_tokens": 0}, "max_summary_tokens must be positive"),
    ],
)
def test_invalid_arguments_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SummaryContextManager("test", **kwargs)


def test_a_whole_window_as_the_budget_is_allowed() -> None:
    assert SummaryContextManager("openai/gpt-4o-mini", token_budget=1.0).budget == 128000
