"""Runs through LangGraph's own client: background, wait, stream in each mode, join, replay,
list/get/cancel/delete, stateless runs, interrupt and resume."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError
from langgraph_sdk.schema import StreamPart

from tests.serve.conftest import Served
from tests.serve.graphs import ANSWER_PIECES

HELLO = {"messages": [{"type": "human", "content": "hello"}]}
ANSWER = "".join(ANSWER_PIECES)


async def collect(parts: AsyncIterator[StreamPart]) -> list[StreamPart]:
    return [part async for part in parts]


async def _thread(client: LangGraphClient) -> str:
    return str((await client.threads.create())["thread_id"])


async def test_background_run_then_join(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    run = await client.runs.create(thread_id, "agent", input=HELLO)
    assert run["status"] in ("pending", "running")
    result = await client.runs.join(thread_id, run["run_id"])
    assert result["messages"][-1]["content"] == ANSWER
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"


async def test_wait_answers_the_final_values(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    result = await client.runs.wait(thread_id, "agent", input=HELLO)
    assert isinstance(result, dict)
    assert [m["type"] for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_stream_values(client: LangGraphClient) -> None:
    parts = await collect(client.runs.stream(await _thread(client), "agent", input=HELLO))
    assert parts[0].event == "metadata"
    values = [p.data for p in parts if p.event == "values"]
    assert len(values) >= 2
    assert values[-1]["messages"][-1]["content"] == ANSWER


async def test_stream_updates_name_each_node(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(await _thread(client), "agent", input=HELLO, stream_mode="updates")
    )
    updates = [p.data for p in parts if p.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["agent", "tools", "agent"]
    assert updates[1]["tools"]["messages"][0]["content"] == "Lisbon: sunny"


async def test_stream_messages_tuple_streams_the_answer_in_chunks(
    client: LangGraphClient,
) -> None:
    parts = await collect(
        client.runs.stream(
            await _thread(client), "agent", input=HELLO, stream_mode="messages-tuple"
        )
    )
    pairs = [p.data for p in parts if p.event == "messages"]
    chunks = [m["content"] for m, _ in pairs if m["type"] == "AIMessageChunk"]
    assert chunks == ANSWER_PIECES
    assert all(meta["langgraph_node"] in ("agent", "tools") for _, meta in pairs)


async def test_stream_messages_legacy_partial_then_complete(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(await _thread(client), "agent", input=HELLO, stream_mode="messages")
    )
    partial = [p.data[0]["content"] for p in parts if p.event == "messages/partial"]
    assert partial[-1] == ANSWER
    assert len(partial) == len(ANSWER_PIECES)
    complete = [p.data[0]["content"] for p in parts if p.event == "messages/complete"]
    assert complete[-1] == ANSWER
    assert any(p.event == "messages/metadata" for p in parts)


async def test_custom_mode_streams_what_a_node_yields_as_custom_events(
    client: LangGraphClient,
) -> None:
    parts = await collect(
        client.runs.stream(await _thread(client), "progress", input=HELLO, stream_mode="custom")
    )
    assert [(p.event, p.data) for p in parts[1:-1]] == [
        ("custom", {"done": 1, "of": 2}),
        ("custom", {"done": 2, "of": 2}),
    ]
    assert (parts[0].event, parts[-1].event) == ("metadata", "end")


@pytest.mark.parametrize("mode", ["custom", "events", "debug", "tasks", "checkpoints"])
async def test_modes_without_events_give_only_metadata_and_end(
    client: LangGraphClient, mode: Any
) -> None:
    """A graph whose nodes stream nothing of their own sends no `custom` event, and the
    server sends none of LangGraph's `events`, `debug`, `tasks` or `checkpoints` modes: such
    a stream has only the run's `metadata` and `end` (the modes are accepted, so a client
    asking for them along with others works)."""
    parts = await collect(
        client.runs.stream(await _thread(client), "agent", input=HELLO, stream_mode=mode)
    )
    assert [p.event for p in parts] == ["metadata", "end"]


async def test_stream_subgraphs_names_the_childs_events(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    parts = await collect(
        client.runs.stream(
            thread_id, "nested", input=HELLO, stream_mode="updates", stream_subgraphs=True
        )
    )
    events = [p.event for p in parts]
    assert "updates|child" in events
    child = next(p.data for p in parts if p.event == "updates|child")
    assert child["inner"]["messages"][0]["content"] == "from child"
    without = await collect(
        client.runs.stream(thread_id, "nested", input=HELLO, stream_mode="updates")
    )
    assert not [p for p in without if "|" in p.event]


async def test_join_stream_after_the_end_replays_everything(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    live = await collect(
        client.runs.stream(thread_id, "agent", input=HELLO, stream_mode=["values", "updates"])
    )
    run_id = live[0].data["run_id"]
    again = await collect(client.runs.join_stream(thread_id, run_id))
    assert [(p.id, p.event, p.data) for p in again] == [(p.id, p.event, p.data) for p in live]


async def test_last_event_id_replays_only_what_was_missed(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    live = await collect(client.runs.stream(thread_id, "agent", input=HELLO, stream_mode="updates"))
    run_id, seen = live[0].data["run_id"], live[2].id
    assert seen is not None
    rest = await collect(client.runs.join_stream(thread_id, run_id, last_event_id=seen))
    assert [p.id for p in rest] == [p.id for p in live[3:]]


async def test_list_get_and_delete_runs(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    first = await client.runs.create(thread_id, "agent", input=HELLO)
    await client.runs.join(thread_id, first["run_id"])
    second = await client.runs.create(thread_id, "agent", input=HELLO)
    await client.runs.join(thread_id, second["run_id"])
    listed = await client.runs.list(thread_id)
    assert {r["run_id"] for r in listed} == {first["run_id"], second["run_id"]}
    assert len(await client.runs.list(thread_id, limit=1)) == 1
    got = await client.runs.get(thread_id, first["run_id"])
    assert got["thread_id"] == thread_id
    assert got["assistant_id"] in ("agent", got["assistant_id"])
    await client.runs.delete(thread_id, first["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(thread_id, first["run_id"])
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [second["run_id"]]


async def test_cancel_a_running_run_ends_it_interrupted(served: Served) -> None:
    client = served.client()
    thread_id = await _thread(client)
    run = await client.runs.create(thread_id, "held", input=HELLO)
    await served.gate.wait_entered()
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"
    assert (await client.threads.get(thread_id))["status"] == "idle"
    served.gate.release.set()
    result = await client.runs.wait(thread_id, "held", input=HELLO)
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"].startswith("held")


async def test_stateless_runs_leave_no_thread(client: LangGraphClient) -> None:
    result = await client.runs.wait(None, "agent", input=HELLO)
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"] == ANSWER
    parts = await collect(client.runs.stream(None, "agent", input=HELLO))
    assert parts[-1].event == "end"
    assert await client.threads.search() == []
    assert await client.threads.count() == 0


async def test_interrupt_then_resume_with_a_command(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    paused: Any = await client.runs.wait(thread_id, "approval", input=HELLO)
    assert paused["__interrupt__"][0]["value"] == {"amount": 40, "to": "Bob"}
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    state = await client.threads.get_state(thread_id)
    assert state["tasks"][0]["interrupts"][0]["value"] == {"amount": 40, "to": "Bob"}
    done: Any = await client.runs.wait(thread_id, "approval", command={"resume": "yes"})
    assert done["messages"][-1]["content"] == "done: sent 40 to Bob"
    assert "__interrupt__" not in done
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_a_failing_run(client: LangGraphClient) -> None:
    thread_id = await _thread(client)
    with pytest.raises(Exception, match="the step broke"):
        await client.runs.wait(thread_id, "failing", input=HELLO)
    [run] = await client.runs.list(thread_id)
    assert run["status"] == "error"
    assert (await client.threads.get(thread_id))["status"] == "error"
    parts = await collect(client.runs.stream(thread_id, "failing", input=HELLO))
    [error] = [p.data for p in parts if p.event == "error"]
    assert set(error) == {"error", "message"}
    assert "the step broke" in error["message"]
    assert parts[-1].event == "end"


async def test_a_run_on_a_new_thread_with_if_not_exists_create(client: LangGraphClient) -> None:
    thread_id = "5d9c4c3e-0000-4000-8000-000000000001"
    result = await client.runs.wait(thread_id, "agent", input=HELLO, if_not_exists="create")
    assert isinstance(result, dict)
    assert result["messages"][-1]["content"] == ANSWER
    assert (await client.threads.get(thread_id))["metadata"]["graph_id"] == "agent"
    with pytest.raises(httpx.HTTPStatusError) as raised:  # the client's error for a wait
        await client.runs.wait("5d9c4c3e-0000-4000-8000-000000000002", "agent", input=HELLO)
    assert raised.value.response.status_code == 404


async def test_several_stream_modes_at_once(client: LangGraphClient) -> None:
    parts = await collect(
        client.runs.stream(
            await _thread(client), "agent", input=HELLO,
            stream_mode=["values", "updates", "messages-tuple"],
        )
    )  # fmt: skip
    assert {p.event for p in parts} == {"metadata", "values", "updates", "messages", "end"}
