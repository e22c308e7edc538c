"""The store of an app compiled without a checkpointer cannot outlive the process, so a run
saves to it when it starts, pauses, fails and ends, not after every step: the same thread at
the end, at a fraction of the cost. A store given to `compile()` is saved after every step."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from tenxgraph.core.exceptions import NodeError
from tenxgraph.core.state import AgentState, Message, replace_messages
from tenxgraph.storage.checkpointer.memory import InMemoryCheckpointer
from tenxgraph.utils.interrupt import interrupt
from tests.core.graph._support import ai, inp, linear, texts


def says(text: str) -> Any:
    async def node(state: AgentState) -> Message:
        return ai(text)

    return node


def three_steps(third: Any = None, checkpointer: Any = None) -> Any:
    return linear(
        ("one", says("1")),
        ("two", says("2")),
        ("three", third or says("3")),
        checkpointer=checkpointer,
    )


async def test_the_default_store_keeps_the_thread_at_the_start_and_end_of_a_run() -> None:
    app = three_steps()
    config = {"thread_id": "t"}
    await app.ainvoke(inp("go"), config)
    history = await app.aget_state_history(config)
    assert [h.version for h in history] == [2, 1]  # the start and the end, nothing between
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2", "3"]
    await app.ainvoke(inp("again"), config)  # the next turn appends to what was kept
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2", "3", "again", "1", "2", "3"]


async def test_a_store_given_to_compile_is_saved_after_every_step() -> None:
    app = three_steps(checkpointer=InMemoryCheckpointer())
    config = {"thread_id": "t"}
    await app.ainvoke(inp("go"), config)
    assert [h.version for h in await app.aget_state_history(config)] == [4, 3, 2, 1]


async def test_a_failure_keeps_the_steps_before_it_and_the_run_continues_from_there() -> None:
    broken = True

    async def third(state: AgentState) -> Message:
        if broken:
            raise ValueError("not yet")
        return ai("3")

    app = three_steps(third)
    config = {"thread_id": "t"}
    with pytest.raises(NodeError, match="not yet"):
        await app.ainvoke(inp("go"), config)
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2"]  # the unsaved steps were saved with it
    assert state.execution_meta.status.value == "error"
    broken = False
    await app.ainvoke(None, config)  # retries the failed step only
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2", "3"]


async def test_a_pause_keeps_the_steps_before_it_and_resumes() -> None:
    async def ask(state: AgentState) -> Message:
        answer = interrupt("ok?")
        return ai(f"answer {answer}")

    app = three_steps(ask)
    config = {"thread_id": "t"}
    result = await app.ainvoke(inp("go"), config)
    assert "interrupt" in result
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2"]
    await app.ainvoke({"resume": "yes"}, config)
    state = await app.aget_state(config)
    assert state is not None
    assert texts(state.context) == ["go", "1", "2", "answer yes"]


class Rewritten(AgentState):
    # a context reducer that replaces: a node may rewrite the history, not only append
    context: Annotated[list[Message], replace_messages] = Field(default_factory=list)


async def test_a_history_rewritten_between_saves_is_kept_as_a_store_saved_every_step_has_it() -> (
    None
):
    async def keep_last(state: Rewritten) -> dict[str, Any]:
        return {"context": [*state.context[-1:], ai("kept")]}

    async def add(state: Rewritten) -> dict[str, Any]:
        return {"context": [*state.context, ai("3")]}

    kept = []
    for store in (None, InMemoryCheckpointer()):
        app = linear(
            ("one", says("1")),
            ("two", keep_last),
            ("three", add),
            state=Rewritten,
            checkpointer=store,
        )
        config = {"thread_id": "t"}
        await app.ainvoke(inp("go"), config)
        state = await app.aget_state(config)
        assert state is not None
        kept.append(texts(state.context))
    assert kept[0] == kept[1] == ["1", "kept", "3"]
