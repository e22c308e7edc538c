"""Scenario `messages`: building text messages and merging one message into a history.

    python benchmarks/run.py messages

Measures (lower is better):
- build_100k_ms: build 100,000 text messages the documented way (`Message.text_message`;
  LangGraph: `HumanMessage`/`AIMessage`).
- merge_cold_N_us: `add_messages(history, [one new message])` where `history` is a plain list of
  N messages (as loaded from storage; tenxgraph builds its id index on this first merge).
- merge_warm_N_us: the same merge where `history` came out of the previous `add_messages` (what
  the engine does every step). LangGraph and 10xgraph keep no index, so warm equals cold for them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

SIZES = (10, 1_000, 10_000)


def timed(fn: Callable[[], Any], inner: int, batches: int = 5) -> float:
    """Median over batches of the mean microseconds per call."""
    results = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        results.append((time.perf_counter() - start) / inner * 1e6)
    return statistics.median(results)


def timed_warm(
    make: Callable[[str, int], Any],
    add_messages: Callable[[Any, Any], Any],
    history: list[Any],
    framework: str,
    batches: int = 40,
) -> float:
    """Median per-merge microseconds over batches of a few merges into a history that came
    out of `add_messages` (set up untimed), so its size stays close to len(history)."""
    steps = max(5, min(50, len(history) // 10))
    results = []
    for b in range(batches):
        fresh = [make(f"warm {b} {i}", i) for i in range(steps)]
        if framework == "langgraph":  # LangGraph assigns ids inside add_messages; pre-assign
            for i, m in enumerate(fresh):
                m.id = f"w{b}-{i}"
        tip = add_messages(history, [])
        start = time.perf_counter()
        for m in fresh:
            tip = add_messages(tip, [m])
        results.append((time.perf_counter() - start) / steps * 1e6)
    return statistics.median(results)


def frameworks(name: str) -> tuple[Callable[[str, int], Any], Callable[[Any, Any], Any]]:
    """(make_message(text, i), add_messages) for a framework."""
    if name == "langgraph":
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.graph.message import add_messages

        def make_lc(text: str, i: int) -> Any:
            return HumanMessage(content=text) if i % 2 == 0 else AIMessage(content=text)

        return make_lc, add_messages
    from tenxgraph.core.state import Message, add_messages  # ours, or 10xgraph's in its env

    def make(text: str, i: int) -> Any:
        return Message.text_message(text, "user" if i % 2 == 0 else "assistant")

    return make, add_messages


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--framework", required=True)
    args = parser.parse_args()
    make, add_messages = frameworks(args.framework)
    out: dict[str, float] = {}

    start = time.perf_counter()
    built = [make(f"message number {i}", i) for i in range(100_000)]
    out["build_100k_ms"] = (time.perf_counter() - start) * 1e3

    if args.framework == "langgraph":  # LangGraph assigns ids inside add_messages; pre-assign
        for i, m in enumerate(built):
            m.id = f"m{i}"
    for n in SIZES:
        history = list(built[:n])
        new = [make("one more", 1)]
        inner = max(20, 20_000 // n)
        out[f"merge_cold_{n}_us"] = timed(lambda h=history, m=new: add_messages(h, m), inner)
        out[f"merge_warm_{n}_us"] = timed_warm(make, add_messages, history, args.framework)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
