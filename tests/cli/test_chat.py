"""`tenxgraph chat`: a streaming chat on a SQLite thread that a restart continues."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tenxgraph.cli import chat
from tenxgraph.cli._support import support_app
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph
from tenxgraph.core.llm import FunctionModel, ModelInfo
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils.constants import START
from tests.cli.conftest import Cli


def test_chat_from_piped_stdin_then_restart_continues_the_thread(cli: Cli, tmp_path: Path) -> None:
    db = str(tmp_path / "chat.db")
    first = cli(
        "chat", "--model", "test", "--thread", "t", "--db", db, stdin="hello\n\nhow are you\n"
    )
    assert first.code == 0, first.err
    assert "New thread 't'." in first.out
    assert "you: hello\nassistant: test answer to: hello\n" in first.out
    assert "assistant: test answer to: how are you\n" in first.out
    assert first.out.count("tokens: ") == 2

    again = cli(
        "chat", "--model", "test", "--thread", "t", "--db", db, stdin="and now\n/exit\nnot read\n"
    )
    assert again.code == 0, again.err
    assert "Continuing thread 't': 4 earlier messages loaded." in again.out
    assert "assistant: test answer to: and now" in again.out
    assert "not read" not in again.out

    shown = cli("threads", "show", "t", "--db", db)
    assert "6 messages" in shown.out
    assert shown.out.count("user: ") == 3


def test_chat_on_a_terminal_uses_the_prompt_and_ends_on_eof(cli: Cli) -> None:
    result = cli("chat", stdin="hi\n", tty=True)  # default model test, thread chat, $TENXGRAPH_DB
    assert result.code == 0, result.err
    assert "you: " in result.out
    assert "assistant: test answer to: hi" in result.out
    assert "thread 'chat'" in result.out


def test_chat_unknown_slash_command_is_explained(cli: Cli) -> None:
    result = cli("chat", stdin="/help\n/quit\n")
    assert result.code == 0
    assert "Commands: /exit (or Ctrl-D) ends the chat." in result.out


def test_chat_with_a_real_model_and_no_key(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = cli("chat", "--model", "openai/gpt-4o-mini", stdin="hi\n")
    assert result.code == 3
    assert "set OPENAI_API_KEY" in result.err
    assert result.err.count("\n") == 1


def test_chat_refuses_a_thread_paused_by_another_app(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"

    async def pause() -> None:
        app = support_app(None, db)
        await app.ainvoke(
            {"messages": [Message.text_message("order 1042 broke")]}, {"thread_id": "p"}
        )
        await app.aclose()

    asyncio.run(pause())
    result = cli("chat", "--thread", "p", "--db", str(db), stdin="hi\n")
    assert result.code == 1
    assert "Thread 'p' is paused at an interrupt of another app" in result.err
    assert "Approve a refund of 59.90 EUR for order 1042?" in result.err


def test_a_failed_turn_is_reported_and_the_chat_goes_on(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(messages: list[Message], info: ModelInfo) -> str:
        if messages[-1].text() == "boom":
            raise RuntimeError("the model broke")
        return "fine"

    def app(model: str, db: Path) -> CompiledGraph:
        graph = StateGraph()
        graph.add_node("assistant", Agent(FunctionModel(answer), retry_config=False))
        graph.add_edge(START, "assistant")
        return graph.compile(checkpointer=SqliteCheckpointer(db))

    monkeypatch.setattr(chat, "chat_app", app)
    result = cli("chat", "--thread", "f", "--db", str(tmp_path / "c.db"), stdin="boom\nhi\n")
    assert result.code == 1  # a turn failed
    assert result.err.count("\n") == 1
    assert "the model broke" in result.err
    assert "assistant: fine" in result.out
