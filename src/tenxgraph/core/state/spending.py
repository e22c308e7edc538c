"""What a run spends against its `Budget` (`tenxgraph.core.state.budget`): the engine's side.

`Spending` is what a run has spent so far; a `Meter` holds it with the run's budget, shared by
the run with the subgraphs it runs and saved with the thread at every step, so a run paused
here and resumed in another process goes on from what it had spent. Plain classes: the engine
imports this module whether or not a run has a budget.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import BudgetExceededError

#: the limits, in the order they are checked and reported
LIMITS = (
    "max_model_calls",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
    "max_cost",
)
#: the thread's record of what the run in progress has spent (`execution_meta.internal_data`)
SPENT_KEY = "spent"
#: the thread's record of the budget that ended its last run
ENDED_KEY = "budget_ended"

FINAL_NOTE = (
    "This {whose} {limit} budget is reached: no more tools can be called. Answer the user now, "
    "as well as you can with what you have."
)


if TYPE_CHECKING:
    from typing import Protocol

    class Budget(Protocol):
        """What a meter reads of a `tenxgraph.core.state.budget.Budget` (which imports this
        module: named by its shape, not imported back)."""

        @property
        def max_model_calls(self) -> int | None: ...
        @property
        def max_tool_calls(self) -> int | None: ...
        @property
        def max_output_tokens(self) -> int | None: ...
        @property
        def max_total_tokens(self) -> int | None: ...
        @property
        def on_exceeded(self) -> str: ...
        @property
        def final_answer(self) -> bool: ...

        def tightest(self, other: Any) -> Any: ...

        def limits(self) -> dict[str, int | float]: ...

    class ThreadAllowance(Protocol):
        """What a meter reads of a `tenxgraph.core.state.thread_spending.ThreadAllowance`
        (named by its shape too)."""

        @property
        def budget(self) -> Budget: ...
        @property
        def run_budget(self) -> Budget | None: ...

        def holds(self, limit: str, value: float | None) -> bool: ...

        def totals(self, run: Spending) -> dict[str, Any]: ...

        def exceeded(self, limit: str, run: Spending, what: str) -> BudgetExceededError: ...


class BudgetSpent(BaseException):
    """Raised where a run with `Budget(on_exceeded="finish")` can spend no more: the run ends
    there, completed, the step that asked for more left undone."""


class Spending:
    """What a run has spent so far, against its budget."""

    __slots__ = ("cost", "ended_by", "input_tokens", "model_calls", "output_tokens", "tool_calls")

    def __init__(self) -> None:
        self.model_calls = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.ended_by: str | None = None  # the limit that ended the run, once one has

    def spent(self, limit: str) -> float:
        """What `limit` counts: calls, tokens or dollars."""
        if limit == "max_model_calls":
            return self.model_calls
        if limit == "max_tool_calls":
            return self.tool_calls
        if limit == "max_input_tokens":
            return self.input_tokens
        if limit == "max_output_tokens":
            return self.output_tokens
        if limit == "max_total_tokens":
            return self.input_tokens + self.output_tokens
        return self.cost

    def used_up(self, budget: Budget, *, tools: bool = False) -> str | None:
        """The first limit of `budget` with nothing left for a model call (`tools`: for a
        tool call), or None."""
        for name in LIMITS:
            limit = getattr(budget, name)
            if limit is None or (name == "max_tool_calls") != tools:
                continue
            if self.spent(name) >= limit:
                return name
        return None

    def model_calls_left(self, budget: Budget) -> int | None:
        limit = budget.max_model_calls
        return None if limit is None else max(0, limit - self.model_calls)

    def tool_calls_left(self, budget: Budget) -> int | None:
        limit = budget.max_tool_calls
        return None if limit is None else max(0, limit - self.tool_calls)

    def output_tokens_left(self, budget: Budget) -> int | None:
        """The most output tokens the next call may produce, by the token limits."""
        left = [
            limit - spent
            for limit, spent in (
                (budget.max_output_tokens, self.output_tokens),
                (budget.max_total_tokens, self.input_tokens + self.output_tokens),
            )
            if limit is not None
        ]
        return None if not left else max(0, min(left))

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        """What a model call's answer says it used (the call was counted when it was let
        through: `Meter.model_gate`)."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost += cost or 0.0

    def dump(self) -> dict[str, Any]:
        """As the thread keeps it (JSON)."""
        return {
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
        }

    def restore(self, saved: Any) -> None:
        """Go on from what a paused or interrupted run had spent (as `dump` wrote it)."""
        if not isinstance(saved, dict):
            return
        for name in ("model_calls", "tool_calls", "input_tokens", "output_tokens"):
            value = saved.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, name, value)
        cost = saved.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost):
            self.cost = float(cost)


class Gate:
    """How the next model call may go: with tools or not (a final answer, asked for with
    `note`), and the most output tokens it may produce (None: as the Agent says)."""

    __slots__ = ("max_tokens", "note", "tools")

    def __init__(
        self, tools: bool = True, note: str | None = None, max_tokens: int | None = None
    ) -> None:
        self.tools = tools
        self.note = note
        self.max_tokens = max_tokens


class Meter:
    """A run's budget and what it has spent: asked before each model call and each step of
    tool calls; shared by the run with the subgraphs it runs. With a thread budget, `budget`
    holds the tighter of the run's limits and what the thread has left (`thread`)."""

    __slots__ = ("budget", "spending", "thread")

    def __init__(
        self,
        budget: Budget | None,
        spending: Spending | None = None,
        thread: ThreadAllowance | None = None,
    ) -> None:
        self.budget = budget
        self.spending = spending if spending is not None else Spending()
        self.thread = thread

    def _rules(self, limit: str, budget: Budget) -> tuple[Budget, str]:
        """Whose `limit` it is, as `budget` (the limits a call is under) holds it: the
        budget whose `on_exceeded` and `final_answer` apply, and the limit's reported name
        (``thread.<limit>`` for the thread's)."""
        thread = self.thread
        if thread is not None and thread.holds(limit, getattr(budget, limit)):
            return thread.budget, f"thread.{limit}"
        return budget, limit

    def _error(self, limit: str, budget: Budget, what: str) -> BudgetExceededError:
        if self.thread is not None and self._rules(limit, budget)[1] != limit:
            return self.thread.exceeded(limit, self.spending, what)
        return exceeded_error(limit, budget, self.spending, what)

    @property
    def counts_tools(self) -> bool:
        """Whether the run's budget limits tool calls."""
        return self.budget is not None and self.budget.max_tool_calls is not None

    def within(self, own: Budget | None) -> Budget | None:
        """The limits that hold for a call: the run's and those of the node making it."""
        if own is None:
            return self.budget
        return own if self.budget is None else self.budget.tightest(own)

    def model_gate(self, own: Budget | None = None) -> Gate | None:
        """Before a model call: None to go on as usual, a `Gate` saying how, or the end of
        the run (`BudgetSpent`, or `BudgetExceededError` with `on_exceeded="error"`)."""
        budget = self.within(own)
        if budget is None:
            return None
        spending = self.spending
        used = spending.used_up(budget)
        if used is not None:
            rules, spending.ended_by = self._rules(used, budget)
            if rules.on_exceeded == "error":
                raise self._error(used, budget, "the next model call")
            raise BudgetSpent(spending.ended_by)
        final = spending.used_up(budget, tools=True)
        if final is None and spending.model_calls_left(budget) == 1:
            final = "max_model_calls"  # the last call: for the answer, not for more tools
        note = None
        if final is not None:
            rules, name = self._rules(final, budget)
            if rules.on_exceeded == "finish":  # (with "error", the call goes as usual)
                spending.ended_by = name
                if not rules.final_answer:
                    raise BudgetSpent(name)
                whose = "run's" if name == final else "conversation's"
                note = FINAL_NOTE.format(whose=whose, limit=final)
        # counted now, not when it answers: calls made at the same time (parallel nodes)
        # cannot all take the last one
        spending.model_calls += 1
        left = spending.output_tokens_left(budget)
        if note is not None:
            return Gate(False, note, left)
        return Gate(max_tokens=left)

    def allot_tools(self, wanted: list[str]) -> list[str]:
        """Of the tool calls `wanted` (ids, in the model's order), those the budget has no
        room for; the others are counted as spent now."""
        budget = self.budget
        left = None if budget is None else self.spending.tool_calls_left(budget)
        if left is None:
            return []
        refused = wanted[left:]
        if refused and budget is not None:
            rules, _ = self._rules("max_tool_calls", budget)
            if rules.on_exceeded == "error":
                raise self._error("max_tool_calls", budget, f"tool call(s) {refused}")
        self.spending.tool_calls += len(wanted) - len(refused)
        return refused

    def tool_limit(self) -> str:
        """The tool-call limit the run's calls are under, as a refused call's result says."""
        budget = self.budget
        limit = None if budget is None else budget.max_tool_calls
        if budget is not None and self._rules("max_tool_calls", budget)[1] != "max_tool_calls":
            assert self.thread is not None
            whole = self.thread.budget.max_tool_calls
            return f"this thread's tool-call budget (max_tool_calls={whole} over all its runs)"
        return f"this run's tool-call budget (max_tool_calls={limit})"

    def tool_paused(self) -> None:
        """A counted tool call paused (an `interrupt()`): it runs again, counted then."""
        if self.counts_tools:
            self.spending.tool_calls -= 1

    def keep(self, internal: dict[str, Any], completed: bool) -> None:
        """Write what the run has spent into the thread's state (saved with the step)."""
        if completed:
            internal.pop(SPENT_KEY, None)
        else:
            internal[SPENT_KEY] = self.spending.dump()
        if self.spending.ended_by is not None:
            internal[ENDED_KEY] = self.spending.ended_by

    def report(self) -> dict[str, Any] | None:
        """`result["budget"]` when a limit ended the run: the limit (``thread.<limit>`` for a
        thread budget's), whose it was (`scope`), the run's own limits and what it spent;
        with a thread budget, `thread`: its limits and the thread's totals."""
        ended = self.spending.ended_by
        if ended is None:
            return None
        thread = self.thread
        own = self.budget if thread is None else thread.run_budget
        report: dict[str, Any] = {
            "ended_by": ended,
            "scope": "thread" if ended.startswith("thread.") else "run",
            "limits": {} if own is None else own.limits(),
            "spent": self.spending.dump(),
        }
        if thread is not None:
            limits = thread.budget.limits()
            report["thread"] = {"limits": limits, "spent": thread.totals(self.spending)}
        return report


def exceeded_error(
    limit: str, budget: Budget, spending: Spending, what: str
) -> BudgetExceededError:
    value = getattr(budget, limit)
    return BudgetExceededError(
        f"The run's budget {limit}={value} would be exceeded ({spending.spent(limit):g} spent), "
        f"so {what} did not go ahead. Raise the limit (compile(budget=...), "
        "Agent(budget=...) or config), or use Budget(on_exceeded='finish') to end the run "
        "with a final answer instead",
        "BUDGET_001",
        {"limit": limit, "max": value, "spent": spending.dump()},
    )


__all__ = [
    "ENDED_KEY",
    "FINAL_NOTE",
    "LIMITS",
    "SPENT_KEY",
    "BudgetSpent",
    "Gate",
    "Meter",
    "Spending",
    "exceeded_error",
]
