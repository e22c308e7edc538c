"""`Opening`: a run's start on its thread, up to its first save.

Load (or create) the thread's state, apply the run's input to it (new messages, field values,
or the answer to the interrupt the thread is paused at) and save it, which takes the thread's
lease. When another run holds the thread, the run's multitask strategy decides what happens;
nothing is written until the lease is ours. A turn sent again (a retry after a lost answer) is
recognised here and never becomes a second turn.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import StaleStateError, ThreadBusyError
from tenxgraph.core.graph.keeper import Keeper
from tenxgraph.core.graph.merge import assign, copy_message, input_messages, log_entries, set_fields
from tenxgraph.core.graph.program import Program
from tenxgraph.core.graph.run_config import RunSettings
from tenxgraph.core.graph.threads import Threads, log
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.agent_state import RESERVED_FIELDS
from tenxgraph.core.state.execution_state import ExecutionStatus, StopRequestStatus
from tenxgraph.core.state.lazy_history import LazyHistory
from tenxgraph.core.state.reducers import all_stored, append_messages
from tenxgraph.core.state.spending import ENDED_KEY, SPENT_KEY, Spending
from tenxgraph.core.state.thread_spending import (
    THREAD_PREFIX,
    ThreadAllowance,
    thread_spent,
    with_thread,
)
from tenxgraph.storage.checkpointer.lease import owner_is_dead, waited_error
from tenxgraph.storage.checkpointer.paging import alook_up_ids
from tenxgraph.utils.constants import START

if TYPE_CHECKING:
    from tenxgraph.core.state.budget import Budget
    from tenxgraph.observability.observer import Observer

_PREPARE_ATTEMPTS = 20  # reads of a thread that moved under the run's first save, at most
_WAIT_POLL_SECONDS = (0.005, 0.25)  # first and longest pause while waiting for a thread
_INPUT_KEYS = frozenset({"messages", "state", "resume"})


class Opening:
    """What starting the run found: where to continue, and what was given."""

    def __init__(
        self,
        program: Program,
        threads: Threads,
        keeper: Keeper,
        settings: RunSettings,
        input_data: dict[str, Any] | None,
    ) -> None:
        self.program = program
        self.threads = threads
        self.keeper = keeper
        self.settings = settings
        self.input_data = input_data
        self.given: list[Message] = []  # the input messages, as the caller gave them
        self.version: int | None = None  # the version the first save wrote
        self.next_names: list[str] | None = None  # an unfinished run's next step
        self.deferred: list[str] = []
        self.skip_breakpoint = False  # resumed from an `interrupt_before` pause
        # a resubmitted turn that is already answered: its stored answer, run nothing
        self.replay: list[Message] | None = None
        # what the thread's runs may spend together (a subgraph's run spends its parent's)
        self.thread_budget: Budget | None = None
        self.spent: str | None = None  # the thread's limit spent before the run: it ends
        if not settings.nested:
            graphs, given = program.thread_budget, settings.thread_budget
            self.thread_budget = given if graphs is None else graphs.tightest(given)

    async def open(self, deadline: float | None) -> AgentState:
        """The thread's state with the input applied and saved. When another run holds the
        thread: fail (`reject`), wait for it (`enqueue`), or stop it and wait
        (`interrupt`)."""
        checkpointer = self.program.checkpointer
        strategy = self.settings.multitask_strategy
        moved = 0
        while True:
            try:
                return await self._open_once()
            except ThreadBusyError as busy:
                assert checkpointer is not None  # only a checkpointer has leases
                holder = str(busy.context.get("holder") or "")
                if owner_is_dead(holder):  # crashed on this machine: no need to wait
                    _taking_over(self.settings.thread_id, holder)
                    await checkpointer.arelease_lease(self.settings.thread_id, holder)
                    continue
                if strategy == "reject":
                    raise
                log.info(
                    "thread %s is held by run %s (another app or process): %s",
                    self.settings.thread_id, holder,
                    "asking it to stop, then waiting" if strategy == "interrupt" else "waiting",
                )  # fmt: skip
                if strategy == "interrupt":
                    await checkpointer.arequest_stop(self.settings.thread_id)
                await self._wait_for_thread(deadline)
            except StaleStateError:
                # the thread moved between our read and our first save (another run ended
                # just then); nothing was written, so read it again
                moved += 1
                if moved >= _PREPARE_ATTEMPTS:
                    raise

    async def _wait_for_thread(self, deadline: float | None) -> None:
        """Wait until no live lease holds the thread (or its holder is found dead)."""
        checkpointer = self.program.checkpointer
        assert checkpointer is not None
        thread_id = self.settings.thread_id
        pause, longest = _WAIT_POLL_SECONDS
        while True:
            holder = await checkpointer.alease_holder(thread_id)
            if holder is None:
                return
            if owner_is_dead(holder.owner):
                _taking_over(thread_id, holder.owner)
                await checkpointer.arelease_lease(thread_id, holder.owner)
                return
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise waited_error(thread_id, holder.owner, self.settings.enqueue_timeout)
            await asyncio.sleep(min(pause, holder.expires_in, left or pause) + 0.001)
            pause = min(pause * 2, longest)

    async def _open_once(self) -> AgentState:
        program = self.program
        thread_id = self.settings.thread_id
        self.next_names, self.deferred, self.skip_breakpoint = None, [], False
        state, version, source = await self.threads.checkout(
            thread_id, self.settings.checkpoint_version, _input_ids(self.input_data)
        )
        forked = source == "fork"
        data = _checked_input(self.input_data)
        self.given = given = input_messages(data.get("messages"))
        # the thread keeps copies: the caller may go on using (and changing) its objects
        messages = [copy_message(m) for m in given]
        if version is None and "resume" in data:
            raise ValueError(
                f"Nothing to resume: thread {thread_id!r} has no stored state (it is new). "
                "Send {'messages': [...]} to start a run"
            )
        # (a subgraph's run may start from its fields alone)
        if version is None and not messages and not self.settings.nested:
            raise ValueError(
                "Input data must contain 'messages' for new execution: this thread "
                f"({thread_id!r}) has no stored state, so the run needs at least one message, "
                "e.g. {'messages': [Message.text_message('Hello')]}"
            )
        if messages and type(state.context) is LazyHistory:  # which the store holds
            await alook_up_ids(state.context, messages)
        new_turn = bool(messages)
        resent = version is not None and new_turn and not forked and data.keys() == {"messages"}
        if resent and program.append_only and all_stored(state.context, messages):
            # sent again (a retry after a lost answer or a timeout): never a second turn.
            # Answered: that answer again; its run unfinished: continue that run.
            self.replay = answer_to(state, messages[-1])
            if self.replay is not None:
                self.version = version
                return state
            messages, new_turn = [], False
        self._refuse_if_spent(state)
        if version is not None:  # a thread that ran before: where did it stop?
            self._continue(state, data, new_turn)
        updates = data.get("state")
        if updates:
            self._set_input_fields(state, updates)
        meta = state.execution_meta
        set_fields(
            meta,
            status=ExecutionStatus.RUNNING,
            thread_id=thread_id,
            interrupted_node=None,
            interrupt_reason=None,
            interrupt_data=None,
            stop_current_execution=StopRequestStatus.NONE,
        )
        if self.next_names is None:
            set_fields(meta, current_node=START)
        meta.internal_data.pop("error", None)
        before = state.context
        appended = None
        if messages and program.append_only and source == "read" and type(before) is LazyHistory:
            appended = append_messages(before, messages)  # read for this run: held by it alone
        elif messages:
            set_fields(state, context=program.merge_messages(before, messages))
        if forked:  # a fork from an earlier version rewrites the log to that version's history
            added = None
        elif appended is not None:
            added = appended
        else:
            added = log_entries(before, state.context, program.append_only, version is None)
        self.version = await self.keeper.save(state, version, added)
        checkpointer = program.checkpointer
        # a stop asked for while no run held the thread is not meant for this one (a store
        # may have cleared it with the save that took the lease)
        if (
            version is not None
            and checkpointer is not None
            and not checkpointer.lease_clears_stop_requests
            and await checkpointer.ais_stop_requested(thread_id)
        ):
            await checkpointer.aclear_stop_request(thread_id)
        return state

    def _refuse_if_spent(self, state: AgentState) -> None:
        """With a thread budget's `on_exceeded="error"`: refuse a run of a thread that has
        reached one of its limits before anything of the run is written."""
        budget = self.thread_budget
        if budget is None or budget.on_exceeded != "error":
            return
        allowance = ThreadAllowance(budget, thread_spent(state.execution_meta.usage), Spending())
        reached = allowance.reached()
        if reached is not None:
            what = "this run (nothing of it was stored)"
            raise allowance.exceeded(reached, Spending(), what)

    def opened(self, state: AgentState, observer: Observer) -> None:
        """Once open: a paused run's `observer` goes on from its span and what it had spent;
        with a thread budget, the run's limits become the tighter of its own and what the
        thread has left, and `spent` names the thread's limit that leaves no model call at
        all, if one does (the run ends before its first step; with `on_exceeded="error"` it
        was refused before anything was stored)."""
        if self.next_names is not None:  # continuing a paused run: link the two
            observer.resumed(state.execution_meta.internal_data)
        budget = self.thread_budget
        if budget is None or self.replay is not None:
            return
        meter, allowance = with_thread(observer.meter, budget, state.execution_meta.usage)
        observer.meter = meter
        reached = allowance.reached(tools=False)
        if reached is not None:
            self.spent = meter.spending.ended_by = THREAD_PREFIX + reached

    def _continue(self, state: AgentState, data: dict[str, Any], new_turn: bool) -> None:
        """For a thread that ran before: take the answer to the interrupt it is paused at,
        refuse a new turn while it waits for one, and find where its unfinished run stopped."""
        thread_id = self.settings.thread_id
        meta = state.execution_meta
        internal = meta.internal_data
        interrupted = meta.is_interrupted()
        asked = meta.interrupt_data or {}
        waiting = interrupted and bool(asked)
        if "resume" in data:
            if not interrupted:
                raise ValueError(
                    f"Nothing to resume: thread {thread_id!r} is not paused (status "
                    f"{meta.status.value}). Send {{'messages': [...]}} to start a run"
                )
            if waiting:
                # the node that paused may refuse an answer it cannot use (a ToolNode: a
                # decision missing for a pending tool call), before anything is written
                node = self.program.specs.get(str(asked.get("node")))
                check = getattr(type(node.func), "check_resume", None) if node else None
                if node is not None and check is not None:
                    check(node.func, asked, data["resume"])
                scope = str(asked["key"]).rsplit(":", 1)[0]
                internal.setdefault("answers", {}).setdefault(scope, []).append(data["resume"])
        elif waiting:
            raise ValueError(
                f"Thread {thread_id!r} is paused at an interrupt in {asked.get('node')!r} "
                f"({asked.get('reason')}: {asked.get('message') or asked.get('value')!r}). "
                "Resume it with {'resume': <answer>}"
            )
        # Continue the thread's unfinished run (paused, stopped, crashed or failed) when the
        # input brings no new turn; new messages start a new run, even after a failure (the
        # failed step stays in the thread's history; `ainvoke(None, config)` retries it).
        unfinished = meta.status != ExecutionStatus.COMPLETED and not new_turn
        # where the unfinished run stopped; without a record it never finished its first
        # step (the process died in it), so it starts again from START
        if unfinished and "next" in internal:
            self.next_names = list(internal["next"])
            self.deferred = list(internal.get("deferred") or ())
        else:  # a new run: the last one's bookkeeping must not steer it
            for key in ("next", "deferred", "answers", SPENT_KEY, ENDED_KEY):
                internal.pop(key, None)
        self.skip_breakpoint = meta.interrupt_reason == "interrupt_before"

    def _set_input_fields(self, state: AgentState, updates: Any) -> None:
        """`input['state']`: field values set (validated) before the run starts."""
        if not isinstance(updates, dict):
            raise ValueError("input['state'] must be a dict of field names to values")
        reserved = RESERVED_FIELDS.intersection(updates)
        if reserved:
            raise ValueError(
                f"input['state'] cannot set {sorted(reserved)}: they belong to the runtime. "
                "Send conversation turns in input['messages']; use your own fields for your data"
            )
        fields = self.program.fields
        for name, value in updates.items():
            if name not in fields:
                raise ValueError(
                    f"input['state'] names unknown field {name!r}; "
                    f"{type(state).__name__} has {sorted(fields - RESERVED_FIELDS)}"
                )
            assign(state, name, value, "input['state']")


def _taking_over(thread_id: str, holder: str) -> None:
    log.info("thread %s: its holder %s is gone (its process ended); taking it over", thread_id,
             holder)  # fmt: skip


def _checked_input(data: Any) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(
            "Input must be a dict like {'messages': [Message, ...], 'state': {...}}, "
            f"not {type(data).__name__}"
        )
    if not _INPUT_KEYS.issuperset(data):
        unknown = set(data) - _INPUT_KEYS
        raise ValueError(
            f"Unknown input key(s) {sorted(unknown)}; the input takes 'messages', 'state' "
            "and 'resume'"
        )
    return data


def _input_ids(data: Any) -> list[str | int]:
    """The ids of the input's messages, looked up in the store as the thread is loaded (what
    is wrong with an input is said after the load, by `_checked_input`)."""
    value = data.get("messages") if isinstance(data, dict) else None
    if isinstance(value, Message):
        return [value.message_id]
    if not isinstance(value, list | tuple):
        return []
    return [m.message_id for m in value if isinstance(m, Message)]


def answer_to(state: AgentState, message: Message) -> list[Message] | None:
    """The stored answer to a user turn: the messages after it, up to the next user message.
    None if its run has not finished (it is the last turn and the thread is not completed)."""
    context = state.context
    wanted = message.message_id
    at = next((i for i in range(len(context) - 1, -1, -1) if context[i].message_id == wanted), -1)
    if at < 0:
        return None
    after = context[at + 1 :]
    following = next((i for i, m in enumerate(after) if m.role == "user"), None)
    if following is not None:
        return list(after[:following])
    if state.execution_meta.status == ExecutionStatus.COMPLETED:
        return list(after)
    return None


__all__ = ["Opening", "answer_to"]
