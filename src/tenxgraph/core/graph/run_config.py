"""The keys of a run's config the runtime reads, and the check that catches the ones it cannot.

Any other key is the caller's own data, passed on to nodes, conditions and tools that take
`config`. A key that looks like one of ours but is misspelt, or one that peers read but we do
not (run budgets), is refused: silently ignoring `max_tool_calls=3` would run 50 tools.
"""

from __future__ import annotations

from typing import Any

#: what a run does when another run holds its thread (the names of LangGraph's server)
MULTITASK_STRATEGIES = ("reject", "enqueue", "interrupt")

#: every config key a part of tenxgraph reads
KNOWN_CONFIG_KEYS = frozenset(
    {
        # the engine
        "thread_id",
        "run_id",
        "user_id",
        "recursion_limit",
        "node_timeout",
        "checkpoint_version",
        "multitask_strategy",
        "enqueue_timeout",
        "is_stream",
        "timestamp",
        # the caller's own values, by LangGraph's convention; never checked
        "configurable",
        # ToolNode
        "max_parallel_tools",
        "tool_timeout",
    }
)

#: keys other frameworks read that tenxgraph does not (yet): a run must not pretend to obey
_NOT_SUPPORTED = frozenset(
    {
        "max_tool_calls",
        "max_model_calls",
        "max_llm_calls",
        "max_requests",
        "max_turns",
        "max_tokens",
        "max_input_tokens",
        "max_output_tokens",
        "max_total_tokens",
        "max_cost",
        "usage_limits",
        "budget",
        "stream_mode",
    }
)

_UNSEEN = "?"
_verdicts: dict[str, str | None] = {}  # key -> why it is refused (None: accepted)


def check_config_keys(config: dict[str, Any]) -> None:
    """Refuse misspelt runtime keys and keys of features tenxgraph does not have."""
    for key in config:
        if key in KNOWN_CONFIG_KEYS:
            continue
        if not isinstance(key, str):
            raise ValueError(f"config keys must be strings, got {key!r}")
        problem = _verdicts.get(key, _UNSEEN)
        if problem == _UNSEEN:
            problem = _problem(key)
            if len(_verdicts) < 4096:  # remembered: a run's own keys cost a lookup
                _verdicts[key] = problem
        if problem is not None:
            raise ValueError(
                f"config[{key!r}] {problem}. The keys tenxgraph reads are "
                f"{sorted(KNOWN_CONFIG_KEYS)}; any other key is passed as is to nodes and tools "
                "that take `config` (or put your own values under config['configurable'])"
            )


def _problem(key: str) -> str | None:
    if key in _NOT_SUPPORTED:
        return (
            "is not supported: tenxgraph has no such run limit, so it would be silently "
            "ignored (the recursion limit is config['recursion_limit'])"
        )
    import difflib  # only for a key tenxgraph does not know

    close = difflib.get_close_matches(key, KNOWN_CONFIG_KEYS, n=1, cutoff=0.8)
    if close:
        return f"is not a key tenxgraph reads; did you mean {close[0]!r}?"
    return None


__all__ = ["KNOWN_CONFIG_KEYS", "MULTITASK_STRATEGIES", "check_config_keys"]
