"""`Usage`: what model calls cost (and how many tools ran), added up over a run or a thread.

Tokens come from each call's `TokenUsages`; the cost from litellm's price table (kept on the
answer as ``metadata["cost"]``). A call without a known price is counted, never guessed: the
total cost is then unknown (None) and `unpriced_calls` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(slots=True, eq=False)
class Usage:
    """Token counts and cost of a number of model calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model_calls: int = 0
    priced_cost: float = 0.0  # the cost of the calls whose price is known
    unpriced_calls: int = 0
    # tools run (not replayed from the ledger, not refused): what a thread budget's
    # `max_tool_calls` counts; a thread stored before it was counted reads 0
    tool_calls: int = 0

    @property
    def cost(self) -> float | None:
        """The cost in US dollars; None when a call's price is unknown (never a guess)."""
        return None if self.unpriced_calls else self.priced_cost

    def add(self, other: Usage) -> None:
        """Add `other`'s counts and cost to this one's."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.model_calls += other.model_calls
        self.priced_cost += other.priced_cost
        self.unpriced_calls += other.unpriced_calls
        self.tool_calls += other.tool_calls

    def less(self, earlier: Usage, priced_cost: float) -> Usage:
        """What was counted since this total was `earlier`: the counts' differences, and
        `priced_cost` as the cost (a float difference would not give back the sum)."""
        return Usage(
            self.input_tokens - earlier.input_tokens,
            self.output_tokens - earlier.output_tokens,
            self.reasoning_tokens - earlier.reasoning_tokens,
            self.cache_read_tokens - earlier.cache_read_tokens,
            self.cache_write_tokens - earlier.cache_write_tokens,
            self.model_calls - earlier.model_calls,
            priced_cost,
            self.unpriced_calls - earlier.unpriced_calls,
            self.tool_calls - earlier.tool_calls,
        )

    def copy(self) -> Usage:
        return Usage(*[getattr(self, n) for n in _NAMES])

    def __deepcopy__(self, memo: dict[int, Any]) -> Usage:  # numbers only: a plain copy
        return self.copy()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Usage):
            return NotImplemented
        return (  # the counts that differ most often first
            self.model_calls == other.model_calls
            and self.tool_calls == other.tool_calls
            and self.input_tokens == other.input_tokens
            and self.output_tokens == other.output_tokens
            and self.priced_cost == other.priced_cost
            and self.unpriced_calls == other.unpriced_calls
            and self.reasoning_tokens == other.reasoning_tokens
            and self.cache_read_tokens == other.cache_read_tokens
            and self.cache_write_tokens == other.cache_write_tokens
        )

    __hash__ = None  # type: ignore[assignment]  # counted in place: not a key

    def as_token_usage(self) -> dict[str, Any]:
        """The `token_usage` of a run's result (10xgraph's four keys first)."""
        return {
            "total_input_tokens": self.input_tokens,
            "total_output_tokens": self.output_tokens,
            "total_reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "total_cache_read_tokens": self.cache_read_tokens,
            "total_cache_write_tokens": self.cache_write_tokens,
            "model_calls": self.model_calls,
            "cost": self.cost,
            "unpriced_calls": self.unpriced_calls,
        }


_NAMES = tuple(f.name for f in fields(Usage))


class _NoUsage(Usage):
    """`NO_USAGE`'s class: a zero total that cannot change, shared by every state that
    has spent nothing (so a state's default is neither built nor compared field by field
    when a header is written)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError(
            "NO_USAGE, the total of a thread that has spent nothing, is shared and cannot "
            "change: count into a Usage() of your own"
        )

    # one shared value: hashable, so that pydantic uses it as a default without copying it
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __copy__(self) -> Usage:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Usage:
        return self

    def __reduce__(self) -> tuple[Any, tuple[()]]:  # pickled, it reads back as the same one
        return _shared, ()

    def __repr__(self) -> str:
        return repr(self.copy())


def _no_usage() -> Usage:
    made = Usage.__new__(_NoUsage)
    for name in _NAMES:
        object.__setattr__(made, name, 0.0 if name == "priced_cost" else 0)
    return made


#: the running total of a thread that has spent nothing (`ExecutionState.usage`'s default)
NO_USAGE = _no_usage()


def _shared() -> Usage:
    return NO_USAGE


__all__ = ["NO_USAGE", "Usage"]
