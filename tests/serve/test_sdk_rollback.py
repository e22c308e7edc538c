"""`rollback`, driven with LangGraph's client: the cancelled run's thread gets back the state
it had when the run started, as a new version (the run's own versions stay in the history),
whether asked by a new run's multitask strategy or by a cancel. The `steps` graph saves its
`note` step, then holds its `answer` step at the test's gate when the input says "hold"."""

from __future__ import annotations

import contextlib
from typing import Any

from langgraph_sdk.client import LangGraphClient

from tests.serve.conftest import Served


def _says(text: str) -> dict[str, Any]:
    return {"messages": [{"type": "human", "content": text}]}


def _texts_of(values: dict[str, Any] | None) -> list[str]:
    return [m["content"] for m in (values or {}).get("messages", [])]


async def _texts(client: LangGraphClient, thread_id: str) -> list[str]:
    return _texts_of((await client.threads.get_state(thread_id))["values"])


async def _held_after_a_step(served: Served, client: LangGraphClient, thread_id: str) -> str:
    """Start a run that saves its `note` step and then waits at the gate; its id, once its
    step is in its stream and its second step has started."""
    run = await client.runs.create(thread_id, "steps", input=_says("hold"), stream_mode="updates")
    run_id = str(run["run_id"])
    async with contextlib.aclosing(client.runs.join_stream(thread_id, run_id)) as parts:
        async for part in parts:
            if part.event == "updates" and "note" in part.data:
                break
    await served.gate.wait_entered()
    return run_id


async def _one_turn_then_held(served: Served) -> tuple[LangGraphClient, str, str, list[str]]:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    await client.runs.wait(thread_id, "steps", input=_says("hi"))
    first = await _texts(client, thread_id)
    assert first == ["hi", "noted hi", "answer 2"]
    second = await _held_after_a_step(served, client, thread_id)
    assert await _texts(client, thread_id) == [*first, "hold", "noted hold"]  # a saved step
    return client, thread_id, second, first


async def _history(client: LangGraphClient, thread_id: str) -> list[list[str]]:
    """The messages of each of the thread's versions, oldest first."""
    states = await client.threads.get_history(thread_id, limit=100)
    return [_texts_of(state["values"]) for state in reversed(states)]


async def test_a_rollback_run_starts_from_the_state_before_the_cancelled_one(
    served: Served,
) -> None:
    client, thread_id, second, first = await _one_turn_then_held(served)
    third = await client.runs.create(
        thread_id, "steps", input=_says("third"), multitask_strategy="rollback"
    )
    await client.runs.join(thread_id, third["run_id"])

    assert await _texts(client, thread_id) == [*first, "third", "noted third", "answer 5"]
    runs = [r["run_id"] for r in await client.runs.list(thread_id)]
    assert len(runs) == 2
    assert third["run_id"] in runs
    assert second not in runs  # the cancelled run is forgotten
    assert (await client.threads.get(thread_id))["status"] == "idle"
    # append-only: the cancelled run's versions, then the revert, then the third run's
    history = await _history(client, thread_id)
    held = max(i for i, texts in enumerate(history) if texts == [*first, "hold", "noted hold"])
    assert history[held + 1] == first
    assert history[-1] == [*first, "third", "noted third", "answer 5"]
    assert all("answer 4" not in texts for texts in history)  # the held step never finished


async def test_cancel_with_rollback_gives_the_thread_its_state_back(served: Served) -> None:
    client, thread_id, second, first = await _one_turn_then_held(served)
    await client.runs.cancel(thread_id, second, wait=True, action="rollback")

    assert await _texts(client, thread_id) == first
    runs = [r["run_id"] for r in await client.runs.list(thread_id)]
    assert len(runs) == 1
    assert second not in runs
    assert (await client.threads.get(thread_id))["status"] == "idle"
    await client.runs.wait(thread_id, "steps", input=_says("again"))
    assert await _texts(client, thread_id) == [*first, "again", "noted again", "answer 5"]


async def test_a_rollback_on_a_thread_that_had_no_state_empties_it(served: Served) -> None:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    run_id = await _held_after_a_step(served, client, thread_id)
    assert await _texts(client, thread_id) == ["hold", "noted hold"]
    await client.runs.cancel(thread_id, run_id, wait=True, action="rollback")

    assert await _texts(client, thread_id) == []
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "idle"
    assert _texts_of(thread["values"]) == []
    await client.runs.wait(thread_id, "steps", input=_says("hi"))
    assert await _texts(client, thread_id) == ["hi", "noted hi", "answer 2"]
    history = await _history(client, thread_id)
    assert ["hold", "noted hold"] in history  # still in the history


async def test_a_rollback_to_a_paused_thread_leaves_it_paused(served: Served) -> None:
    client = served.client()
    thread_id = str((await client.threads.create())["thread_id"])
    await client.runs.wait(thread_id, "steps", input=_says("ask"))
    assert (await client.threads.get(thread_id))["status"] == "interrupted"
    resumed = await client.runs.create(
        thread_id, "steps", command={"resume": "hold"}, stream_mode="updates"
    )
    await served.gate.wait_entered()  # its `note` step is saved: "noted hold"
    assert await _texts(client, thread_id) == ["ask", "noted hold"]
    await client.runs.cancel(thread_id, resumed["run_id"], wait=True, action="rollback")

    assert await _texts(client, thread_id) == ["ask"]
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    assert thread["interrupts"]  # the question is pending again
    await client.runs.wait(thread_id, "steps", command={"resume": "yes"})
    assert await _texts(client, thread_id) == ["ask", "noted yes", "answer 2"]
