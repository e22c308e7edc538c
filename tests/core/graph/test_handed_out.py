"""What a run hands out of its thread: the kept messages themselves, sealed, at every
granularity; the thread stays in memory for the next turn whatever the caller asked for."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from tenxgraph.core.state import AgentState, Message, TextBlock
from tenxgraph.core.state.sealed import SealedError, is_sealed
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tests.core.graph._support import inp, linear, texts, user


class Notes(AgentState):
    notes: dict[str, Any] = Field(default_factory=dict)


def echo(state: AgentState) -> Message:
    return Message.text_message(f"echo {state.context[-1].text()}", "assistant")


class CountingLoads(InMemoryCheckpointer):
    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    async def aload(self, *args: Any, **kwargs: Any) -> Any:
        found = await super().aload(*args, **kwargs)
        self.loads += found is not None  # a stored thread read again
        return found


@pytest.mark.parametrize("granularity", ["low", "partial", "full"])
async def test_the_thread_is_kept_in_memory_at_every_granularity(granularity: str) -> None:
    store = CountingLoads()
    app = linear(echo, checkpointer=store)
    config = {"thread_id": "t"}
    for word in ("a", "b", "c"):
        await app.ainvoke(inp(word), config, response_granularity=granularity)
    assert store.loads == 0  # never reloaded: the kept state served every turn
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["a", "echo a", "b", "echo b", "c", "echo c"]


async def test_partial_hands_out_the_kept_messages_themselves_sealed() -> None:
    app = linear(echo, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    first = await app.ainvoke(inp("a"), config, response_granularity="partial")
    second = await app.ainvoke(inp("b"), config, response_granularity="partial")
    assert all(map(is_sealed, second["context"]))
    # the same objects, not copies: handing out costs a list copy
    assert second["context"][0] is first["context"][0]
    assert second["context"][1] is first["context"][1]
    assert second["messages"][-1] is second["context"][-1]


@pytest.mark.parametrize("granularity", ["low", "partial", "full"])
async def test_nothing_done_to_a_result_changes_the_thread(granularity: str) -> None:
    seen: list[list[str]] = []

    def look(state: Notes) -> Message:
        seen.append(texts(state.context))
        assert state.notes == {"k": 1}
        return Message.text_message(f"seen {len(state.context)}", "assistant")

    app = linear(look, state=Notes, checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("a", notes={"k": 1}), config, response_granularity=granularity)
    answer = result["messages"][-1]
    with pytest.raises(SealedError):
        answer.content.append(TextBlock(text="sneaked"))
    with pytest.raises(SealedError):
        answer.metadata["sneaked"] = True
    if granularity == "partial":
        result["context"].append(user("sneaked"))
        result["context"].pop(0)
    if granularity == "full":
        state = result["state"]
        state.notes["k"] = 2
        state.context.append(user("sneaked"))
        state.execution_meta.step = 99
        with pytest.raises(SealedError):
            state.context[0].content[0] = TextBlock(text="rewritten")
    await app.ainvoke(inp("b"), config, response_granularity=granularity)
    assert seen == [["a"], ["a", "seen 1", "b"]]
    stored = await app.aget_state(config)
    assert isinstance(stored, Notes)
    assert stored.notes == {"k": 1}
    assert texts(stored.context) == ["a", "seen 1", "b", "seen 3"]


async def test_on_sqlite_a_sealed_thread_saves_and_reads_back(tmp_path: Any) -> None:
    app = linear(echo, checkpointer=SqliteCheckpointer(tmp_path / "t.db"))
    config = {"thread_id": "t"}
    for word in ("a", "b"):
        await app.ainvoke(inp(word), config, response_granularity="partial")
    other = linear(echo, checkpointer=SqliteCheckpointer(tmp_path / "t.db"))
    result = await other.ainvoke(inp("c"), config, response_granularity="full")
    assert texts(result["state"].context) == ["a", "echo a", "b", "echo b", "c", "echo c"]
    await app.aclose()
    await other.aclose()


async def test_without_a_checkpointer_nothing_is_kept_so_nothing_is_sealed() -> None:
    app = linear(echo, checkpointer=False)
    result = await app.ainvoke(inp("a"), {"thread_id": "t"}, response_granularity="partial")
    answer = result["messages"][-1]
    assert not is_sealed(answer)
    answer.metadata["mine"] = True  # the caller's to change


async def test_the_input_messages_stay_the_callers() -> None:
    app = linear(echo, checkpointer=InMemoryCheckpointer())
    message = user("a")
    await app.ainvoke({"messages": [message]}, {"thread_id": "t"}, response_granularity="full")
    assert not is_sealed(message)
    message.metadata["mine"] = True


async def test_get_state_of_a_kept_thread_reads_nothing_and_is_the_callers_copy() -> None:
    store = CountingLoads()
    app = linear(echo, state=Notes, checkpointer=store)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("a", notes={"k": 1}), config)
    got = await app.aget_state(config)
    assert isinstance(got, Notes)
    assert store.loads == 0
    assert all(map(is_sealed, got.context))
    got.notes["k"] = 2
    got.context.clear()
    again = await app.aget_state(config)
    assert isinstance(again, Notes)
    assert again.notes == {"k": 1}
    assert texts(again.context) == ["a", "echo a"]


async def test_get_state_reads_the_store_when_another_app_moved_the_thread() -> None:
    store = CountingLoads()
    first = linear(echo, checkpointer=store)
    second = linear(echo, checkpointer=store)
    config = {"thread_id": "t"}
    await first.ainvoke(inp("a"), config)
    await second.ainvoke(inp("b"), config)
    loads = store.loads
    got = await first.aget_state(config)
    assert got is not None
    assert store.loads == loads + 1
    assert texts(got.context) == ["a", "echo a", "b", "echo b"]
    assert all(map(is_sealed, got.context))  # the same rules as a kept thread's


async def test_update_state_keeps_the_thread_in_memory() -> None:
    store = CountingLoads()
    app = linear(echo, checkpointer=store)
    config = {"thread_id": "t"}
    await app.ainvoke(inp("a"), config)
    await app.aupdate_state(config, [user("noted")])
    await app.ainvoke(inp("b"), config)
    assert store.loads == 0
    stored = await app.aget_state(config)
    assert stored is not None
    assert texts(stored.context) == ["a", "echo a", "noted", "b", "echo b"]


async def test_the_kept_threads_are_bounded_by_counted_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenxgraph.core.graph import threads as kept

    # room for about two threads of two messages each
    monkeypatch.setattr(kept, "LIVE_BYTES", 2 * (kept.STATE_BYTES + 2 * kept.MESSAGE_BYTES) + 1)
    store = CountingLoads()
    app = linear(echo, checkpointer=store)
    for name in ("a", "b", "c"):
        await app.ainvoke(inp(name), {"thread_id": name})
    assert list(app._threads.live) == ["b", "c"]
    assert app._threads.live_bytes <= kept.LIVE_BYTES
    await app.ainvoke(inp("again"), {"thread_id": "a"})  # read from the store again
    assert store.loads == 1
    assert list(app._threads.live) == ["a"]  # now four messages: "c" no longer fits beside it


async def test_a_thread_bigger_than_the_bound_is_still_kept_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenxgraph.core.graph import threads as kept

    monkeypatch.setattr(kept, "LIVE_BYTES", 1)
    app = linear(echo, checkpointer=CountingLoads())
    await app.ainvoke(inp("a"), {"thread_id": "a"})
    await app.ainvoke(inp("b"), {"thread_id": "b"})
    assert list(app._threads.live) == ["b"]
