"""TokenCounter (litellm's tokenizers, a per-message cache) and context_window (litellm's map).

litellm counts offline: its tiktoken encodings ship with the package.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tenxgraph.core.llm import tokens
from tenxgraph.core.llm.litellm_client import load_litellm
from tenxgraph.core.llm.tokens import MESSAGE_OVERHEAD, TokenCounter, context_window
from tenxgraph.core.state import Message, ToolCallBlock

GPT = "openai/gpt-4o-mini"
CLAUDE = "anthropic/claude-sonnet-4-5"
# words the o200k (gpt-4o) and cl100k (claude, per litellm) encodings split differently
UNUSUAL = "Supercalifragilisticexpialidocious antidisestablishmentarianism 12345 ñandú 東京"


def litellm_count(model: str, text: str) -> int:
    return int(load_litellm().token_counter(model=model, text=text))


@pytest.fixture
def litellm_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the model's tokenizer was asked to count; it still counts them."""
    calls: list[str] = []
    real = tokens._counter_for

    def recording(model: str) -> Callable[[str], int]:
        count = real(model)

        def counting(text: str) -> int:
            calls.append(text)
            return count(text)

        return counting

    monkeypatch.setattr(tokens, "_counter_for", recording)
    return calls


# -- counting -------------------------------------------------------------------------------


def test_gpt_4o_mini_is_counted_with_its_own_tokenizer() -> None:
    assert TokenCounter(GPT).text(UNUSUAL) == litellm_count(GPT, UNUSUAL)


def test_claude_is_counted_as_litellm_counts_it() -> None:
    assert TokenCounter(CLAUDE).text(UNUSUAL) == litellm_count(CLAUDE, UNUSUAL)


def test_counts_are_positive_and_the_same_text_counts_the_same() -> None:
    counter = TokenCounter(GPT)
    first = counter.text("The meeting moved to Tuesday at 10:30.")
    assert first > 0
    assert counter.text("The meeting moved to Tuesday at 10:30.") == first
    assert counter.text("") == 0


def test_a_message_costs_its_text_plus_the_message_overhead() -> None:
    counter = TokenCounter(GPT)
    message = Message.text_message("Where is my parcel?", "user")
    assert counter.message(message) == counter.text("Where is my parcel?") + MESSAGE_OVERHEAD


def test_a_tool_call_is_counted_with_its_name_and_arguments() -> None:
    counter = TokenCounter(GPT)
    call = ToolCallBlock(id="c1", name="track_parcel", args={"parcel_id": "AB-123456"})
    message = Message(role="assistant", content=[call])
    assert counter.message(message) > MESSAGE_OVERHEAD + counter.text("track_parcel")


def test_messages_sum_their_counts() -> None:
    counter = TokenCounter(GPT)
    messages = [Message.text_message("one", "user"), Message.text_message("two", "assistant")]
    assert counter.messages(messages) == sum(counter.message(m) for m in messages)


def test_names_litellm_cannot_route_are_counted_as_gpt_4o() -> None:
    assert TokenCounter("test").model == "gpt-4o"
    assert TokenCounter(None).model == "gpt-4o"
    assert TokenCounter("test").text(UNUSUAL) == TokenCounter("openai/gpt-4o").text(UNUSUAL)


# -- the cache ------------------------------------------------------------------------------


def test_a_message_is_counted_by_litellm_only_once(litellm_calls: list[str]) -> None:
    counter = TokenCounter(GPT)
    message = Message.text_message("Please remember my order number 4711.", "user")
    first = counter.message(message)
    assert len(litellm_calls) == 1
    assert counter.message(message) == first
    assert counter.messages([message, message]) == 2 * first
    assert len(litellm_calls) == 1


def test_the_cache_holds_at_most_max_cached_messages(litellm_calls: list[str]) -> None:
    counter = TokenCounter(GPT, max_cached=2)
    first, second, third = (Message.text_message(t, "user") for t in ("one", "two", "three"))
    for message in (first, second, third):
        counter.message(message)
    counter.message(first)  # pushed out by the third
    assert litellm_calls == ["one", "two", "three", "one"]


# -- context windows ------------------------------------------------------------------------


def test_context_window_of_a_known_model_comes_from_litellm() -> None:
    assert context_window(GPT) == 128000


@pytest.mark.parametrize("model", ["nobody/unknown-model-xyz", "test", ""])
def test_context_window_of_an_unknown_model_is_none(model: str) -> None:
    assert context_window(model) is None
