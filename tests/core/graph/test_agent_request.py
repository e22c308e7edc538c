"""How an Agent builds each model request: system prompts, history and extra messages in order,
and a subclass's own `build_request` used for every request, streamed or not."""

from __future__ import annotations

import pytest

from tenxgraph.core.graph import Agent
from tenxgraph.core.llm import FunctionModel, ModelInfo, ModelRequest
from tenxgraph.core.state import AgentState, Message
from tests.core.graph._support import inp, linear


class Recorder:
    def __init__(self) -> None:
        self.asked: list[list[tuple[str, str]]] = []

    def __call__(self, messages: list[Message], info: ModelInfo) -> str:
        self.asked.append([(m.role, m.text()) for m in messages])
        return "ok"


class Noted(Agent):
    """An Agent whose requests carry one more system message."""

    async def build_request(self, state: AgentState) -> ModelRequest:
        request = await super().build_request(state)
        request.messages.insert(0, Message.text_message("noted", "system"))
        return request


async def answers(agent: Agent, stream: bool) -> list[str]:
    app = linear(("agent", agent), checkpointer=False)
    if stream:
        chunks = [c async for c in app.astream(inp("hi"), {"thread_id": "t"})]
        return [c.message.text() for c in chunks if c.message and not c.message.delta]
    result = await app.ainvoke(inp("hi"), {"thread_id": "t"})
    return [m.text() for m in result["messages"]]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_subclass_build_request_makes_every_request(stream: bool) -> None:
    recorder = Recorder()
    agent = Noted(FunctionModel(recorder), system_prompt="be brief")
    assert "ok" in await answers(agent, stream)
    assert recorder.asked == [[("system", "noted"), ("system", "be brief"), ("user", "hi")]]


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_holds_prompts_summary_history_and_extra_messages(stream: bool) -> None:
    recorder = Recorder()
    agent = Agent(
        FunctionModel(recorder),
        system_prompt=["one", "two"],
        extra_messages=[Message.text_message("after", "user")],
    )
    assert "ok" in await answers(agent, stream)
    assert recorder.asked == [
        [("system", "one"), ("system", "two"), ("user", "hi"), ("user", "after")]
    ]
    direct = await agent.build_request(AgentState(context=[Message.text_message("x")]))
    assert [(m.role, m.text()) for m in direct.messages] == [
        ("system", "one"),
        ("system", "two"),
        ("user", "x"),
        ("user", "after"),
    ]
    assert direct.tools == []
