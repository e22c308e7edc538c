"""`--model openai/gpt-4o-mini` with a key: the same commands on a real provider (its HTTP API
mocked here), streaming its reasoning, tokens and tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import respx

from tests.cli.conftest import Cli
from tests.core.llm._support import OPENAI_URL, USAGE_EVENT, event, sent, sse


def call(call_id: str, name: str, args: dict[str, object]) -> dict[str, object]:
    function = {"name": name, "arguments": json.dumps(args)}
    return {"tool_calls": [{"index": 0, "id": call_id, "type": "function", "function": function}]}


@pytest.fixture
def openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[respx.Route]:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        yield mock.post(OPENAI_URL)


def test_demo_on_a_real_provider(cli: Cli, tmp_path: Path, openai: respx.Route) -> None:
    openai.side_effect = [
        sse(
            event({"role": "assistant", "reasoning_content": "Look it up first."}),
            event(call("c1", "lookup_order", {"order_id": 1042}), "tool_calls"),
            USAGE_EVENT,
        ),
        sse(
            event({"role": "assistant", "content": "Asking for "}),
            event({"content": "a refund."}),
            event(
                call("c2", "refund", {"order_id": 1042, "amount_eur": 59.9, "reason": "damaged"})
            ),
            event({}, "tool_calls"),
            USAGE_EVENT,
        ),
        sse(event({"role": "assistant", "content": "Refund sent."}, "stop"), USAGE_EVENT),
    ]
    result = cli("demo", "--model", "openai/gpt-4o-mini", "--yes", "--db", str(tmp_path / "d.db"))
    assert result.code == 0, result.err
    assert "model: openai/gpt-4o-mini" in result.out
    assert "  thinking: Look it up first.\n" in result.out
    assert "  -> lookup_order(order_id=1042)" in result.out
    assert "agent: Asking for a refund.\n" in result.out
    assert "  || paused: Approve a refund of 59.90 EUR for order 1042?" in result.out
    assert "  <- refund: Refunded 59.90 EUR for order 1042 (refund RF-1042)." in result.out
    assert "agent: Refund sent.\n" in result.out
    assert "tokens: 27 in, 12 out" in result.out  # 3 calls of 9 in, 4 out
    assert ", 39 total\n" in result.out
    assert "offline" not in result.out.split("model: ")[1].splitlines()[0]
    assert sent(openai, 0)["model"] == "gpt-4o-mini"
    assert [t["function"]["name"] for t in sent(openai, 0)["tools"]] == ["lookup_order", "refund"]


def test_chat_on_a_real_provider(cli: Cli, tmp_path: Path, openai: respx.Route) -> None:
    openai.side_effect = [
        sse(event({"role": "assistant", "content": "Hi "}), event({"content": "there."}, "stop"))
    ]
    db = str(tmp_path / "c.db")
    result = cli("chat", "--model", "openai/gpt-4o-mini", "--db", db, stdin="hello\n")
    assert result.code == 0, result.err
    assert "assistant: Hi there.\n" in result.out
    assert sent(openai)["messages"][-1] == {"role": "user", "content": "hello"}
