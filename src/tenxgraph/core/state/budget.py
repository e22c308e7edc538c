"""Run budgets: the most a run may spend on model calls, tool calls, tokens and money.

A `Budget` is set on `compile(budget=...)`, on an `Agent(budget=...)` (its calls only), or per
run in `config` (`config["budget"]`, or the flat keys `max_model_calls`, `max_tool_calls`,
`max_input_tokens`, `max_output_tokens`, `max_total_tokens`, `max_cost`); where several are
set, the smallest limit of each kind holds. What a run spends against it is kept by the
engine (`tenxgraph.core.state.spending`).

The same class is a thread budget (`compile(thread_budget=...)`, `config["thread_budget"]`):
limits on what all the runs of a thread spend together, counted from the thread's stored
totals (`tenxgraph.core.state.thread_spending`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from tenxgraph.core.exceptions import BudgetExceededError
from tenxgraph.core.state.spending import LIMITS, Spending


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on what one run may spend (None: no limit).

    `max_cost` is in US dollars, from litellm's price table; a call whose price is unknown
    counts as spending nothing but is logged. With `on_exceeded="finish"` (the default) the
    model gets one last call without tools, asked for a final answer (`final_answer=False`:
    not even that), and the run completes with `result["budget"]` saying which limit ended
    it; with `"error"`, `BudgetExceededError` is raised before the call that would cross it.
    """

    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    on_exceeded: Literal["finish", "error"] = "finish"
    final_answer: bool = True

    def __post_init__(self) -> None:
        for name in LIMITS:
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, int | float) and not isinstance(value, bool)
            whole = name != "max_cost"
            if not number or value < 0 or (whole and not isinstance(value, int)):
                kind = "a number of US dollars" if name == "max_cost" else "a whole number"
                raise ValueError(f"Budget({name}=...) must be {kind} >= 0 or None, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"Budget({name}=...) must be finite, got {value!r}")
        if self.on_exceeded not in ("finish", "error"):
            raise ValueError(
                f"Budget(on_exceeded=...) must be 'finish' or 'error', got {self.on_exceeded!r}"
            )

    @classmethod
    def of(cls, value: Budget | dict[str, Any] | None, where: str) -> Budget | None:
        """A budget from a `Budget`, a dict of its fields, or None."""
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(
                    f"{where} has unknown budget key(s) {unknown}; known: {sorted(known)}"
                )
            return cls(**value)
        raise TypeError(
            f"{where} must be a Budget or a dict of its fields, not {type(value).__name__}"
        )

    def tightest(self, other: Budget | None) -> Budget:
        """This budget and `other` together: the smaller limit of each kind; `other`'s
        `on_exceeded` and `final_answer`."""
        if other is None:
            return self
        values: dict[str, Any] = {}
        for name in LIMITS:
            mine, theirs = getattr(self, name), getattr(other, name)
            values[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return replace(other, **values)

    def limits(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in LIMITS if getattr(self, name) is not None}


def budget_of(value: Any, where: str) -> Budget | None:
    """A `Budget` from a `Budget`, a dict of its fields, or None."""
    return Budget.of(value, where)


__all__ = ["Budget", "BudgetExceededError", "Spending", "budget_of"]
