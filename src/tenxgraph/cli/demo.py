"""`tenxgraph demo`: the support agent streams, calls its tools, pauses for a person's approval
of the refund, and a new app resumes the same thread from the SQLite file."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenxgraph.cli._console import Console, require_key, stdin_is_terminal
from tenxgraph.cli._render import StreamPrinter, pause_question
from tenxgraph.cli._support import USER_MESSAGE, support_app
from tenxgraph.core.state import Message
from tenxgraph.utils.interrupt import pending_interrupt

_MAX_PAUSES = 5  # a real model may ask for several refunds; the demo stops asking after this
_PACE_SECONDS = 0.02  # per streamed piece of the offline model, only when a person watches


def demo_db(given: str | None) -> Path:
    """--db, else ~/.tenxgraph/demo.db, else (no writable home) a file in the temp dir."""
    if given:
        return Path(given).expanduser().absolute()
    home = Path("~/.tenxgraph").expanduser()
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.access(home, os.W_OK):
            return home / "demo.db"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / "tenxgraph-demo.db"


def command(args: argparse.Namespace, console: Console) -> int:
    model: str | None = args.model
    if model is not None:
        require_key(model, offline="leave out --model to run the demo offline")
    db = demo_db(args.db)
    thread = args.thread if args.thread is not None else f"demo-{uuid.uuid4().hex[:8]}"
    return asyncio.run(_demo(console, model, db, thread, bool(args.yes)))


def _model_label(model: str | None) -> str:
    if model is None:
        return "a scripted offline model (no API key needed; try --model openai/gpt-4o-mini)"
    if model == "test":
        return "test (the offline TestModel)"
    return model


@dataclass(slots=True)
class _Demo:
    console: Console
    model: str | None
    db: Path
    thread: str
    printer: StreamPrinter
    delay: float

    @property
    def config(self) -> dict[str, str]:
        return {"thread_id": self.thread}

    async def stream(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Run `payload` on a new app over the SQLite file, printing the stream; the app is
        closed afterwards, so the next step has to come back from disk. Returns the pause."""
        self.printer.pause = None
        app = support_app(self.model, self.db, self.delay)
        try:
            async for chunk in app.astream(payload, self.config):
                self.printer.feed(chunk)
            self.printer.finish()
        finally:
            await app.aclose()
        return self.printer.pause

    async def paused_already(self) -> dict[str, Any] | None:
        """The pause a --thread given again was left at (by an earlier process), if any."""
        app = support_app(self.model, self.db)
        try:
            state = await app.aget_state(self.config)
        finally:
            await app.aclose()
        waiting = pending_interrupt(state) if state is not None else None
        return None if waiting is None else {"interrupt": waiting.model_dump()}


async def _demo(console: Console, model: str | None, db: Path, thread: str, yes: bool) -> int:
    style = console.style
    delay = _PACE_SECONDS if model is None and console.interactive else 0.0
    demo = _Demo(console, model, db, thread, StreamPrinter(console), delay)
    console.line(
        style("tenxgraph demo", "bold") + ": a support agent with two tools, lookup_order and "
        "refund (every refund waits for a person's approval)."
    )
    console.note(f"model: {_model_label(model)}")
    console.note(f"threads are kept in {db} (thread {thread})")
    console.line()
    pause = await demo.paused_already()
    if pause is None:
        console.line(style("you: ", "bold") + USER_MESSAGE)
        pause = await demo.stream({"messages": [Message.text_message(USER_MESSAGE)]})
    else:
        console.note(f"Thread {thread} is paused: picking it up from {db}.")
    rounds = 0
    while pause is not None and rounds < _MAX_PAUSES:
        rounds += 1
        question = pause_question(pause)
        console.line(style(f"  || paused: {question}", "yellow"))
        console.note(f"The run is saved in {db}; this app is closed now.")
        approved = _ask(console, question, yes)
        console.line()
        console.note(
            f"Resuming thread {thread} with a new app over {db}: nothing is kept in memory."
        )
        pause = await demo.stream({"resume": "yes" if approved else "no"})
    if rounds == 0:
        console.line("The agent finished without asking for a refund.")
    console.line()
    usage = demo.printer.usage_line()
    if model is None:
        usage += " (the offline model counts words)"
    console.line(style(usage, "dim"))
    console.note(f"See the stored thread: tenxgraph threads show {thread} --db {_quote(db)}")
    return 0


def _ask(console: Console, question: str, yes: bool) -> bool:
    """The person's decision: --yes, or asked on the terminal; with no terminal, declined."""
    if yes:
        console.line("approve? yes (--yes)")
        return True
    if not stdin_is_terminal():
        console.line(
            "approve? no: there is no terminal to ask on and --yes was not given, so the refund "
            "is declined (run `tenxgraph demo --yes` to approve it)"
        )
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        answer = ""
    approved = answer.strip().lower() in ("y", "yes")
    console.line("approved" if approved else "declined")
    return approved


def _quote(path: Path) -> str:
    return shlex.quote(str(path))


__all__ = ["command", "demo_db"]
