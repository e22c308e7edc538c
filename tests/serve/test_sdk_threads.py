"""Threads through LangGraph's own client: create, read, patch, search, count, copy, delete,
state, history."""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

HELLO = {"messages": [{"type": "human", "content": "hello"}]}


async def _ran(client: LangGraphClient, text: str = "hello") -> str:
    thread = await client.threads.create()
    await client.runs.wait(
        thread["thread_id"], "agent", input={"messages": [{"type": "human", "content": text}]}
    )
    return str(thread["thread_id"])


async def test_create_with_and_without_id_and_if_exists(client: LangGraphClient) -> None:
    made = await client.threads.create(metadata={"user": "ann"})
    assert made["metadata"]["user"] == "ann"
    assert made["status"] == "idle"
    chosen = str(uuid.uuid4())
    assert (await client.threads.create(thread_id=chosen))["thread_id"] == chosen
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=chosen)
    again = await client.threads.create(thread_id=chosen, if_exists="do_nothing")
    assert again["thread_id"] == chosen


async def test_get_update_metadata_and_unknown(client: LangGraphClient) -> None:
    made = await client.threads.create(metadata={"a": 1})
    await client.threads.update(made["thread_id"], metadata={"b": 2})
    got = await client.threads.get(made["thread_id"])
    assert got["metadata"]["a"] == 1
    assert got["metadata"]["b"] == 2
    with pytest.raises(NotFoundError):
        await client.threads.get(str(uuid.uuid4()))


async def test_search_by_metadata_status_ids_with_limit_offset(client: LangGraphClient) -> None:
    made = [await client.threads.create(metadata={"team": "red", "n": i}) for i in range(5)]
    await client.threads.create(metadata={"team": "blue"})
    red = await client.threads.search(metadata={"team": "red"}, limit=10)
    assert {t["thread_id"] for t in red} == {t["thread_id"] for t in made}
    page = await client.threads.search(metadata={"team": "red"}, limit=2, offset=2)
    assert len(page) == 2
    assert {t["thread_id"] for t in page} < {t["thread_id"] for t in red}
    ids = [made[0]["thread_id"], made[3]["thread_id"]]
    assert {t["thread_id"] for t in await client.threads.search(ids=ids)} == set(ids)
    idle = await client.threads.search(status="idle", limit=100)
    assert len(idle) == 6
    assert await client.threads.search(status="busy") == []
    assert await client.threads.count(metadata={"team": "red"}) == 5
    assert await client.threads.count() == 6


async def test_copy_has_the_same_messages_and_is_independent(client: LangGraphClient) -> None:
    source = await _ran(client)
    copy = await client.threads.copy(source)
    assert copy["thread_id"] != source
    before = (await client.threads.get_state(source))["values"]["messages"]
    copied = (await client.threads.get_state(copy["thread_id"]))["values"]["messages"]
    assert [m["content"] for m in copied] == [m["content"] for m in before]
    await client.runs.wait(
        copy["thread_id"], "agent", input={"messages": [{"type": "human", "content": "more"}]}
    )
    after = (await client.threads.get_state(source))["values"]["messages"]
    assert len(after) == len(before)
    grown = (await client.threads.get_state(copy["thread_id"]))["values"]["messages"]
    assert len(grown) > len(before)


async def test_delete_removes_the_thread_and_its_state(client: LangGraphClient) -> None:
    thread_id = await _ran(client)
    await client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await client.threads.get(thread_id)
    with pytest.raises(NotFoundError):
        await client.threads.get_state(thread_id)
    again = await client.threads.create(thread_id=thread_id)
    assert (await client.threads.get_state(again["thread_id"]))["values"] == {}


async def test_get_state_and_update_state_adds_a_message(client: LangGraphClient) -> None:
    thread_id = await _ran(client)
    state = await client.threads.get_state(thread_id)
    texts = [m["content"] for m in state["values"]["messages"]]
    assert texts[0] == "hello"
    assert texts[-1] == "It is sunny in Lisbon."
    update = {"messages": [{"type": "human", "content": "noted"}]}
    done = await client.threads.update_state(thread_id, update)
    assert done["checkpoint"]["checkpoint_id"]
    later = await client.threads.get_state(thread_id)
    assert [m["content"] for m in later["values"]["messages"]][-1] == "noted"
    assert len(later["values"]["messages"]) == len(texts) + 1


async def test_history_newest_first_with_limit_and_state_at_a_checkpoint(
    client: LangGraphClient,
) -> None:
    thread_id = await _ran(client)
    history = await client.threads.get_history(thread_id, limit=100)
    assert len(history) >= 2
    counts = [len(h["values"].get("messages", [])) for h in history]
    assert counts == sorted(counts, reverse=True)  # newest first
    assert len(await client.threads.get_history(thread_id, limit=1)) == 1
    older = history[-1]
    at = await client.threads.get_state(thread_id, checkpoint_id=older["checkpoint_id"])
    assert at["values"] == older["values"]
    assert at["checkpoint"]["checkpoint_id"] == older["checkpoint"]["checkpoint_id"]
