"""Counting the tokens of messages for a model, and reading a model's context window.

Counts use the model's own tokenizer where litellm knows it (as its `token_counter` does),
tiktoken otherwise. They are
cached per message, so a long history is counted once, not at every model call.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

from tenxgraph.core.llm.litellm_client import load_litellm
from tenxgraph.core.state import Message, ToolCallBlock

# tokens a chat format adds around each message (role, separators): OpenAI's rule of thumb
MESSAGE_OVERHEAD = 4
_FALLBACK_MODEL = "gpt-4o"  # for names litellm cannot route ("test", offline models)


class TokenCounter:
    """Tokens of messages as `model` counts them; each message is counted once (the cache
    holds `max_cached` messages)."""

    def __init__(self, model: str | None = None, max_cached: int = 100_000) -> None:
        self.model = model if model and "/" in model else _FALLBACK_MODEL
        self._cache: OrderedDict[tuple[str | int, int], int] = OrderedDict()
        self._max_cached = max_cached
        self._count: Callable[[str], int] | None = None

    def text(self, text: str) -> int:
        if not text:
            return 0
        if self._count is None:
            self._count = _counter_for(self.model)
        return self._count(text)

    def message(self, message: Message) -> int:
        """Tokens of one message, cached by id and content: one manager serves many threads,
        whose messages may reuse ids."""
        content = _countable(message)
        key = (message.message_id, hash(content))
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self.text(content) + MESSAGE_OVERHEAD
            if len(self._cache) > self._max_cached:
                self._cache.popitem(last=False)
        return found

    def messages(self, messages: list[Message]) -> int:
        return sum(self.message(m) for m in messages)


def _counter_for(model: str) -> Callable[[str], int]:
    """A text -> tokens function for `model`. OpenAI models are encoded with their tiktoken
    encoding directly (what litellm's `token_counter` picks for them, at a fraction of its
    overhead); any other model goes through `token_counter`, which knows the bundled
    tokenizers (Anthropic's) and falls back to tiktoken."""
    litellm = load_litellm()
    try:
        litellm.token_counter(model=model, text="x")  # also points tiktoken at litellm's files
    except Exception:  # a name litellm cannot route: count as the fallback model does
        model = _FALLBACK_MODEL
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(model.rsplit("/", 1)[-1])
    except Exception:
        chosen = model
        return lambda text: int(litellm.token_counter(model=chosen, text=text))
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _countable(message: Message) -> str:
    """What of a message reaches the model as tokens: its text, tool calls and reasoning."""
    parts = [message.text()]
    for block in message.content:
        if isinstance(block, ToolCallBlock):
            parts.append(f"{block.name}({json.dumps(block.args, ensure_ascii=False)})")
    if message.reasoning:
        parts.append(message.reasoning)
    return "\n".join(p for p in parts if p)


def context_window(model: str) -> int | None:
    """The most input tokens `model` takes, from litellm's bundled model map; None when
    litellm does not know the model."""
    try:
        info = load_litellm().get_model_info(model)
    except Exception:
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


__all__ = ["MESSAGE_OVERHEAD", "TokenCounter", "context_window"]
