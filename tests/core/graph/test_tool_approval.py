"""Tool calls that wait for a person: which calls are asked about, how decisions are read,
and how they meet the ledger, tool interrupts and streaming. The cross-process flow on every
checkpointer is in tests/adversarial/test_tools.py."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.graph import CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.graph.tool_approval import APPROVAL_REASON, Decision, ask, read_decisions
from tenxgraph.core.graph.tool_calls import ToolCall
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import GraphInterrupt, interrupt, tool
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.interrupt import InterruptScope, current_scope
from tests._helpers import results, thread


def refund(order_id: int, amount: int) -> str:
    """Refund."""
    return f"refunded {amount}"


def note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


TOOLS = ToolNode([refund, note]).tools
REFUND = ToolCall("r1", "refund", {"order_id": 1, "amount": 5})
NOTE = ToolCall("n1", "note", {"text": "hi"})


def tools_graph(node: ToolNode) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("tools", node)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    return graph.compile(checkpointer=InMemoryCheckpointer())


def asking(*calls: ToolCallBlock) -> dict[str, Any]:
    return {
        "messages": [Message.text_message("go"), Message(role="assistant", content=list(calls))]
    }


# -- reading decisions ------------------------------------------------------------------------


def test_decisions_are_read_per_call() -> None:
    decisions = read_decisions(
        {"r1": {"edit": {"order_id": 1, "amount": 2}}, "n1": {"reject": "no notes"}},
        [REFUND, NOTE],
        TOOLS,
    )
    assert decisions == {
        "r1": Decision("edit", args={"order_id": 1, "amount": 2}),
        "n1": Decision("reject", reason="no notes"),
    }


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("approve", Decision("approve")),
        ("reject", Decision("reject")),
        ({"reject": "no"}, Decision("reject", reason="no")),
        ({"reject": None}, Decision("reject")),
        (
            {"edit": {"order_id": 1, "amount": 1}},
            Decision("edit", args={"order_id": 1, "amount": 1}),
        ),
    ],
)
def test_one_pending_call_takes_a_bare_decision(answer: Any, decision: Decision) -> None:
    assert read_decisions(answer, [REFUND], TOOLS) == {"r1": decision}


def test_a_call_id_named_like_a_decision_is_still_a_call_id() -> None:
    odd = ToolCall("edit", "note", {"text": "x"})
    assert read_decisions({"edit": "approve"}, [odd], TOOLS) == {"edit": Decision("approve")}


def test_edited_arguments_are_made_json_data_and_validated() -> None:
    decisions = read_decisions({"r1": {"edit": {"order_id": 1, "amount": 2.0}}}, [REFUND], TOOLS)
    assert decisions["r1"].args == {"order_id": 1, "amount": 2.0}
    with pytest.raises(ValueError, match=r"edited arguments for call 'r1' \(refund\) are invalid"):
        read_decisions({"r1": {"edit": {"order_id": 1}}}, [REFUND], TOOLS)
    with pytest.raises(ValueError, match="Extra inputs"):
        read_decisions({"r1": {"edit": {"order_id": 1, "amount": 1, "x": 1}}}, [REFUND], TOOLS)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("approve", "dict of one decision per call id"),  # two calls: which one?
        ({"r1": "approve"}, "no decision for ['n1']"),
        ({"r1": "approve", "n1": "approve", "x": "approve"}, "['x'] is not a pending call"),
        ({"r1": "yes", "n1": "approve"}, "The decision for call 'r1' (refund) is 'yes'"),
        ({"r1": {"approve": True}, "n1": "approve"}, "a decision is"),
        ({"r1": {"reject": 3}, "n1": "approve"}, "a decision is"),
        ({"r1": {"edit": [1]}, "n1": "approve"}, "a decision is"),
    ],
)
def test_an_unusable_answer_says_what_is_wrong_and_what_a_decision_is(
    answer: Any, said: str
) -> None:
    with pytest.raises(ValueError, match="decision") as caught:
        read_decisions(answer, [REFUND, NOTE], TOOLS)
    assert said in str(caught.value)
    assert '"approve", "reject", {"edit": {<all arguments>}}' in str(caught.value)


def test_an_edit_of_a_tool_the_node_no_longer_has_is_refused() -> None:
    gone = ToolCall("g1", "gone", {})
    with pytest.raises(ValueError, match="no tool named 'gone'"):
        read_decisions({"edit": {}}, [gone], TOOLS)
    assert read_decisions("reject", [gone], TOOLS) == {"g1": Decision("reject")}


# -- asking -----------------------------------------------------------------------------------


def asked_with(*answers: Any) -> dict[str, Decision] | GraphInterrupt:
    token = current_scope.set(InterruptScope("node", "tools", "tools", list(answers)))
    try:
        return ask([REFUND], TOOLS)
    except GraphInterrupt as pause:
        return pause
    finally:
        current_scope.reset(token)


def test_ask_pauses_with_the_pending_calls_until_answered() -> None:
    pause = asked_with()
    assert isinstance(pause, GraphInterrupt)
    asked = pause.interrupt
    assert asked.reason == APPROVAL_REASON
    assert asked.key == "node:tools:0"
    assert asked.value == {"tool_calls": [{"id": "r1", "name": "refund", "args": REFUND.args}]}
    assert asked.message == "Approve, edit or reject the tool call(s): refund (r1)"
    assert asked_with("approve") == {"r1": Decision("approve")}


def test_an_unusable_answer_that_reaches_the_node_asks_again_saying_why() -> None:
    """The engine refuses such an answer before it is stored (check_resume); should one reach
    the node anyway (its tools changed in between), the node asks again instead of failing."""
    pause = asked_with("maybe")
    assert isinstance(pause, GraphInterrupt)
    assert pause.interrupt.key == "node:tools:1"
    assert "The decision for call 'r1' (refund) is 'maybe'" in pause.interrupt.value["error"]
    assert asked_with("maybe", "approve") == {"r1": Decision("approve")}


# -- configuring which tools need approval ------------------------------------------------------


def test_requires_approval_comes_from_the_decorator_or_the_node() -> None:
    @tool(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    assert ToolNode([wire, note]).requires_approval("wire")
    assert not ToolNode([wire, note]).requires_approval("note")
    assert ToolNode([wire, note], requires_approval=["note"]).requires_approval("note")
    assert ToolNode([note], requires_approval=True).requires_approval("note")
    assert not ToolNode([note]).requires_approval("unknown")


def test_wrong_approval_settings_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match=r"names \['nope'\], which are not among its tools"):
        ToolNode([note], requires_approval=["nope"])
    with pytest.raises(TypeError, match="not a str"):
        ToolNode([note], requires_approval="note")
    with pytest.raises(TypeError, match="takes True or False"):
        tool(requires_approval="yes")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="pass it to the ToolNode"):
        ReactAgent("test", ToolNode([note]), requires_approval=True)


# -- in a graph -------------------------------------------------------------------------------


async def test_a_call_the_model_got_wrong_is_answered_with_the_error_without_asking() -> None:
    app = tools_graph(ToolNode([refund], requires_approval=True))
    config = thread()
    done = await app.ainvoke(asking(ToolCallBlock(id="r1", name="refund", args={})), config)
    assert "interrupt" not in done
    state = await app.aget_state(config)
    assert state is not None
    assert results(state.context)["r1"].is_error
    assert "Invalid arguments" in results(state.context)["r1"].output


async def test_decisions_are_recorded_on_the_tool_messages() -> None:
    app = tools_graph(ToolNode([refund, note], requires_approval=True))
    config = thread()
    calls = [
        ToolCallBlock(id="r1", name="refund", args={"order_id": 1, "amount": 5}),
        ToolCallBlock(id="n1", name="note", args={"text": "hi"}),
    ]
    await app.ainvoke(asking(*calls), config)
    await app.ainvoke({"resume": {"r1": "approve", "n1": "reject"}}, config)
    state = await app.aget_state(config)
    assert state is not None
    meta = {m.metadata["tool_call_id"]: m.metadata for m in state.context if m.role == "tool"}
    assert meta["r1"]["approval"] == "approved"
    assert meta["n1"]["approval"] == "rejected"
    assert results(state.context)["n1"].output == (
        "Error: the call of tool 'note' was rejected by the person reviewing it. It did not run."
    )


async def test_an_approved_call_that_interrupts_asks_its_own_question_next() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def transfer(amount: int) -> str:
        """Transfer, then confirm."""
        ran.append("transfer")
        return f"transferred {amount}: {interrupt('really?')}"

    app = tools_graph(ToolNode([transfer]))
    config = thread()
    first = await app.ainvoke(
        asking(ToolCallBlock(id="t1", name="transfer", args={"amount": 2})), config
    )
    assert first["interrupt"]["reason"] == APPROVAL_REASON
    second = await app.ainvoke({"resume": "approve"}, config)
    assert second["interrupt"]["key"] == "tool:t1:0"
    await app.ainvoke({"resume": "yes"}, config)
    state = await app.aget_state(config)
    assert state is not None
    assert results(state.context)["t1"].output == "transferred 2: yes"
    assert ran == ["transfer", "transfer"]  # asked, then answered: a tool starts from its top


async def test_the_pause_is_streamed_like_any_interrupt() -> None:
    app = tools_graph(ToolNode([note], requires_approval=True))
    config = thread()
    call = ToolCallBlock(id="n1", name="note", args={"text": "a"})
    chunks = [c async for c in app.astream(asking(call), config)]
    [paused] = [c for c in chunks if c.data and c.data.get("status") == "interrupted"]
    assert paused.data["interrupt"]["reason"] == APPROVAL_REASON
    assert not [c for c in chunks if c.data and c.data.get("status") == "invoking_tool"]


async def test_a_react_agent_takes_requires_approval() -> None:
    def model(messages: list[Message], info: Any) -> Any:
        if messages[-1].role == "tool":
            return "ok"
        return [ToolCallBlock(id="n1", name="note", args={"text": "a"})]

    app = ReactAgent(FunctionModel(model), [note], requires_approval=["note"]).compile(
        checkpointer=InMemoryCheckpointer()
    )
    config = thread()
    paused = await app.ainvoke({"messages": [Message.text_message("go")]}, config)
    assert paused["interrupt"]["value"]["tool_calls"][0]["name"] == "note"
    done = await app.ainvoke({"resume": {"n1": {"edit": {"text": "b"}}}}, config)
    assert done["messages"][-1].text() == "ok"
    state = await app.aget_state(config)
    assert state is not None
    assert results(state.context)["n1"].output == "noted b"


async def test_a_tool_asking_its_own_question_with_the_same_reason_takes_any_answer() -> None:
    def confirm() -> str:
        """Confirm."""
        return f"answer: {interrupt({'tool_calls': 'mine'}, reason=APPROVAL_REASON)}"

    app = tools_graph(ToolNode([confirm]))
    config = thread()
    await app.ainvoke(asking(ToolCallBlock(id="c1", name="confirm", args={})), config)
    await app.ainvoke({"resume": ["anything"]}, config)
    state = await app.aget_state(config)
    assert state is not None
    assert results(state.context)["c1"].output == "answer: ['anything']"
