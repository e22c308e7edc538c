"""Several runs on one thread (multitask strategies), clients that go away, and heartbeats on
a quiet stream. The `held` graph's step waits at the test's gate, so a run stays running
exactly as long as the test wants."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError

from tenxgraph.serve.server import DEFAULT_HEARTBEAT
from tests.serve.conftest import Served


def _says(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


async def _busy(served: Served) -> tuple[LangGraphClient, str, str]:
    """A thread whose `held` run is running (waiting at the gate)."""
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    run = await client.runs.create(thread_id, "held", input=_says("first"))
    await served.gate.wait_entered()
    return client, thread_id, str(run["run_id"])


async def _texts(client: LangGraphClient, thread_id: str) -> list[str]:
    state = await client.threads.get_state(thread_id)
    return [m["content"] for m in state["values"].get("messages", [])]


async def test_reject_answers_409_and_writes_nothing(served: Served) -> None:
    client, thread_id, first = await _busy(served)
    with pytest.raises(ConflictError):
        await client.runs.create(
            thread_id, "held", input=_says("second"), multitask_strategy="reject"
        )
    with pytest.raises(ConflictError):  # another assistant's run changes nothing either
        await client.runs.create(
            thread_id, "agent", input=_says("second"), multitask_strategy="reject"
        )
    assert (await client.threads.get(thread_id))["metadata"]["graph_id"] == "held"
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [first]
    served.gate.release.set()
    await client.runs.join(thread_id, first)
    assert await _texts(client, thread_id) == ["first", "held 1"]


async def test_enqueue_runs_after_the_running_one_in_order(served: Served) -> None:
    client, thread_id, first = await _busy(served)
    second = await client.runs.create(
        thread_id, "held", input=_says("second"), multitask_strategy="enqueue"
    )
    third = await client.runs.create(
        thread_id, "held", input=_says("third"), multitask_strategy="enqueue"
    )
    assert (await client.runs.get(thread_id, second["run_id"]))["status"] == "pending"
    served.gate.release.set()
    await client.runs.join(thread_id, third["run_id"])
    for run_id in (first, second["run_id"], third["run_id"]):
        assert (await client.runs.get(thread_id, run_id))["status"] == "success"
    assert await _texts(client, thread_id) == [
        "first", "held 1", "second", "held 3", "third", "held 5",
    ]  # fmt: skip


async def test_interrupt_stops_the_running_run_first(served: Served) -> None:
    client, thread_id, first = await _busy(served)
    second = await client.runs.create(
        thread_id, "held", input=_says("second"), multitask_strategy="interrupt"
    )
    await client.runs.join(thread_id, first)  # ends without the gate opening
    assert (await client.runs.get(thread_id, first))["status"] == "interrupted"
    served.gate.release.set()
    await client.runs.join(thread_id, second["run_id"])
    assert (await client.runs.get(thread_id, second["run_id"]))["status"] == "success"
    texts = await _texts(client, thread_id)
    assert texts[-2:] == ["second", f"held {len(texts) - 1}"]
    assert texts.count("held 1") == 0  # the first run's step never finished


async def test_a_foreground_stream_whose_client_leaves_is_cancelled(served: Served) -> None:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    stream = client.runs.stream(thread_id, "held", input=_says("hi"))
    first = await anext(stream)
    await served.gate.wait_entered()
    await stream.aclose()  # the client goes away mid-run
    run_id = first.data["run_id"]
    await client.runs.join(thread_id, run_id)
    assert (await client.runs.get(thread_id, run_id))["status"] == "interrupted"
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_a_background_run_goes_on_when_its_follower_leaves(served: Served) -> None:
    client, thread_id, run_id = await _busy(served)
    stream = client.runs.join_stream(thread_id, run_id)
    await anext(stream)
    await stream.aclose()
    assert (await client.runs.get(thread_id, run_id))["status"] == "running"
    served.gate.release.set()
    await client.runs.join(thread_id, run_id)
    assert (await client.runs.get(thread_id, run_id))["status"] == "success"


@pytest.mark.parametrize("served", [{"heartbeat": 0.05}], indirect=True)
async def test_a_quiet_stream_gets_ping_comments(served: Served) -> None:
    assert DEFAULT_HEARTBEAT == 15
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    pings = 0
    async with (
        served.http() as http,
        http.stream(
            "POST", f"/threads/{thread_id}/runs/stream",
            json={"assistant_id": "held", "input": _says("hi")},
        ) as response,
    ):  # fmt: skip
        async for line in response.aiter_lines():
            if line.startswith(":"):
                pings += 1
                if pings == 2:
                    served.gate.release.set()
            if line.startswith("event: end"):
                break
    assert pings >= 2


async def test_deleting_a_thread_with_a_running_run_leaves_no_state(served: Served) -> None:
    client, thread_id, _run_id = await _busy(served)
    await client.threads.delete(thread_id)
    served.gate.release.set()
    again = await client.threads.create(thread_id=thread_id)
    assert (await client.threads.get_state(again["thread_id"]))["values"] == {}
    assert await client.runs.list(thread_id) == []


async def _gone(client: LangGraphClient) -> None:
    """Wait until the server has deleted every thread (bounded; a stateless run's thread goes
    right after the run ends, apart from the request that ended it)."""
    for _ in range(500):
        if await client.threads.count() == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the stateless run's thread is still there")


async def test_a_stateless_stream_whose_client_leaves_is_cancelled_and_forgotten(
    served: Served,
) -> None:
    client = served.client()
    stream = client.runs.stream(None, "held", input=_says("hi"))
    await anext(stream)
    await served.gate.wait_entered()
    [_thread] = await client.threads.search()
    await stream.aclose()
    await _gone(client)
    assert served.gate.started == 1
    served.gate.release.set()
    assert await client.threads.count() == 0


async def test_a_wait_whose_client_leaves_is_cancelled(served: Served) -> None:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    waiting = asyncio.create_task(client.runs.wait(thread_id, "held", input=_says("hi")))
    await served.gate.wait_entered()
    [run] = await client.runs.list(thread_id)
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await client.runs.join(thread_id, run["run_id"])  # ends without the gate opening
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "interrupted"


async def test_a_stateless_wait_whose_client_leaves_is_cancelled_and_forgotten(
    served: Served,
) -> None:
    client = served.client()
    waiting = asyncio.create_task(client.runs.wait(None, "held", input=_says("hi")))
    await served.gate.wait_entered()
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    await _gone(client)
