"""`SummaryContextManager`: older messages are folded into a running summary by a model.

The history itself is never shortened: `state.context` keeps every message (and so does the
checkpointer). What changes is what the model sees: the system messages, the summary (sent
as a system note by the Agent) and the recent messages. Which messages the summary already
covers is remembered in `execution_meta.internal_data["context_summary"]`, as positions in
the append-only history, so each call only looks at what came after them.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tenxgraph.core.state.agent_state import AgentState
from tenxgraph.core.state.context_manager import BaseContextManager, log_trim
from tenxgraph.core.state.context_manager import log as context_log
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock
from tenxgraph.core.state.reducers import remove_tool_messages

if TYPE_CHECKING:
    from tenxgraph.core.llm.calling import Route
    from tenxgraph.core.llm.request import ModelClient
    from tenxgraph.core.llm.tokens import TokenCounter
    from tenxgraph.utils.sync_bridge import SyncBridge

S = TypeVar("S", bound=AgentState)

logger = logging.getLogger(__name__)

RECORD = "context_summary"  # the key in execution_meta.internal_data
SUMMARY_NOTE = "Summary of the earlier conversation:\n"  # how the Agent sends the summary

DEFAULT_SUMMARY_PROMPT = (
    "You keep the running summary of a conversation between a user and an assistant. "
    "Rewrite the summary so far together with the new messages into one updated summary. "
    "Keep every fact, name, number, date, preference, decision and open question the user "
    "gave, and what the assistant did or promised (tool results included). Drop small talk. "
    "Write plain sentences or short bullet points, in the conversation's language, without "
    "any preamble."
)


class SummaryContextManager(BaseContextManager[S]):
    """Summarise the older messages with `model` once the context the model would see has
    more than `max_messages` messages (system messages aside) or more than `token_budget`
    tokens; then keep the `keep_recent` most recent messages verbatim.

    `model` is any model an `Agent` takes (a litellm name, ``"test"``, a `FunctionModel`).
    `token_budget` is a number of tokens, or a fraction (0 < f <= 1) of the context window
    of `tokenizer_model` (default: `model`). Tokens are counted with that model's tokenizer
    where litellm knows it, tiktoken otherwise. A new summary folds in the previous one.
    Extra keyword arguments go to the summary model (api_base, temperature, ...).
    """

    def __init__(
        self,
        model: str | ModelClient,
        *,
        max_messages: int = 30,
        token_budget: int | float | None = None,
        keep_recent: int = 8,
        remove_tool_msgs: bool = False,
        summary_system_prompt: str | None = None,
        max_summary_tokens: int = 600,
        tokenizer_model: str | None = None,
        **llm_kwargs: Any,
    ) -> None:
        if keep_recent < 1:
            raise ValueError(f"keep_recent must be at least 1, got {keep_recent}")
        if max_messages <= keep_recent:
            raise ValueError(
                f"max_messages ({max_messages}) must be larger than keep_recent ({keep_recent}): "
                "a summary is made when the context grows past max_messages and keeps "
                "keep_recent messages"
            )
        if token_budget is not None and not token_budget > 0:
            raise ValueError(f"token_budget must be positive, got {token_budget}")
        if isinstance(token_budget, float) and token_budget > 1:
            raise ValueError(
                f"a float token_budget is a fraction of the context window (0 < f <= 1), got "
                f"{token_budget}; give a number of tokens as an int"
            )
        if max_summary_tokens < 1:
            raise ValueError(f"max_summary_tokens must be positive, got {max_summary_tokens}")
        self.model = model
        self.max_messages = max_messages
        self.token_budget = token_budget
        self.keep_recent = keep_recent
        self.remove_tool_msgs = remove_tool_msgs
        self.summary_system_prompt = summary_system_prompt or DEFAULT_SUMMARY_PROMPT
        self.max_summary_tokens = max_summary_tokens
        self.tokenizer_model = tokenizer_model or (model if isinstance(model, str) else None)
        self.llm_kwargs = llm_kwargs
        self._route: Route | None = None
        self._counter: TokenCounter | None = None
        self._budget: int | None = None
        self._loop_thread: SyncBridge | None = None  # for the sync trim_context

    # -- the two forms ---------------------------------------------------------------------

    def trim_context(self, state: S) -> S:
        """`atrim_context`, blocking; also works where an event loop is running: like a
        graph's `invoke`, it runs on this manager's own event-loop thread."""
        if self._loop_thread is None:
            from tenxgraph.utils.sync_bridge import SyncBridge

            self._loop_thread = thread = SyncBridge(f"summary-{id(self):x}")
            weakref.finalize(self, thread.stop)
        return self._loop_thread.run(self.atrim_context, state)

    async def atrim_context(self, state: S) -> S:
        return self._tidy(await self._trim(state, self.keep_recent, force=False))

    async def atrim_overflow(self, state: S) -> S:
        """After the model refused the context as too long: summarise now, keeping half as
        many recent messages."""
        return self._tidy(await self._trim(state, max(1, self.keep_recent // 2), force=True))

    def _tidy(self, view: S) -> S:
        if self.remove_tool_msgs:
            kept = remove_tool_messages(view.context)
            if len(kept) != len(view.context):
                view = view.model_copy(update={"context": kept})
        return view

    # -- how ---------------------------------------------------------------------------------

    @property
    def budget(self) -> int | None:
        """The token budget in tokens (a fraction resolved against the context window)."""
        if self.token_budget is None:
            return None
        if self._budget is None:
            if isinstance(self.token_budget, int):
                self._budget = self.token_budget
            else:
                from tenxgraph.core.llm.tokens import context_window

                window = context_window(self.tokenizer_model or "")
                if window is None:
                    raise ValueError(
                        f"token_budget={self.token_budget} is a fraction of the context window, "
                        f"but litellm does not know the window of {self.tokenizer_model!r}; give "
                        "tokenizer_model='provider/model' or a number of tokens"
                    )
                self._budget = max(1, int(window * self.token_budget))
        return self._budget

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of `messages` for the budget (each message is counted once)."""
        return self._counter_for().messages(list(messages))

    def _note_tokens(self, summary: str | None) -> int:
        """Tokens of the system note that carries `summary` to the model (with "", the note
        around a summary yet to come); 0 when there is no summary (None)."""
        if summary is None:
            return 0
        from tenxgraph.core.llm.tokens import MESSAGE_OVERHEAD

        return self._counter_for().text(SUMMARY_NOTE + summary) + MESSAGE_OVERHEAD

    def _counter_for(self) -> TokenCounter:
        if self._counter is None:
            from tenxgraph.core.llm.tokens import TokenCounter

            self._counter = TokenCounter(self.tokenizer_model)
        return self._counter

    async def _trim(self, state: S, keep: int, force: bool) -> S:
        context = state.context
        start, pinned = _covered(state)
        system = [context[i] for i in pinned]
        rest = context[start:]
        budget = self.budget
        if budget is not None:  # each message counted once for this call
            counter = self._counter_for()
            sizes = [counter.message(m) for m in rest]
            system_tokens = self.count(system)
        over = force or sum(m.role != "system" for m in rest) > self.max_messages
        if not over and budget is not None:
            over = system_tokens + sum(sizes) + self._note_tokens(state.context_summary) > budget
        if not over:
            return state if start == 0 else _view(state, [*system, *rest], None)
        cut = _safe_cut(rest, len(rest) - keep)
        if budget is not None:  # what stays verbatim must leave room for the summary
            note = self._note_tokens("") + self.max_summary_tokens  # the note to come, at most
            room = budget - note - system_tokens
            last = max((i for i, m in enumerate(rest) if m.role == "user"), default=len(rest) - 1)
            kept_tokens = sum(sizes[cut:])
            while cut < last and kept_tokens > room:  # the last turn always stays
                moved = min(_safe_cut(rest, cut + 1, forward=True), last)
                kept_tokens -= sum(sizes[cut:moved])
                cut = moved
        older = [m for m in rest[:cut] if m.role != "system"]
        if not older:
            return _view(state, [*system, *rest], None)
        summary = await self._summarize(state.context_summary, older)
        if not summary:  # nothing to stand in for those messages: keep them
            logger.warning("%r: the summary model returned no text; context not trimmed", self)
            return _view(state, [*system, *rest], None)
        pinned += [start + i for i, m in enumerate(rest[:cut]) if m.role == "system"]
        record = {"text": summary, "upto": start + cut - 1, "id": rest[cut - 1].message_id}
        record["system"] = pinned
        kept = [context[i] for i in pinned] + list(rest[cut:])
        if context_log.isEnabledFor(logging.INFO):
            log_trim(self, state, len(kept), len(older), "summarised")
        return _view(state, kept, (summary, record))

    async def _summarize(self, previous: str | None, messages: list[Message]) -> str:
        from tenxgraph.core.llm import calling
        from tenxgraph.core.llm.litellm_client import LiteLLMClient
        from tenxgraph.core.llm.models import resolve
        from tenxgraph.core.llm.request import ModelRequest
        from tenxgraph.core.llm.retry import RetryConfig

        if self._route is None:
            self._route = resolve(self.model, LiteLLMClient())
        transcript = "\n".join(_line(m) for m in messages)
        asked = f"Summary so far:\n{previous}\n\n" if previous else ""
        asked += f"New messages:\n{transcript}\n\nWrite the updated summary."
        request = ModelRequest(
            model=self._route.model,
            messages=[
                Message.text_message(self.summary_system_prompt, "system"),
                Message.text_message(asked, "user"),
            ],
            settings={"max_tokens": self.max_summary_tokens, **self.llm_kwargs},
        )
        answer = await calling.complete((self._route,), request, RetryConfig())
        return answer.text().strip()

    def __repr__(self) -> str:
        name = self.model if isinstance(self.model, str) else type(self.model).__name__
        return f"SummaryContextManager({name!r}, max_messages={self.max_messages})"


def _covered(state: AgentState) -> tuple[int, list[int]]:
    """Where the messages the summary does not cover start, and the positions of the system
    messages before that. A record that does not match the state (the summary was changed, or
    the step that made it failed) counts as no summary: everything is looked at again."""
    record = state.execution_meta.internal_data.get(RECORD)
    if not isinstance(record, dict) or record.get("text") != state.context_summary:
        return 0, []
    upto, context = record.get("upto"), state.context
    if not isinstance(upto, int) or not 0 <= upto < len(context):
        return 0, []
    if context[upto].message_id != record.get("id"):
        return 0, []
    return upto + 1, [i for i in record.get("system", []) if isinstance(i, int) and i <= upto]


def _safe_cut(messages: Sequence[Message], cut: int, forward: bool = False) -> int:
    """`cut`, moved to the start of a user turn (providers want the kept messages to open
    with one, and no tool result is then separated from its call); failing that, to a
    message that is not a tool result."""
    cut = max(0, min(cut, len(messages)))
    step = 1 if forward else -1
    turn = cut
    while 0 < turn < len(messages) and messages[turn].role != "user":
        turn += step
    if 0 < turn < len(messages):
        return turn
    while 0 < cut < len(messages) and messages[cut].role == "tool":
        cut += step
    return cut


def _view(state: S, context: list[Message], summary: tuple[str, dict[str, Any]] | None) -> S:
    """A copy of `state` with `context` (and a new summary) for the model to see. The
    original is not changed: its `execution_meta` is copied when the record changes."""
    update: dict[str, Any] = {"context": context}
    if summary is not None:
        text, record = summary
        meta = state.execution_meta.model_copy()
        meta.internal_data = {**meta.internal_data, RECORD: record}
        update.update(context_summary=text, execution_meta=meta)
    return state.model_copy(update=update)


def _line(message: Message) -> str:
    """One message of the transcript the summary model reads."""
    parts = [message.text()] if message.role != "tool" else []
    for block in message.content:
        if isinstance(block, ToolCallBlock):
            parts.append(f"(called {block.name} {json.dumps(block.args, ensure_ascii=False)})")
        elif isinstance(block, ToolResultBlock) and message.role == "tool":
            output = block.output if isinstance(block.output, str) else json.dumps(block.output)
            parts.append(f"(tool result{' error' if block.is_error else ''}: {output})")
    return f"[{message.role}] " + " ".join(p for p in parts if p)


__all__ = ["DEFAULT_SUMMARY_PROMPT", "SummaryContextManager"]
