"""`tenxgraph demo`: streams reasoning, tokens and tool calls, pauses for approval, and a new app
resumes the same thread from SQLite; with or without a terminal."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenxgraph.cli._support import USER_MESSAGE, scripted_model, support_app
from tenxgraph.cli.demo import demo_db
from tenxgraph.core.llm import ModelRequest
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ReasoningBlock
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tests.cli.conftest import Cli, TtyStdout

FINAL_APPROVED = "Done: 59.90 EUR is on its way back to your card for order 1042"
FINAL_DECLINED = "The refund for order 1042 was not approved"


def assert_full_story(out: str) -> None:
    """What a demo run shows, in order: the question, the reasoning, both tool calls with
    their results, the pause, the resume, the answer and the token usage."""
    expected = [
        f"you: {USER_MESSAGE}",
        "  thinking: The customer says order 1042 arrived broken",
        "  -> lookup_order(order_id=1042)",
        '  <- lookup_order: {"order_id": 1042, "item": "ceramic teapot", "total_eur": 59.9',
        "agent: I found order 1042 (ceramic teapot, 59.90 EUR, delivered on 2025-03-03).",
        '  -> refund(order_id=1042, amount_eur=59.9, reason="damaged")',
        "  || paused: Approve a refund of 59.90 EUR for order 1042?",
        "Resuming thread",
        "  <- refund: ",
        "agent: ",
        "tokens: ",
    ]
    position = 0
    for piece in expected:
        found = out.find(piece, position)
        assert found >= 0, f"{piece!r} missing (or out of order) in:\n{out}"
        position = found + len(piece)


def test_demo_with_yes_approves_and_resumes_from_disk(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    result = cli("demo", "--yes", "--db", str(db), "--thread", "t1")
    assert result.code == 0, result.err
    assert result.err == ""
    assert_full_story(result.out)
    assert "approve? yes (--yes)" in result.out
    assert "  <- refund: Refunded 59.90 EUR for order 1042 (refund RF-1042)." in result.out
    assert FINAL_APPROVED in result.out
    assert "tokens: 263 in, 113 out (59 reasoning), 376 total" in result.out
    assert str(db) in result.out  # it says where the thread is kept
    assert "\x1b[" not in result.out  # not a terminal: no colour codes

    listed = cli("threads", "list", "--db", str(db))
    assert listed.code == 0
    assert listed.out.splitlines()[1].split()[:3] == ["t1", "6", "completed"]
    shown = cli("threads", "show", "t1", "--db", str(db))
    assert shown.code == 0
    assert "thread t1: completed, 6 messages" in shown.out
    assert "assistant -> lookup_order(order_id=1042)" in shown.out
    assert "tool refund: Refunded 59.90 EUR for order 1042 (refund RF-1042)." in shown.out
    assert f"assistant: {FINAL_APPROVED}" in shown.out
    assert "assistant (thinking): The refund went through" in shown.out


def test_demo_without_a_terminal_declines_and_still_succeeds(cli: Cli, tmp_path: Path) -> None:
    result = cli("demo", "--db", str(tmp_path / "demo.db"), stdin="y\n", tty=False)
    assert result.code == 0, result.err
    assert_full_story(result.out)
    assert "there is no terminal to ask on and --yes was not given" in result.out
    assert "  <- refund: The refund was not approved: nothing was paid back." in result.out
    assert FINAL_DECLINED in result.out


@pytest.mark.parametrize(("typed", "approved"), [("y\n", True), ("n\n", False), ("", False)])
def test_demo_asks_on_a_terminal(cli: Cli, tmp_path: Path, typed: str, approved: bool) -> None:
    result = cli("demo", "--db", str(tmp_path / "demo.db"), stdin=typed, tty=True)
    assert result.code == 0, result.err
    assert "Approve a refund of 59.90 EUR for order 1042? [y/N] " in result.out
    assert ("approved" if approved else "declined") in result.out
    assert (FINAL_APPROVED if approved else FINAL_DECLINED) in result.out


def test_demo_picks_up_a_thread_paused_by_an_earlier_process(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "demo.db"

    async def pause_it() -> None:
        app = support_app(None, db)
        paused = await app.ainvoke(
            {"messages": [Message.text_message(USER_MESSAGE)]}, {"thread_id": "t2"}
        )
        assert paused["interrupt"]["message"].startswith("Approve a refund")
        await app.aclose()

    asyncio.run(pause_it())
    result = cli("demo", "--yes", "--db", str(db), "--thread", "t2")
    assert result.code == 0, result.err
    assert "Thread t2 is paused: picking it up" in result.out
    assert "lookup_order(" not in result.out  # that part ran in the earlier process
    assert FINAL_APPROVED in result.out


def test_demo_colours_only_on_a_terminal_without_no_color(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = TtyStdout()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setattr("tenxgraph.cli.demo._PACE_SECONDS", 0.0)  # no waiting in tests
    assert cli("demo", "--yes", "--db", str(tmp_path / "a.db")).code == 0
    coloured = terminal.getvalue()
    assert "\x1b[2m  thinking: \x1b[0m" in coloured
    assert "\x1b[36m  -> lookup_order(order_id=1042)\x1b[0m" in coloured

    plain = TtyStdout()
    monkeypatch.setattr(sys, "stdout", plain)
    monkeypatch.setenv("NO_COLOR", "1")
    assert cli("demo", "--yes", "--db", str(tmp_path / "b.db")).code == 0
    assert "\x1b[" not in plain.getvalue()
    assert "  -> lookup_order(order_id=1042)" in plain.getvalue()


def test_demo_with_a_real_model_and_no_key_fails_in_one_line(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "demo.db"
    result = cli("demo", "--model", "openai/gpt-4o-mini", "--db", str(db))
    assert result.code == 3
    assert result.out == ""
    assert result.err.count("\n") == 1
    assert "OPENAI_API_KEY" in result.err
    assert result.err.startswith("tenxgraph: error: No API key for openai")
    assert "Traceback" not in result.err
    assert not db.exists()  # it stopped before doing anything


def test_demo_with_the_offline_test_model(cli: Cli, tmp_path: Path) -> None:
    result = cli("demo", "--model", "test", "--yes", "--db", str(tmp_path / "demo.db"))
    assert result.code == 0, result.err
    assert "-> lookup_order(order_id=0)" in result.out
    assert "-> refund(" in result.out
    assert "Tool results: " in result.out


def test_demo_db_defaults_to_the_home_directory(home: Path) -> None:
    assert demo_db(None) == home / ".tenxgraph" / "demo.db"
    assert demo_db("x.db") == Path("x.db").absolute()


def test_demo_db_falls_back_to_the_temp_dir_without_a_writable_home(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / ".tenxgraph").write_text("a file, not a folder")
    assert demo_db(None).name == "tenxgraph-demo.db"
    assert demo_db(None).parent != home / ".tenxgraph"


async def test_the_scripted_model_streams_reasoning_then_text_then_calls() -> None:
    model = scripted_model()
    request = ModelRequest(model="scripted", messages=[Message.text_message(USER_MESSAGE)])
    pieces = [m async for m in model.astream(request)]
    deltas, final = pieces[:-1], pieces[-1]
    assert all(d.delta for d in deltas)
    assert not final.delta
    assert all(d.reasoning for d in deltas)  # the first answer only thinks, then calls
    assert {d.message_id for d in deltas} == {final.message_id}
    thought = "".join(d.reasoning or "" for d in deltas)
    assert isinstance(final.content[0], ReasoningBlock)
    assert final.content[0].summary == thought == final.reasoning
    assert final.tool_call_blocks()[0].name == "lookup_order"
    assert final.usages is not None
    assert final.usages.reasoning_tokens == len(thought.split())


# -- as a real process -------------------------------------------------------------------------


def run_demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TENXGRAPH_DB")}
    env["HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", "demo", "--db", str(tmp_path / "demo.db"), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def test_demo_process_with_yes(tmp_path: Path) -> None:
    proc = run_demo(tmp_path, "--yes", "--thread", "sub-1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert_full_story(proc.stdout)
    assert FINAL_APPROVED in proc.stdout

    async def stored() -> list[str]:
        store = SqliteCheckpointer(tmp_path / "demo.db")
        try:
            return await store.alist_threads()
        finally:
            await store.aclose()

    assert asyncio.run(stored()) == ["sub-1"]


def test_demo_process_piped_without_a_terminal(tmp_path: Path) -> None:
    proc = run_demo(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_full_story(proc.stdout)
    assert "approve? no: there is no terminal to ask on" in proc.stdout
    assert FINAL_DECLINED in proc.stdout
    assert "\x1b[" not in proc.stdout
