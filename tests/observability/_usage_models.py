"""Offline model clients whose answers carry a usage and a price of our choosing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from tenxgraph.core.exceptions import ModelError
from tenxgraph.core.llm import ModelRequest
from tenxgraph.core.llm.offline import reply_message, stream_pieces
from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.core.state.message_block import ToolCallBlock


# what the n-th call (0-based) of a `Priced` model spends
def tokens_of(n: int) -> tuple[int, int]:
    return 100 + 10 * n, 7 + n


def cost_of(n: int) -> float:
    return 0.001 * (n + 1)


Reply = Callable[[list[Message]], Any]


class Priced:
    """A model client (no `free` flag: a hosted model as the runtime sees it). Its n-th call
    answers `reply(messages)` with usage `tokens_of(n)` and, when `priced`, the cost
    `cost_of(n)` in the metadata, as `LiteLLMClient` puts litellm's price there. An exception
    in `failures` is raised by the call of that number instead (a failed attempt)."""

    def __init__(
        self,
        reply: Reply,
        *,
        priced: bool | Sequence[bool] = True,
        failures: dict[int, ModelError] | None = None,
    ) -> None:
        self.reply = reply
        self.priced = priced
        self.failures = dict(failures or {})
        self.calls = 0  # attempts, failed ones too
        self.answered: list[tuple[int, int, float | None]] = []  # (in, out, cost) per answer

    def _is_priced(self, n: int) -> bool:
        return self.priced if isinstance(self.priced, bool) else self.priced[n]

    async def acomplete(self, request: ModelRequest) -> Message:
        n = self.calls
        self.calls += 1
        if n in self.failures:
            raise self.failures[n]
        answer = reply_message(self.reply(list(request.messages)), request, "priced")
        prompt, completion = tokens_of(n)
        answer.usages = TokenUsages(
            prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
        cost = cost_of(n) if self._is_priced(n) else None
        if cost is not None:
            answer.metadata["cost"] = cost
        self.answered.append((prompt, completion, cost))
        return answer

    async def astream(self, request: ModelRequest) -> AsyncIterator[Message]:
        answer = await self.acomplete(request)
        async for piece in stream_pieces(answer):
            yield piece

    def expected(self) -> tuple[int, int, float | None]:
        """(input tokens, output tokens, cost or None) of every answer so far."""
        costs = [c for _, _, c in self.answered]
        return (
            sum(i for i, _, _ in self.answered),
            sum(o for _, o, _ in self.answered),
            None if None in costs else sum(c for c in costs if c is not None),
        )


def tool_rounds(rounds: int) -> Reply:
    """Ask for tools `rounds` times (two parallel calls the first time, one after), then
    answer in text: `rounds + 1` model calls per user turn."""

    def reply(messages: list[Message]) -> Any:
        done = 0
        for message in reversed(messages):
            if message.role == "user":
                break
            if message.role == "assistant" and message.tool_call_blocks():
                done += 1
        if done >= rounds:
            return "done"
        if done == 0:
            return [
                ToolCallBlock(id=f"c{len(messages)}a", name="add", args={"a": 1, "b": 2}),
                ToolCallBlock(id=f"c{len(messages)}b", name="add", args={"a": 3, "b": 4}),
            ]
        return [ToolCallBlock(id=f"c{len(messages)}", name="add", args={"a": done, "b": 1})]

    return reply


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


__all__ = ["Priced", "add", "cost_of", "tokens_of", "tool_rounds"]
