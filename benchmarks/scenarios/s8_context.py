"""S8: trimming a 10,000-message context, by message count and by token budget.

    python benchmarks/run.py s8_context --rounds 3 --peers langgraph

The context: a system message, then 5,000 user/assistant turns of about 25 words each.

- tenxgraph: `MessageContextManager(max_messages=10).trim_context(state)` (count mode); and
  `SummaryContextManager(FunctionModel(...), token_budget=8000, tokenizer_model=
  "openai/gpt-4o-mini")` (token mode, the summary model answers at once): `cold` on a fresh
  manager, which counts every message with litellm's tokenizer; `warm`, the same again
  (counts cached, the summary made again); `next_call`, one more user message after that
  summary, as the Agent's next model call sees it.
- langgraph: langchain-core's `trim_messages` with the same limits: `token_counter=len`,
  `max_tokens=20` messages (count mode), and `max_tokens=8000` counted by its own offline
  counter, `count_tokens_approximately` (characters / 4: less work than a tokenizer, and not
  exact). It has no cache, so cold, warm and next_call are the same work: one more trim.

Each check makes sure the result keeps the system message and ends with the last message.
Figures are medians in milliseconds (wall time; the work is CPU-bound).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from _common import emit, median

TURNS = 5_000
BUDGET = 8_000
WORDS = "the parcel for order {i} arrived on time but one item was missing from the box"


def texts() -> list[tuple[str, str]]:
    out = [("system", "You are a helpful support agent.")]
    for i in range(TURNS):
        out.append(("user", WORDS.format(i=i) + f" please check fact {i}"))
        out.append(("assistant", f"I looked at order {i}: " + WORDS[:50]))
    return out


def check(ok: object, what: str) -> None:
    if not ok:
        raise SystemExit(f"s8: {what}")


def timed(work: Callable[[], Any], runs: int) -> float:
    spent = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        spent.append((time.perf_counter() - start) * 1e3)
    return median(spent)


def tenxgraph(runs: int) -> dict[str, float]:
    from tenxgraph.core.llm import FunctionModel
    from tenxgraph.core.state import (
        AgentState,
        Message,
        MessageContextManager,
        SummaryContextManager,
    )

    history = [Message.text_message(text, role) for role, text in texts()]  # type: ignore[arg-type]
    state = AgentState(context=history)
    by_count = MessageContextManager(max_messages=10)

    def count_mode() -> None:
        view = by_count.trim_context(state)
        check(view.context[0].role == "system", "count mode lost the system message")
        check(view.context[-1] is history[-1], "count mode lost the last message")

    def manager() -> SummaryContextManager[AgentState]:
        return SummaryContextManager(
            FunctionModel(lambda messages, info: "summary of the older turns"),
            max_messages=100_000,
            token_budget=BUDGET,
            tokenizer_model="openai/gpt-4o-mini",
        )

    manager().count(history[:1])  # litellm's import and tokenizer load: not what we measure

    def token_mode(m: SummaryContextManager[AgentState]) -> AgentState:
        view = asyncio.run(m.atrim_context(state))
        check(view.context_summary, "token mode made no summary")
        check(view.context[-1] is history[-1], "token mode lost the last message")
        return view

    cold = []
    for _ in range(runs):
        fresh = manager()
        start = time.perf_counter()
        token_mode(fresh)
        cold.append((time.perf_counter() - start) * 1e3)
    warm_manager = manager()
    view = token_mode(warm_manager)
    after = state.model_copy(
        update={
            "context": [*history, Message.text_message("and one more thing")],
            "context_summary": view.context_summary,
            "execution_meta": view.execution_meta,
        }
    )

    def next_call() -> None:
        seen = asyncio.run(warm_manager.atrim_context(after))
        check(seen.context[-1] is after.context[-1], "the next call lost the new message")

    return {
        "count_trim_ms": timed(count_mode, runs),
        "token_trim_cold_ms": median(cold),
        "token_trim_warm_ms": timed(lambda: token_mode(warm_manager), runs),
        "token_next_call_ms": timed(next_call, runs),
    }


def langgraph(runs: int) -> dict[str, float]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, trim_messages
    from langchain_core.messages.utils import count_tokens_approximately as tokens

    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    history = [kinds[role](content=text) for role, text in texts()]

    def trim(**limits: Any) -> None:
        kept = trim_messages(
            history, strategy="last", start_on="human", include_system=True, **limits
        )
        check(isinstance(kept[0], SystemMessage), "trim_messages lost the system message")
        check(kept[-1] is history[-1], "trim_messages lost the last message")

    token_trim = timed(lambda: trim(max_tokens=BUDGET, token_counter=tokens), runs)
    return {
        "count_trim_ms": timed(lambda: trim(max_tokens=20, token_counter=len), runs),
        "token_trim_cold_ms": token_trim,
        "token_trim_warm_ms": token_trim,
        "token_next_call_ms": token_trim,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    work = {"tenxgraph": tenxgraph, "langgraph": langgraph}.get(args.framework)
    if work is None:
        raise SystemExit(f"s8: unknown framework {args.framework!r} (tenxgraph or langgraph)")
    emit(work(args.runs))


if __name__ == "__main__":
    main()
