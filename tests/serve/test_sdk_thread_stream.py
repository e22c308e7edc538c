"""LangGraph's v3 thread streams (`client.threads.stream`) over the Agent Protocol's
thread commands and event stream: a run's output, its values, a pause for a human and the
answer that resumes it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tests.serve.conftest import Served
from tests.serve.graphs import ANSWER_PIECES

SAY = {"messages": [{"role": "user", "content": "hello"}]}


def _last(values: Any) -> str:
    return str(values["messages"][-1]["content"])


async def test_a_run_started_on_a_new_thread_gives_its_output(served: Served) -> None:
    client = served.client()
    async with client.threads.stream(assistant_id="agent") as thread:
        started = await thread.run.start(input=SAY)
        assert started["run_id"]
        output = await asyncio.wait_for(thread.output, 20)
        assert _last(output) == "".join(ANSWER_PIECES)
    state = await client.threads.get_state(thread.thread_id)
    assert _last(state["values"]) == "".join(ANSWER_PIECES)


async def test_a_pause_for_a_human_and_the_answer(served: Served) -> None:
    client = served.client()
    async with client.threads.stream(assistant_id="approval") as thread:
        await thread.run.start(input=SAY)
        snapshots = [snap async for snap in thread.values]
        assert snapshots
        assert thread.interrupted
        assert thread.interrupts[0]["value"] == {"amount": 40, "to": "Bob"}
        await thread.run.respond("yes")
        output = await asyncio.wait_for(thread.output, 20)
        assert _last(output) == "done: sent 40 to Bob"


async def test_join_stream_of_a_thread_follows_its_runs(served: Served) -> None:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    first = await client.runs.create(thread_id, "held", input=SAY, stream_mode="updates")
    await served.gate.wait_entered()
    second = await client.runs.create(thread_id, "held", input=SAY, stream_mode="updates")
    seen: list[tuple[str, Any]] = []
    async with contextlib.aclosing(await client.threads.join_stream(thread_id)) as parts:
        async for part in parts:
            seen.append((part.event, part.data))
            if part.event == "metadata" and part.data["run_id"] == first["run_id"]:
                served.gate.release.set()
            if part.event == "end" and len([e for e, _ in seen if e == "end"]) == 2:
                break
    runs = [data["run_id"] for event, data in seen if event == "metadata"]
    assert runs == [first["run_id"], second["run_id"]]
    updates = [data for event, data in seen if event == "updates"]
    assert [u["hold"]["messages"][0]["content"] for u in updates] == ["held 1", "held 3"]
