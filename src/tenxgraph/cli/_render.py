"""Printing a streamed run as it happens: the model's reasoning (dimmed, prefixed) and tokens,
each tool call and its result, and, at the end, what the run cost in tokens."""

from __future__ import annotations

import json
from typing import Any

from tenxgraph.cli._console import Console
from tenxgraph.core.state import Message, StreamChunk
from tenxgraph.core.state.message_block import ReasoningBlock, ToolResultBlock

_RESULT_WIDTH = 160


def call_text(name: str, args: dict[str, Any]) -> str:
    """``lookup_order(order_id=1042)``: a tool call as a person reads it."""
    shown = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in args.items()
    )
    return f"{name}({shown})"


def short(text: str, width: int = _RESULT_WIDTH) -> str:
    """One line, at most `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def reasoning_of(message: Message) -> str:
    if message.reasoning:
        return message.reasoning
    return "".join(b.summary for b in message.content if isinstance(b, ReasoningBlock))


class StreamPrinter:
    """Feed it every chunk of ``app.astream(...)``; it prints as the chunks arrive and keeps
    what the caller needs afterwards: the pause (if any), the answer and the token usage."""

    def __init__(self, console: Console, *, speaker: str | None = "agent") -> None:
        self.console = console
        self.speaker = speaker
        self.mid_line = False
        self.mode: str | None = None  # "reasoning" or "text" of the message being streamed
        self.current: str | int | None = None
        self.streamed: set[str | int] = set()
        self.counted: set[str | int] = set()
        self.pause: dict[str, Any] | None = None
        self.answer = ""
        self.tokens_in = self.tokens_out = self.tokens_reasoning = 0

    # -- chunks ----------------------------------------------------------------------------

    def feed(self, chunk: StreamChunk) -> None:
        data = chunk.data or {}
        status = data.get("status")
        message = chunk.message
        if chunk.event == "updates":
            if status == "invoking_tool":
                self._line(
                    self._styled(f"  -> {call_text(data['tool_name'], data['args'])}", "cyan")
                )
            elif status == "interrupted":
                self.pause = data
            return
        if message is None:
            return
        if status == "tool_result":
            self._tool_result(data, message)
        elif message.role == "assistant":
            if message.delta:
                self._delta(message)
            else:
                self._complete(message)
        elif message.role == "tool":
            self._line(self._styled(f"  <- {short(message.text())}", "green"))

    def finish(self) -> None:
        """End the line being written, if any."""
        if self.mid_line:
            self.console.write("\n")
            self.mid_line = False
        self.mode = None

    # -- pieces ----------------------------------------------------------------------------

    def _delta(self, message: Message) -> None:
        if message.message_id != self.current:
            self.finish()
            self.current = message.message_id
        self.streamed.add(message.message_id)
        thought = reasoning_of(message)
        if thought:
            self._switch("reasoning")
            self.console.write(self.console.style(thought, "dim"))
            self.mid_line = True
        text = message.text()
        if text:
            self._switch("text")
            self.console.write(text)
            self.mid_line = True

    def _complete(self, message: Message) -> None:
        if message.message_id not in self.streamed:  # a node that does not stream
            self.finish()
            thought = reasoning_of(message)
            if thought:
                self._switch("reasoning")
                self.console.write(self.console.style(thought, "dim"))
                self.mid_line = True
            if message.text():
                self._switch("text")
                self.console.write(message.text())
                self.mid_line = True
        self.finish()
        self.current = None
        if message.text():
            self.answer = message.text()
        usage = message.usages
        if usage is not None and message.message_id not in self.counted:
            self.counted.add(message.message_id)
            self.tokens_in += usage.prompt_tokens
            self.tokens_out += usage.completion_tokens
            self.tokens_reasoning += usage.reasoning_tokens

    def _tool_result(self, data: dict[str, Any], message: Message) -> None:
        block = next((b for b in message.content if isinstance(b, ToolResultBlock)), None)
        failed = bool(data.get("is_error")) or (block is not None and block.is_error)
        note = " (recorded earlier, not run again)" if data.get("replayed") else ""
        text = f"  <- {data.get('tool_name')}: {short(message.text())}{note}"
        self._line(self._styled(text, "red" if failed else "green"))

    def _switch(self, mode: str) -> None:
        if mode == self.mode:
            return
        self.finish()
        self.mode = mode
        if mode == "reasoning":
            self.console.write(self.console.style("  thinking: ", "dim"))
        elif self.speaker:
            self.console.write(self.console.style(f"{self.speaker}: ", "bold"))
        self.mid_line = True

    def _line(self, text: str) -> None:
        self.finish()
        self.console.line(text)

    def _styled(self, text: str, name: str) -> str:
        return self.console.style(text, name)

    # -- totals ----------------------------------------------------------------------------

    def usage_line(self) -> str:
        """``tokens: 120 in, 45 out (12 reasoning), 165 total``."""
        spent = f"tokens: {self.tokens_in} in, {self.tokens_out} out"
        if self.tokens_reasoning:
            spent += f" ({self.tokens_reasoning} reasoning)"
        return spent + f", {self.tokens_in + self.tokens_out} total"


def pause_question(pause: dict[str, Any] | None) -> str:
    """What a paused run asks, in one line."""
    if not pause:
        return "The run is paused."
    asked = pause.get("interrupt") or {}
    if not asked:
        reason = str(pause.get("reason") or "").replace("_", " ")
        return f"Paused ({reason}) at node {pause.get('node')!r}."
    if asked.get("message"):
        return str(asked["message"])
    value = asked.get("value")
    if value is not None:
        return json.dumps(value, ensure_ascii=False, default=str)
    return "The run asks for input."


__all__ = ["StreamPrinter", "call_text", "pause_question", "reasoning_of", "short"]
