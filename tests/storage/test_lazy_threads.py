"""Threads longer than what a store loads at once: a cold turn reads the header and the recent
messages only, and everything else behaves as if the whole history were in memory."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import SerializationError, StorageError, ThreadBusyError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.lazy_history import PAGE, LazyHistory
from tenxgraph.core.state.sealed import is_sealed
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.storage.checkpointer.lease import Lease
from tenxgraph.storage.checkpointer.paging import RECENT_MESSAGES
from tests.storage.conftest import Backend

LONG = RECENT_MESSAGES + 3 * PAGE + 5  # a thread whose oldest pages stay in the store


def text(i: int) -> Message:
    return Message.text_message(
        f"m{i}", "user" if i % 2 == 0 else "assistant", message_id=f"id-{i}"
    )


async def seed(store: BaseCheckpointer, n: int = LONG) -> None:
    await store.asave(
        "t", expected_version=None, state=AgentState(), new_messages=[text(i) for i in range(n)]
    )


class Reads:
    """Counts the stored-log reads and id look-ups a store is asked for (blocking ones
    included)."""

    def __init__(self, store: BaseCheckpointer) -> None:
        self.calls: list[tuple[int, int]] = []
        self.lookups: list[list[str | int]] = []
        original = store.aread_log
        find = store.afind_ids

        async def found(
            thread_id: str, generation: int, ids: list[str | int], below: int, **kw: Any
        ) -> Any:
            self.lookups.append(list(ids))
            return await find(thread_id, generation, ids, below, **kw)

        store.afind_ids = found  # type: ignore[method-assign]

        async def counted(
            thread_id: str, state_type: Any, generation: int, start: int, stop: int, **kw: Any
        ) -> Any:
            self.calls.append((start, stop))
            return await original(thread_id, state_type, generation, start, stop, **kw)

        store.aread_log = counted  # type: ignore[method-assign]


def app_on(store: BaseCheckpointer, node: Any) -> Any:
    graph = StateGraph(AgentState)
    graph.add_node("node", node)
    graph.set_entry_point("node")
    graph.add_edge("node", "__end__")
    return graph.compile(checkpointer=store)


def reply(state: AgentState) -> Message:
    return Message.text_message(f"reply to {state.context[-1].text()}", "assistant")


async def test_a_cold_turn_reads_only_the_recent_messages(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    app = app_on(store, reply)
    new = Message.text_message("new")
    result = await app.ainvoke({"messages": [new]}, {"thread_id": "t"})
    assert result["messages"][-1].text() == "reply to new"
    assert reads.calls == []
    # the input was made before the thread was read, so it may be stored already (a turn
    # sent again); the reply was made after, so it cannot be: only the input is looked up.
    # PostgreSQL answers that in the load's own statement (one round trip fewer), SQLite
    # with a query of its own
    assert reads.lookups == ([] if sql_backend.name == "postgres" else [[new.message_id]])
    stored = await sql_backend.open().aload("t", AgentState)
    assert stored is not None
    assert [m.text() for m in stored.state.context] == [
        *(f"m{i}" for i in range(LONG)),
        "new",
        "reply to new",
    ]


async def test_a_node_reading_old_messages_gets_them_from_the_store(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    seen: list[list[str]] = []

    def look(state: AgentState) -> Message:
        seen.append(
            [state.context[0].text(), state.context[PAGE + 1].text(), state.context[-1].text()]
        )
        seen.append([m.text() for m in state.context[:3]])
        return Message.text_message(f"{len(state.context)} messages", "assistant")

    store = sql_backend.open()
    reads = Reads(store)
    result = await app_on(store, look).ainvoke(
        {"messages": [Message.text_message("new")]}, {"thread_id": "t"}
    )
    assert seen == [["m0", f"m{PAGE + 1}", "new"], ["m0", "m1", "m2"]]
    assert result["messages"][-1].text() == f"{LONG + 1} messages"
    assert reads.calls == [(0, PAGE), (PAGE, 2 * PAGE)]


async def test_iterating_a_cold_history_reads_it_once(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    seen: list[str] = []

    def read_all(state: AgentState) -> None:
        seen.extend(m.text() for m in state.context)

    await app_on(store, read_all).ainvoke(
        {"messages": [Message.text_message("new")]}, {"thread_id": "t"}
    )
    assert seen == [*(f"m{i}" for i in range(LONG)), "new"]
    assert len(reads.calls) == 1


async def test_a_resent_old_turn_is_recognised_without_loading_the_history(
    sql_backend: Backend,
) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    app = app_on(store, reply)
    config = {"thread_id": "t"}
    # turn 2 (id-2, answered by id-3) is far outside the recent messages: sent again, it
    # gets its stored answer and adds nothing
    result = await app.ainvoke({"messages": [text(2)]}, config)
    assert [m.text() for m in result["messages"]] == ["m2", "m3"]
    snapshot = await sql_backend.open().aload("t", AgentState)
    assert snapshot is not None
    assert len(snapshot.state.context) == LONG


async def test_the_input_ids_are_looked_up_by_the_load(sql_backend: Backend) -> None:
    """The input's ids looked up with the load: an old message sent again (stored, outside
    the recent ones) and a new one (not stored) are told apart without another query on
    PostgreSQL, and the stored one is not added twice."""
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    new = Message.text_message("new")
    await app_on(store, reply).ainvoke({"messages": [text(1), new]}, {"thread_id": "t"})
    expected = [] if sql_backend.name == "postgres" else [[text(1).message_id, new.message_id]]
    assert reads.lookups == expected
    snapshot = await sql_backend.open().aload("t", AgentState)
    assert snapshot is not None
    assert [m.text() for m in snapshot.state.context][LONG - 1 :] == [
        f"m{LONG - 1}",
        "new",
        "reply to new",
    ]
    assert reads.calls == []


async def test_a_node_returning_an_old_message_again_adds_nothing(sql_backend: Backend) -> None:
    await seed(sql_backend.store)

    def repeat(state: AgentState) -> list[Message]:
        return [text(1), Message.text_message("fresh", "assistant")]

    store = sql_backend.open()
    reads = Reads(store)
    await app_on(store, repeat).ainvoke(
        {"messages": [Message.text_message("new")]}, {"thread_id": "t"}
    )
    snapshot = await sql_backend.open().aload("t", AgentState)
    assert snapshot is not None
    assert [m.text() for m in snapshot.state.context][-3:] == [f"m{LONG - 1}", "new", "fresh"]
    assert len(snapshot.state.context) == LONG + 2
    assert reads.calls == []  # the id was looked up, not the history read


@pytest.mark.parametrize("granularity", ["partial", "full"])
async def test_results_hand_out_the_lazy_history(sql_backend: Backend, granularity: str) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    result = await app_on(store, reply).ainvoke(
        {"messages": [Message.text_message("new")]},
        {"thread_id": "t"},
        response_granularity=granularity,
    )
    context = result["context"] if granularity == "partial" else result["state"].context
    assert isinstance(context, LazyHistory)
    assert len(context) == LONG + 2
    assert reads.calls == []
    assert context[0].text() == "m0"  # read when asked for
    assert all(map(is_sealed, context))
    context.append(Message.text_message("mine"))  # the caller's list: the thread is unchanged
    stored = await app_on(sql_backend.open(), reply).aget_state({"thread_id": "t"})
    assert stored is not None
    assert len(stored.context) == LONG + 2


async def test_get_state_of_a_cold_thread_is_lazy_and_complete(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    state = await app_on(store, reply).aget_state({"thread_id": "t"})
    assert state is not None
    assert reads.calls == []
    assert [m.text() for m in state.context] == [f"m{i}" for i in range(LONG)]
    assert state.model_dump()["context"][0]["message_id"] == "id-0"


async def test_a_history_rewritten_after_loading_refuses_to_read_old_messages(
    sql_backend: Backend,
) -> None:
    await seed(sql_backend.store)
    state = await app_on(sql_backend.open(), reply).aget_state({"thread_id": "t"})
    assert state is not None
    version = await sql_backend.store.aversion("t")
    await sql_backend.store.asave(
        "t", expected_version=version, state=AgentState(), new_messages=[text(0)], rewrite=True
    )
    with pytest.raises(StorageError, match="rewritten or deleted after this state was loaded"):
        _ = state.context[1]
    assert state.context[-1].text() == f"m{LONG - 1}"  # what is in memory stays readable


async def test_a_history_of_a_thread_deleted_and_made_again_never_reads_the_new_one(
    sql_backend: Backend,
) -> None:
    # the new thread has the old one's id, generation and more messages: only its key (never
    # given twice, though the old one was the newest) tells that its log is another
    await seed(sql_backend.store)
    state = await app_on(sql_backend.open(), reply).aget_state({"thread_id": "t"})
    assert state is not None
    assert await sql_backend.store.adelete_thread("t")
    other = [Message.text_message(f"other {i}", message_id=f"other-{i}") for i in range(LONG + 9)]
    await sql_backend.store.asave(
        "t", expected_version=None, state=AgentState(), new_messages=other
    )
    with pytest.raises(StorageError, match="rewritten or deleted after this state was loaded"):
        _ = state.context[1]
    with pytest.raises(StorageError, match="rewritten or deleted after this state was loaded"):
        _ = [m.message_id for m in state.context if m.role == "system"]
    assert state.context[-1].text() == f"m{LONG - 1}"  # what is in memory stays readable


async def test_update_state_on_a_cold_thread_appends_without_loading(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    app = app_on(store, reply)
    await app.aupdate_state({"thread_id": "t"}, [Message.text_message("noted", "assistant")])
    assert reads.calls == []
    with pytest.raises(ValueError, match="already has message"):
        await app.aupdate_state({"thread_id": "t"}, [text(3)])
    stored = await sql_backend.open().aload("t", AgentState)
    assert stored is not None
    assert [m.text() for m in stored.state.context][-2:] == [f"m{LONG - 1}", "noted"]


async def test_a_context_manager_keeps_old_system_messages_reading_only_those(
    sql_backend: Backend,
) -> None:
    from tenxgraph.core.state.context_manager import MessageContextManager

    log = [text(i) for i in range(LONG)]
    log[PAGE + 10] = Message.text_message("be brief", "system", message_id="sys")
    # a user message whose metadata mentions the role: found by the index, then left out
    log[PAGE + 12] = Message.text_message("hi", "user", message_id="meta")
    log[PAGE + 12].metadata["x"] = {"role": "system"}
    await sql_backend.store.asave("t", expected_version=None, state=AgentState(), new_messages=log)
    store = sql_backend.open()
    reads = Reads(store)
    state = await app_on(store, reply).aget_state({"thread_id": "t"})
    assert state is not None
    manager = MessageContextManager(max_messages=2)
    kept = manager.trim_messages(state.context)
    expected = [m.message_id for m in manager.trim_messages(log)]
    assert [m.message_id for m in kept] == expected
    assert expected[:2] == ["id-0", "sys"]
    assert "meta" not in expected
    assert reads.calls == [(0, PAGE)]  # the first message's page; nothing in between


async def test_the_recent_messages_are_decoded_when_first_read(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    store = sql_backend.open()
    reads = Reads(store)
    snapshot = await store.aload_recent("t", AgentState, RECENT_MESSAGES)
    assert snapshot is not None
    history = snapshot.state.context
    assert isinstance(history, LazyHistory)
    pager = history._pager
    assert pager is not None
    assert pager.held() == RECENT_MESSAGES  # read with the thread, none decoded yet
    assert history.in_memory() == RECENT_MESSAGES
    message = history[-3]
    assert message.text() == f"m{LONG - 3}"
    assert is_sealed(message)
    assert pager.held() == RECENT_MESSAGES - 1
    # a copy (as a run's step makes) shares what was decoded: the same object, decoded once
    assert history.copy()[-3] is message
    assert [m.text() for m in history[-RECENT_MESSAGES:]] == [
        f"m{i}" for i in range(LONG - RECENT_MESSAGES, LONG)
    ]
    assert pager.held() == 0
    assert history.in_memory() == RECENT_MESSAGES
    assert reads.calls == []  # all of it without a query


async def test_a_corrupt_recent_row_is_named_when_read(sql_backend: Backend) -> None:
    await seed(sql_backend.store)
    await sql_backend.sql(
        "UPDATE tx_messages SET body = ? "
        "WHERE thread_key = (SELECT thread_key FROM tx_threads WHERE thread_id = ?) AND seq = ?",
        '{"role": "robot", "content": []}',
        "t",
        LONG - 2,
    )
    snapshot = await sql_backend.open().aload_recent("t", AgentState, RECENT_MESSAGES)
    assert snapshot is not None
    assert snapshot.state.context[-1].text() == f"m{LONG - 1}"
    with pytest.raises(SerializationError, match=rf"'t'.*'context\.{LONG - 2}\.role'") as caught:
        _ = snapshot.state.context[-2]
    assert caught.value.context == {"thread_id": "t", "field": f"context.{LONG - 2}.role"}


async def test_system_messages_among_the_recent_ones_need_no_query(sql_backend: Backend) -> None:
    log = [text(i) for i in range(LONG)]
    log[LONG - 5] = Message.text_message("be brief", "system", message_id="sys")
    await sql_backend.store.asave("t", expected_version=None, state=AgentState(), new_messages=log)
    store = sql_backend.open()
    asked: list[tuple[int, int]] = []
    original = store.asystem_messages

    async def counted(
        thread_id: str, state_type: Any, generation: int, start: int, stop: int, **kw: Any
    ) -> Any:
        asked.append((start, stop))
        return await original(thread_id, state_type, generation, start, stop, **kw)

    store.asystem_messages = counted  # type: ignore[method-assign]
    snapshot = await store.aload_recent("t", AgentState, RECENT_MESSAGES)
    assert snapshot is not None
    history = snapshot.state.context
    assert isinstance(history, LazyHistory)
    found = history.with_role_system(LONG - RECENT_MESSAGES, LONG)
    assert [m.message_id for m in found] == ["sys"]
    assert asked == []
    # a range reaching below the recent messages asks the store about that part only
    assert [m.message_id for m in history.with_role_system(1, LONG)] == ["sys"]
    assert asked == [(1, LONG - RECENT_MESSAGES)]


class Copies:
    """Counts the copies of lazy histories (`LazyHistory._derive`, what a merge makes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = LazyHistory._derive

        def counted(history: LazyHistory) -> LazyHistory:
            self.count += 1
            return original(history)

        monkeypatch.setattr(LazyHistory, "_derive", counted)


async def test_a_cold_turn_appends_its_input_to_the_history_it_read(
    sql_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history read from the store for a run is held by that run alone: the input is
    appended to it in place (a merge copies every position, 50,000 slots at 50,000 messages);
    the node's answer is merged as ever, into a copy."""
    await seed(sql_backend.store)
    copies = Copies(monkeypatch)
    seen: list[list[Message]] = []

    def node(state: AgentState) -> Message:
        seen.append(state.context)
        return reply(state)

    app = app_on(sql_backend.open(), node)
    await app.ainvoke({"messages": [Message.text_message("new")]}, {"thread_id": "t"})
    assert copies.count == 1  # the node's merge only
    assert [m.text() for m in seen[0][-2:]] == [f"m{LONG - 1}", "new"]
    await app.ainvoke({"messages": [Message.text_message("again")]}, {"thread_id": "t"})
    assert copies.count == 3  # a kept history is merged into a copy, input and answer alike
    assert [m.text() for m in seen[0][-2:]] == [f"m{LONG - 1}", "new"]  # unchanged since
    stored = await sql_backend.open().aload("t", AgentState)
    assert stored is not None
    assert [m.text() for m in stored.state.context][LONG - 1 :] == [
        f"m{LONG - 1}",
        "new",
        "reply to new",
        "again",
        "reply to again",
    ]


async def test_a_history_kept_by_update_state_is_not_appended_in_place(
    sql_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`update_state` without messages keeps the very history it read; the next run may not
    append to it in place (whatever kept it may still hold it)."""
    await seed(sql_backend.store)
    app = app_on(sql_backend.open(), reply)
    await app.aupdate_state({"thread_id": "t"}, {"context_summary": "so far"})
    copies = Copies(monkeypatch)
    await app.ainvoke({"messages": [Message.text_message("new")]}, {"thread_id": "t"})
    assert copies.count == 2
    stored = await sql_backend.open().aload("t", AgentState)
    assert stored is not None
    assert stored.state.context_summary == "so far"
    assert [m.text() for m in stored.state.context][-2:] == ["new", "reply to new"]


async def test_a_run_refused_at_its_first_save_keeps_nothing_of_its_input(
    sql_backend: Backend,
) -> None:
    """The input is appended in place to the run's own read of the thread: a run refused at
    its first save (another run holds the thread) leaves nothing of it, in the store or in
    the app, and the next run reads the thread afresh."""
    await seed(sql_backend.store)
    holder = sql_backend.open()
    version = await holder.aversion("t")
    lease = Lease("another-run", 30.0)
    await holder.asave(
        "t", expected_version=version, state=AgentState(), new_messages=[], lease=lease
    )
    app = app_on(sql_backend.open(), reply)
    with pytest.raises(ThreadBusyError):
        await app.ainvoke({"messages": [Message.text_message("refused")]}, {"thread_id": "t"})
    await holder.arelease_lease("t", "another-run")
    result = await app.ainvoke({"messages": [Message.text_message("new")]}, {"thread_id": "t"})
    assert [m.text() for m in result["messages"]] == ["new", "reply to new"]
    stored = await sql_backend.open().aload("t", AgentState)
    assert stored is not None
    texts = [m.text() for m in stored.state.context]
    assert "refused" not in texts
    assert texts[LONG - 1 :] == [f"m{LONG - 1}", "new", "reply to new"]
