"""What a thread's budget leaves a run: `ThreadAllowance`.

A thread budget (`compile(thread_budget=...)`, `config["thread_budget"]`) limits what every run
of a thread spends together. The thread's running total, `execution_meta.usage` (model calls,
tools run, tokens, the cost of the priced calls), is saved with the thread at every step; at a
run's start what it holds is taken off the thread's limits, and what is left holds in the run
like a run budget's limits (`Meter`), named ``thread.<limit>`` when it is the one reached.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from tenxgraph.core.exceptions import BudgetExceededError
from tenxgraph.core.state.spending import LIMITS, Meter, Spending

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.core.state.usage import Usage

#: how `result["budget"]["ended_by"]` (and the thread's record of it) names a thread's limit
THREAD_PREFIX = "thread."


def thread_spent(usage: Usage) -> Spending:
    """A thread's running total, counted as a budget counts (an unknown price as 0)."""
    spent = Spending()
    spent.model_calls = usage.model_calls
    spent.tool_calls = usage.tool_calls
    spent.input_tokens = usage.input_tokens
    spent.output_tokens = usage.output_tokens
    spent.cost = usage.priced_cost
    return spent


class ThreadAllowance:
    """A thread's budget, what the thread had spent when the run opened (`before`), and what
    the run itself had spent by then (`opened`: a paused run resumed, already in `before`)."""

    __slots__ = ("before", "budget", "opened", "run_budget")

    def __init__(
        self,
        budget: Budget,
        before: Spending,
        opened: Spending,
        run_budget: Budget | None = None,
    ) -> None:
        self.budget = budget
        self.before = before
        self.opened = opened
        self.run_budget = run_budget  # the run's own limits, without the thread's

    def reached(self, *, tools: bool = True) -> str | None:
        """The first of the thread's limits already reached when the run opened (`tools`
        False: of those that leave no model call, tool calls apart), or None."""
        for name in LIMITS:
            limit = getattr(self.budget, name)
            if limit is None or (not tools and name == "max_tool_calls"):
                continue
            if self.before.spent(name) >= limit:
                return name
        return None

    def remainder(self) -> Budget:
        """What is left of each of the thread's limits, counted from what the run had spent
        when it opened (so it holds against the run's own `Spending`); the thread budget's
        `on_exceeded` and `final_answer`."""
        left: dict[str, Any] = {}
        for name in LIMITS:
            limit = getattr(self.budget, name)
            if limit is None:
                continue
            value = limit - self.before.spent(name) + self.opened.spent(name)
            left[name] = max(0.0, float(value)) if name == "max_cost" else max(0, int(value))
        return replace(self.budget, **left)

    def holds(self, limit: str, value: float | None) -> bool:
        """Whether `value`, a limit of a run's effective budget, is the thread's remainder
        (the thread's limit is the tighter one, or as tight as the run's)."""
        if value is None or getattr(self.budget, limit) is None:
            return False
        return bool(getattr(self.remainder(), limit) == value)

    def totals(self, run: Spending) -> dict[str, Any]:
        """The thread's total now: before the run, and what the run has spent since."""
        now = Spending()
        for name in ("model_calls", "tool_calls", "input_tokens", "output_tokens", "cost"):
            value = getattr(self.before, name) + getattr(run, name) - getattr(self.opened, name)
            setattr(now, name, value)
        return now.dump()

    def exceeded(self, limit: str, run: Spending, what: str) -> BudgetExceededError:
        """The error of `on_exceeded="error"` when the thread's `limit` is the one reached."""
        value = getattr(self.budget, limit)
        totals = self.totals(run)
        spent = _spent_in(limit, totals)
        return BudgetExceededError(
            f"The thread's budget {limit}={value} (over all its runs) is used up "
            f"({spent:g} spent), so {what} did not go ahead. Raise the thread's limit "
            "(compile(thread_budget=...) or config['thread_budget']), continue in a new "
            "thread, or use on_exceeded='finish' to end its runs with a final answer instead",
            "BUDGET_002",
            {"limit": limit, "max": value, "spent": totals, "scope": "thread"},
        )


def _spent_in(limit: str, totals: dict[str, Any]) -> float:
    if limit == "max_total_tokens":
        return float(totals["input_tokens"] + totals["output_tokens"])
    key = "cost" if limit == "max_cost" else limit.removeprefix("max_")
    return float(totals[key])


def combined(run: Budget | None, thread: ThreadAllowance) -> Budget:
    """A run's effective budget: the tighter of its own limits and what the thread has left
    of each; the run's `on_exceeded` and `final_answer` (the thread's own hold where one of
    its limits is reached: `Meter`)."""
    left = thread.remainder()
    return left if run is None else left.tightest(run)


def with_thread(meter: Meter | None, budget: Budget, usage: Usage) -> tuple[Meter, ThreadAllowance]:
    """A run's meter (None: the run has no budget of its own) with what the thread has left
    of `budget`, `usage` being the thread's total as the run opened (the same spending); and
    the thread's allowance."""
    spending = Spending() if meter is None else meter.spending
    opened = Spending()
    opened.restore(spending.dump())
    # (a meter names the budget class by its shape: the same class)
    run_budget = None if meter is None else cast("Budget | None", meter.budget)
    thread = ThreadAllowance(budget, thread_spent(usage), opened, run_budget)
    return Meter(combined(run_budget, thread), spending, thread), thread


__all__ = ["THREAD_PREFIX", "ThreadAllowance", "combined", "thread_spent", "with_thread"]
