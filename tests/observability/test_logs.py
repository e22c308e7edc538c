"""The ``tenxgraph`` logs: what a run, its model calls, tools, context and thread conflicts
log, at which level, and what they never log (message contents, credentials, anything per
streamed chunk). Models are mocked with respx or played by a `FunctionModel`; concurrent runs
are held with asyncio events, never sleeps."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import LeaseLostError, ThreadBusyError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.llm import FunctionModel, RetryConfig
from tenxgraph.core.llm.summary import SummaryContextManager
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.context_manager import MessageContextManager
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import interrupt
from tenxgraph.utils.constants import END, START
from tests._helpers import thread, tool_call
from tests.core.graph._support import inp, linear
from tests.core.graph.test_agent import completion
from tests.core.llm._support import OPENAI_URL, USAGE_EVENT, event, sse
from tests.core.llm._support import Script as ScriptedModel

KEY = "sk-test-logs-0123456789abcdef"
WAIT = 5.0  # seconds: the bound on any wait that would hang if the behaviour regressed


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="tenxgraph")
    return caplog


def records(
    caplog: pytest.LogCaptureFixture, logger: str, level: int | None = None
) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == logger and (level is None or r.levelno == level)]


def messages(caplog: pytest.LogCaptureFixture, logger: str, level: int | None = None) -> str:
    return "\n".join(r.getMessage() for r in records(caplog, logger, level))


# -- the run --------------------------------------------------------------------------------


async def test_a_run_logs_its_start_and_its_end_with_thread_duration_tokens_and_cost(
    logs: pytest.LogCaptureFixture, openai_api: respx.Route
) -> None:
    openai_api.mock(return_value=httpx.Response(200, json=completion()))
    app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
    await app.ainvoke(inp("hi"), {"thread_id": "t-start-end"})
    started, ended = records(logs, "tenxgraph.run", logging.INFO)
    assert started.getMessage().startswith("run started:")
    assert "thread=t-start-end" in started.getMessage()
    text = ended.getMessage()
    assert text.startswith("run completed:")
    assert "thread=t-start-end" in text
    assert " ms;" in text
    assert "1 model calls, 12 input and 5 output tokens" in text
    assert "cost $0.0000" in text  # gpt-4o-mini has a known price


async def test_a_retry_and_a_fallback_are_logged(
    logs: pytest.LogCaptureFixture, openai_api: respx.Route
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content)["model"] == "gpt-4o-mini":
            return httpx.Response(500, json={"error": {"message": "down"}})
        return httpx.Response(200, json=completion(model="gpt-4o"))

    openai_api.mock(side_effect=answer)
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=KEY,
        fallback_models=["openai/gpt-4o"],
        retry_config=RetryConfig(max_retries=1, initial_delay=0.001),
    )
    await linear(("agent", agent)).ainvoke(inp("hi"))
    retried = messages(logs, "tenxgraph.model", logging.INFO)
    assert "model openai/gpt-4o-mini failed" in retried
    assert "retry 1 in" in retried
    fell_back = messages(logs, "tenxgraph.model", logging.WARNING)
    assert "trying the next fallback model" in fell_back


async def test_a_retry_that_then_succeeds_is_logged_at_info(
    logs: pytest.LogCaptureFixture, openai_api: respx.Route
) -> None:
    openai_api.mock(
        side_effect=[
            httpx.Response(500, json={"error": {"message": "down"}}),
            httpx.Response(200, json=completion("finally")),
        ]
    )
    agent = Agent("openai/gpt-4o-mini", api_key=KEY, retry_config=RetryConfig(initial_delay=0))
    await linear(("agent", agent)).ainvoke(inp("hi"))
    [retried] = [
        r for r in records(logs, "tenxgraph.model", logging.INFO) if "retry" in r.getMessage()
    ]
    assert "retry 1" in retried.getMessage()
    assert not records(logs, "tenxgraph.model", logging.WARNING)  # no fallback was needed


# -- tools ----------------------------------------------------------------------------------


class Script(ScriptedModel):
    after = "done"


def tool_loop(tools: list[Any], script: Script, checkpointer: Any = None) -> Any:
    node = ToolNode(tools)
    graph = StateGraph()
    graph.add_node("agent", Agent(FunctionModel(script), tool_node=node))
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s.context[-1].has_tool_calls() else END
    )
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


async def test_a_ledger_replay_is_logged(logs: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    async def count() -> str:
        """Count."""
        ran.append("count")
        return "counted"

    def approve() -> str:
        """Ask a human."""
        return f"approved: {interrupt('approve?')}"

    script = Script([tool_call("count", "call_count"), tool_call("approve", "call_ask")])
    app = tool_loop([count, approve], script, InMemoryCheckpointer())
    config = thread()
    await app.ainvoke(inp("go"), config)
    assert not records(logs, "tenxgraph.tools", logging.INFO)
    await app.ainvoke({"resume": "yes"}, config)
    assert ran == ["count"]
    [replayed] = records(logs, "tenxgraph.tools", logging.INFO)
    text = replayed.getMessage()
    assert "call_count" in text
    assert "replayed" in text
    assert config["thread_id"] in text


async def test_a_tool_error_is_logged_at_error_with_the_exception(
    logs: pytest.LogCaptureFixture,
) -> None:
    def broken() -> str:
        """Break."""
        raise ValueError("the tool broke")

    app = tool_loop([broken], Script([tool_call("broken", "call_1")]))
    await app.ainvoke(inp("go"))
    [failed] = records(logs, "tenxgraph.tools", logging.ERROR)
    assert failed.exc_info is not None
    assert isinstance(failed.exc_info[1], ValueError)
    assert not records(logs, "tenxgraph.run", logging.ERROR)  # the model was told; run went on


# -- node errors ----------------------------------------------------------------------------


async def test_a_node_error_is_logged_once_at_error_with_the_exception(
    logs: pytest.LogCaptureFixture,
) -> None:
    def boom(state: AgentState) -> str:
        raise ValueError("the node broke")

    app = linear(boom, checkpointer=InMemoryCheckpointer())
    with pytest.raises(Exception, match="the node broke"):
        await app.ainvoke(inp("hi"), thread())
    errors = [r for r in logs.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    [failed] = errors
    assert failed.name == "tenxgraph.run"
    assert failed.getMessage().startswith("run failed:")
    assert failed.exc_info is not None
    assert "the node broke" in str(failed.exc_info[1])


# -- context --------------------------------------------------------------------------------


def trimmed_app(manager: Any) -> Any:
    graph = StateGraph(context_manager=manager)
    graph.add_node("agent", Agent(FunctionModel(lambda m, i: "ok"), trim_context=True))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


async def test_trimming_the_context_is_logged_with_counts_and_thread(
    logs: pytest.LogCaptureFixture,
) -> None:
    app = trimmed_app(MessageContextManager(1))
    await app.ainvoke(inp("one", "two", "three"), {"thread_id": "t-trim"})
    [trimmed] = records(logs, "tenxgraph.context", logging.INFO)
    text = trimmed.getMessage()
    assert "thread t-trim" in text
    assert "2 messages kept, 1 dropped" in text
    assert "one" not in text  # counts, never contents
    assert "three" not in text


async def test_no_trim_record_when_nothing_is_dropped(logs: pytest.LogCaptureFixture) -> None:
    await trimmed_app(MessageContextManager(5)).ainvoke(inp("one", "two"))
    assert not records(logs, "tenxgraph.context")


async def test_summarising_the_context_is_logged(logs: pytest.LogCaptureFixture) -> None:
    summarizer = FunctionModel(lambda m, i: "a summary")
    manager: SummaryContextManager[AgentState] = SummaryContextManager(
        summarizer, max_messages=2, keep_recent=1
    )
    await trimmed_app(manager).ainvoke(inp("a", "b", "c", "d"), {"thread_id": "t-sum"})
    [summarised] = records(logs, "tenxgraph.context", logging.INFO)
    text = summarised.getMessage()
    assert "thread t-sum" in text
    assert "1 messages kept, 3 summarised" in text


# -- threads --------------------------------------------------------------------------------


class Held:
    """A node that waits inside the run until released."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, state: AgentState) -> str:
        self.inside.set()
        await self.release.wait()
        return "done"


async def test_a_run_rejected_on_a_busy_thread_is_a_warning(
    logs: pytest.LogCaptureFixture,
) -> None:
    held = Held()
    app = linear(("held", held), checkpointer=InMemoryCheckpointer())
    config = thread()
    async with asyncio.timeout(WAIT):
        first = asyncio.create_task(app.ainvoke(inp("one"), config))
        await held.inside.wait()
        with pytest.raises(ThreadBusyError):
            await app.ainvoke(inp("two"), config)
        held.release.set()
        await first
    [rejected] = records(logs, "tenxgraph.threads", logging.WARNING)
    assert rejected.getMessage().startswith("run rejected:")
    assert config["thread_id"] in rejected.getMessage()
    assert rejected.exc_info is None
    assert not [r for r in logs.records if r.levelno >= logging.ERROR]  # not a failure


async def test_a_run_that_lost_its_thread_is_a_warning(logs: pytest.LogCaptureFixture) -> None:
    store = InMemoryCheckpointer()
    held = Held()
    first_app = linear(("held", held), checkpointer=store)
    other_app = linear(("quick", lambda state: "quick"), checkpointer=store)
    config = thread()
    async with asyncio.timeout(WAIT):
        first = asyncio.create_task(first_app.ainvoke(inp("one"), config))
        await held.inside.wait()
        # its lease runs out (its process froze longer than the lease); another run takes over
        store._threads[config["thread_id"]].lease_expires = 0.0
        await other_app.ainvoke(inp("two"), config)
        held.release.set()
        with pytest.raises(LeaseLostError):
            await first
    [lost] = records(logs, "tenxgraph.threads", logging.WARNING)
    assert lost.getMessage().startswith("run stopped:")
    assert "lost its lease" in lost.getMessage()
    assert not [r for r in logs.records if r.levelno >= logging.ERROR]


async def test_a_run_waiting_for_a_busy_thread_is_logged_at_info(
    logs: pytest.LogCaptureFixture,
) -> None:
    held = Held()
    app = linear(("held", held), checkpointer=InMemoryCheckpointer())
    config = thread()
    async with asyncio.timeout(WAIT):
        first = asyncio.create_task(app.ainvoke(inp("one"), config))
        await held.inside.wait()
        second = asyncio.create_task(
            app.ainvoke(inp("two"), {**config, "multitask_strategy": "enqueue"})
        )
        queued = asyncio.Event()
        waiting = logging.Handler()
        waiting.emit = lambda record: queued.set()  # type: ignore[method-assign]
        logging.getLogger("tenxgraph.threads").addHandler(waiting)
        try:
            await queued.wait()  # the second run is queued (it says so)
        finally:
            logging.getLogger("tenxgraph.threads").removeHandler(waiting)
        held.release.set()
        await asyncio.gather(first, second)
    [waiting] = records(logs, "tenxgraph.threads", logging.INFO)
    assert config["thread_id"] in waiting.getMessage()
    assert "waiting for its turn" in waiting.getMessage()


# -- nothing per streamed chunk ---------------------------------------------------------------


async def streamed_records(caplog: pytest.LogCaptureFixture, pieces: int) -> int:
    text = [event({"role": "assistant", "content": ""})]
    text += [event({"content": "x"}) for _ in range(pieces)]
    body = sse(*text, event({}, "stop"), USAGE_EVENT)
    caplog.clear()
    with respx.mock(using="httpx") as mock:
        mock.post(OPENAI_URL).mock(return_value=body)
        app = linear(("agent", Agent("openai/gpt-4o-mini", api_key=KEY)))
        chunks = [c async for c in app.astream(inp("hi"))]
    assert len(chunks) >= pieces
    return len([r for r in caplog.records if r.name.startswith("tenxgraph")])


async def test_a_streamed_run_logs_the_same_whatever_the_number_of_chunks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tenxgraph")
    few = await streamed_records(caplog, 5)
    many = await streamed_records(caplog, 500)
    assert few == many
    assert few >= 2  # the run's start and end


# -- never contents, never credentials -------------------------------------------------------


SECRET_TEXT = "zebra-quartz-7731 my private question"


def formatted(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record as a handler writes it: the message and the traceback."""
    handler = logging.StreamHandler()
    return [handler.format(record) + (record.exc_text or "") for record in caplog.records]


def tool_call_answer(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return {
        **completion(),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


async def run_everything() -> list[str]:
    """A run that retries, trims its context, calls a tool that fails and answers: with the
    user's text in the input and the tool's arguments, and an api_key."""
    ran: list[str] = []

    def lookup(order: str) -> str:
        """Look an order up."""
        ran.append(order)
        raise ValueError("lookup failed")

    calls = iter(
        [
            httpx.Response(500, json={"error": {"message": "down"}}),
            httpx.Response(200, json=tool_call_answer("lookup", {"order": SECRET_TEXT})),
        ]
    )
    node = ToolNode([lookup])
    graph = StateGraph(context_manager=MessageContextManager(1))
    agent = Agent(
        "openai/gpt-4o-mini",
        api_key=KEY,
        tool_node=node,
        retry_config=RetryConfig(initial_delay=0),
        trim_context=True,
    )
    graph.add_node("agent", agent)
    graph.add_node("tools", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s.context[-1].has_tool_calls() else END
    )
    graph.add_edge("tools", "agent")
    app = graph.compile(checkpointer=InMemoryCheckpointer())
    with respx.mock(using="httpx") as mock:
        mock.post(OPENAI_URL).mock(
            side_effect=lambda request: next(calls, httpx.Response(200, json=completion("done")))
        )
        await app.ainvoke(inp("earlier", "middle", SECRET_TEXT), thread())
    return ran


async def test_no_message_contents_and_no_credentials_at_any_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The root logger at DEBUG (``logging.basicConfig(level=logging.DEBUG)``): every record
    of every logger, litellm's, openai's and httpx's included."""
    caplog.set_level(logging.DEBUG)
    assert await run_everything() == [SECRET_TEXT]
    shown = formatted(caplog)
    assert any("retry 1" in text for text in shown)  # the run did log, at every level
    assert any("context of thread" in text for text in shown)
    assert any(r.name == "tenxgraph.tools" and r.exc_info for r in caplog.records)
    for text in shown:
        assert KEY not in text
        assert "zebra-quartz" not in text


async def test_litellm_request_dumps_show_when_litellm_is_asked_and_without_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="LiteLLM")  # LITELLM_LOG=DEBUG does this
    await run_everything()
    shown = formatted(caplog)
    assert any("zebra-quartz" in text for text in shown)  # what litellm was asked to show
    assert not any(KEY in text for text in shown)
    ours = [r for r in caplog.records if r.name.startswith("tenxgraph")]
    assert ours
    assert not any("zebra-quartz" in t for t in formatted_records(ours))


def formatted_records(found: list[logging.LogRecord]) -> list[str]:
    handler = logging.StreamHandler()
    return [handler.format(record) + (record.exc_text or "") for record in found]


def test_the_hierarchy_has_one_root() -> None:
    """Every logger the runtime logs on is under ``tenxgraph`` (one handler sees them all)."""
    import tenxgraph.core.graph.threads as threads_module
    import tenxgraph.core.state.context_manager as context_module
    from tenxgraph.observability import observer

    names = [
        observer.run_log.name,
        observer.model_log.name,
        observer.tool_log.name,
        observer.thread_log.name,
        threads_module.log.name,
        context_module.log.name,
    ]
    assert all(name.startswith("tenxgraph.") for name in names)
