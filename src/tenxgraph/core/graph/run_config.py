"""A run's config: the keys the runtime reads, the check that catches the ones it cannot, and
`RunSettings`, the parts the engine itself uses.

Any other key is the caller's own data, passed on to nodes, conditions and tools that take
`config`. A key that looks like one of ours but is misspelt, or one that peers read but we do
not (run budgets), is refused: silently ignoring `max_tool_calls=3` would run 50 tools.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tenxgraph.core.state.message import generate_id
from tenxgraph.core.state.spending import LIMITS
from tenxgraph.core.state.stream_chunks import StreamEvent
from tenxgraph.storage.checkpointer.thread_ids import valid_thread_id
from tenxgraph.utils.constants import (
    DEFAULT_ANONYMOUS_USER_ID,
    DEFAULT_ENQUEUE_TIMEOUT_SECONDS,
    DEFAULT_NODE_TIMEOUT_SECONDS,
    DEFAULT_RECURSION_LIMIT,
    ResponseGranularity,
)
from tenxgraph.utils.record import Record

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget

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
        "hooks",  # RunHooks told about this run, besides the graph's own
        "max_concurrency",  # nodes of one step running at once (Sends, parallel branches)
        "budget",  # a Budget (or a dict of its fields) for this run
        *LIMITS,  # its limits one by one
        "thread_budget",  # a Budget (or a dict of its fields) for the thread's runs together
        # the caller's own values, by LangGraph's convention; never checked
        "configurable",
        # Agent: model settings for every Agent of the run, and per Agent node
        "model_settings",
        "model_settings_by_node",
        # ToolNode
        "max_parallel_tools",
        "tool_timeout",
    }
)

#: keys other frameworks read that tenxgraph does not: a run must not pretend to obey them
_NOT_SUPPORTED = {
    "max_llm_calls": "max_model_calls",
    "max_requests": "max_model_calls",
    "max_turns": "max_model_calls",
    "request_limit": "max_model_calls",
    "max_tokens": "max_total_tokens or max_output_tokens (a run's budget; one answer's length "
    "is a model setting)",
    "usage_limits": "budget",
    "stream_mode": None,
}

_UNSEEN = "?"
_verdicts: dict[str, str | None] = {}  # key -> why it is refused (None: accepted)


def check_config_keys(config: dict[str, Any]) -> None:
    """Refuse misspelt runtime keys and keys of features tenxgraph does not have, and model
    settings with unknown names (before any node runs)."""
    for key in config:
        if key in KNOWN_CONFIG_KEYS:
            if key in _MODEL_SETTINGS_KEYS:
                _check_model_settings(config)
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


_MODEL_SETTINGS_KEYS = frozenset({"model_settings", "model_settings_by_node"})


def _check_model_settings(config: dict[str, Any]) -> None:
    from tenxgraph.core.llm import settings

    settings.checked(
        config.get(settings.RUN_SETTINGS_KEY), f"config[{settings.RUN_SETTINGS_KEY!r}]"
    )
    by_node = config.get(settings.NODE_SETTINGS_KEY)
    if by_node is None:
        return
    if not isinstance(by_node, dict):
        raise TypeError(
            f"config[{settings.NODE_SETTINGS_KEY!r}] must be a dict of node name -> model "
            f"settings, not {type(by_node).__name__}"
        )
    for node, given in by_node.items():
        settings.checked(given, f"config[{settings.NODE_SETTINGS_KEY!r}][{node!r}]")


def _problem(key: str) -> str | None:
    if key in _NOT_SUPPORTED:
        instead = _NOT_SUPPORTED[key]
        if instead is None:
            return "is not supported: it would be silently ignored"
        return f"is not a key tenxgraph reads, so it would be silently ignored; use {instead}"
    import difflib  # only for a key tenxgraph does not know

    close = difflib.get_close_matches(key, KNOWN_CONFIG_KEYS, n=1, cutoff=0.8)
    if close:
        return f"is not a key tenxgraph reads; did you mean {close[0]!r}?"
    return None


WANTED: dict[ResponseGranularity, frozenset[StreamEvent]] = {
    ResponseGranularity.LOW: frozenset(
        {StreamEvent.MESSAGE, StreamEvent.ERROR, StreamEvent.CUSTOM}
    ),
    ResponseGranularity.PARTIAL: frozenset(
        {StreamEvent.MESSAGE, StreamEvent.ERROR, StreamEvent.STATE, StreamEvent.CUSTOM}
    ),
    ResponseGranularity.FULL: frozenset(StreamEvent),
}


class RunSettings(Record):
    """The parts of a run's config the engine itself reads."""

    __match_args__ = (
        "thread_id",
        "run_id",
        "recursion_limit",
        "node_timeout",
        "node_config",
        "checkpoint_version",
        "multitask_strategy",
        "enqueue_timeout",
        "max_concurrency",
        "nested",
        "budget",
        "thread_budget",
    )
    __slots__ = __match_args__

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        recursion_limit: int,
        node_timeout: float | None,
        node_config: dict[str, Any],
        checkpoint_version: int | None = None,
        # what this run does when another run holds its thread: "reject", "enqueue",
        # "interrupt"
        multitask_strategy: str = "reject",
        enqueue_timeout: float | None = DEFAULT_ENQUEUE_TIMEOUT_SECONDS,
        max_concurrency: int | None = None,  # nodes of one step at once (None: all)
        nested: bool = False,  # the run of a subgraph node, inside its parent's step
        budget: Budget | None = None,  # this run's own limits (the graph's apply too)
        # limits on what the thread's runs spend together (the graph's apply too)
        thread_budget: Budget | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.recursion_limit = recursion_limit
        self.node_timeout = node_timeout
        self.node_config = node_config
        self.checkpoint_version = checkpoint_version
        self.multitask_strategy = multitask_strategy
        self.enqueue_timeout = enqueue_timeout
        self.max_concurrency = max_concurrency
        self.nested = nested
        self.budget = budget
        self.thread_budget = thread_budget

    @classmethod
    def from_config(cls, config: dict[str, Any] | None, streaming: bool) -> RunSettings:
        given = dict(config or {})
        found = given.get("thread_id")  # none: a new thread with a random id
        thread_id = str(uuid.uuid4()) if found is None else valid_thread_id(found)
        run_id = str(given.get("run_id") or generate_id())
        limit = given.get("recursion_limit", DEFAULT_RECURSION_LIMIT)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"config['recursion_limit'] must be a positive int, got {limit!r}")
        timeout = given.get("node_timeout", DEFAULT_NODE_TIMEOUT_SECONDS)
        if timeout is not None and not isinstance(timeout, (int, float)):
            raise ValueError(f"config['node_timeout'] must be seconds or None, got {timeout!r}")
        given.update(thread_id=thread_id, run_id=run_id, recursion_limit=limit, is_stream=streaming)
        given.setdefault("user_id", DEFAULT_ANONYMOUS_USER_ID)
        given.setdefault("node_timeout", timeout)
        fork = given.get("checkpoint_version")
        if fork is not None and (not isinstance(fork, int) or isinstance(fork, bool) or fork < 1):
            raise ValueError(f"config['checkpoint_version'] must be a version number, got {fork!r}")
        strategy = given.get("multitask_strategy", "reject")
        if strategy not in MULTITASK_STRATEGIES:
            raise ValueError(
                f"config['multitask_strategy'] must be one of {list(MULTITASK_STRATEGIES)}, got "
                f"{strategy!r}: what a run does when another run holds its thread"
            )
        wait = given.get("enqueue_timeout", DEFAULT_ENQUEUE_TIMEOUT_SECONDS)
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, int | float)):
            raise ValueError(f"config['enqueue_timeout'] must be seconds or None, got {wait!r}")
        at_once = given.get("max_concurrency")
        if at_once is not None and (
            not isinstance(at_once, int) or isinstance(at_once, bool) or at_once < 1
        ):
            raise ValueError(
                f"config['max_concurrency'] must be a positive int or None, got {at_once!r}: "
                "how many nodes of one step run at once"
            )
        check_config_keys(given)
        budget = _budget_of(given)
        thread_budget = _thread_budget_of(given)
        return cls(
            thread_id,
            run_id,
            limit,
            timeout if timeout else None,
            given,
            fork,
            strategy,
            wait,
            at_once,
            budget=budget,
            thread_budget=thread_budget,
        )


def _budget_of(config: dict[str, Any]) -> Budget | None:
    """The run's budget from `config["budget"]` and the flat `max_...` keys."""
    given = config.get("budget")
    flat = {key: config[key] for key in LIMITS if key in config}
    if given is None and not flat:
        return None
    from tenxgraph.core.state.budget import Budget

    budget = Budget.of(given, "config['budget']") or Budget()
    return budget.tightest(replace(budget, **flat)) if flat else budget


def _thread_budget_of(config: dict[str, Any]) -> Budget | None:
    """`config["thread_budget"]`: limits on the thread's runs together."""
    given = config.get("thread_budget")
    if given is None:
        return None
    from tenxgraph.core.state.budget import Budget

    return Budget.of(given, "config['thread_budget']")


__all__ = [
    "KNOWN_CONFIG_KEYS",
    "MULTITASK_STRATEGIES",
    "WANTED",
    "RunSettings",
    "check_config_keys",
]
