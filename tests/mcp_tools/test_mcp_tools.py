"""tenxgraph.mcp against a real MCP server (tests/mcp_tools/_server.py) over stdio and HTTP:
tools listed with prefixed names and the server's schemas, results mapped (text, structured
content, images, errors), timeouts and dead sessions as error results, a ReactAgent using them,
credentials redacted."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.graph.tool_spec import ToolSpec
from tenxgraph.core.llm import FunctionModel
from tenxgraph.core.redaction import redact
from tenxgraph.core.state import Message, ToolResult
from tenxgraph.mcp import MCPConnectionError, MCPServer, MCPTimeoutError, MCPTools
from tenxgraph.mcp._tools import session_closed
from tenxgraph.prebuilt import ReactAgent
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tests._helpers import results, roles, thread, tool_call
from tests.core.graph._support import user
from tests.core.llm._support import Script
from tests.mcp_tools._server import PIXEL
from tests.mcp_tools.conftest import SERVER, start_http, stop

PIXEL_BASE64 = base64.b64encode(PIXEL).decode("ascii")
NAMES = ["die", "echo", "explode", "hang", "pid", "pixel", "stats", "whoami"]


def stdio(name: str = "demo", **options: Any) -> MCPServer:
    return MCPServer.stdio(name, sys.executable, [str(SERVER)], **options)


def server_for(transport: str, url: str | None, **options: Any) -> MCPServer:
    if transport == "stdio":
        return stdio(**options)
    assert url is not None
    return MCPServer.http("demo", url, **options)


@pytest.fixture(params=["stdio", "http"])
def demo(request: pytest.FixtureRequest) -> MCPServer:
    url = request.getfixturevalue("http_url") if request.param == "http" else None
    return server_for(request.param, url)


def by_name(tools: list[ToolSpec]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in tools}


# -- listing ------------------------------------------------------------------------------------


async def test_tools_are_listed_with_prefixed_names_and_the_servers_schemas(
    demo: MCPServer,
) -> None:
    async with MCPTools([demo]) as tools:
        assert sorted(t.name for t in tools) == [f"demo__{n}" for n in NAMES]
        echo = by_name(tools)["demo__echo"].schema["function"]
        assert echo["description"] == "Repeat the text."
        assert echo["parameters"]["properties"]["text"] == {"title": "Text", "type": "string"}
        assert echo["parameters"]["properties"]["times"]["default"] == 1
        assert echo["parameters"]["required"] == ["text"]
        assert all("mcp" in t.tags and "mcp:demo" in t.tags for t in tools)


async def test_a_chosen_prefix_or_none() -> None:
    async with MCPTools([stdio(prefix="x_")]) as tools:
        assert "x_echo" in by_name(tools)
    async with MCPTools([stdio(prefix="")]) as tools:
        assert sorted(by_name(tools)) == NAMES


async def test_two_servers_whose_tools_would_clash_are_refused() -> None:
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        async with MCPTools([stdio("a", prefix=""), stdio("b", prefix="")]):
            pass


async def test_two_servers_with_their_own_prefixes_share_a_block() -> None:
    async with MCPTools([stdio("a"), stdio("b")]) as tools:
        names = by_name(tools)
        first = await names["a__echo"](text="one")
        second = await names["b__echo"](text="two")
        assert (first.message, second.message) == ("one", "two")


# -- results ------------------------------------------------------------------------------------


async def test_results_text_structured_error_and_image(demo: MCPServer) -> None:
    async with MCPTools([demo]) as tools:
        call = by_name(tools)
        echo = await call["demo__echo"](text="hi", times=2)
        assert (echo.message, echo.is_error) == ("hi hi", False)
        stats = await call["demo__stats"](numbers=[1, 2, 3])
        assert stats.message == {"count": 3, "total": 6.0, "mean": 2.0}
        failed = await call["demo__explode"](reason="boom")
        assert failed.is_error
        assert failed.message.startswith("Error: ")
        assert "exploded: boom" in failed.message
        image = await call["demo__pixel"]()
        assert image.message == [
            {
                "type": "image",
                "media": {
                    "kind": "data",
                    "data_base64": PIXEL_BASE64,
                    "mime_type": "image/png",
                    "size_bytes": 71,
                },
            }
        ]


async def test_the_session_is_reused_by_every_call() -> None:
    tools_ = MCPTools([stdio()])
    async with tools_ as tools:
        for n in range(3):
            assert (await by_name(tools)["demo__echo"](text=str(n))).message == str(n)
        assert tools_.connection("demo").opened == 1


async def test_a_call_past_the_timeout_raises() -> None:
    async with MCPTools([stdio(timeout=0.5)]) as tools:
        with pytest.raises(MCPTimeoutError, match=r"did not answer within 0\.5 s"):
            await by_name(tools)["demo__hang"]()
        assert (await by_name(tools)["demo__echo"](text="still")).message == "still"


async def test_a_dead_session_fails_that_call_and_the_next_opens_a_new_one() -> None:
    tools_ = MCPTools([stdio()])
    async with tools_ as tools:
        with pytest.raises(MCPConnectionError, match="ended during the call"):
            await by_name(tools)["demo__die"]()
        assert (await by_name(tools)["demo__echo"](text="back")).message == "back"
        assert tools_.connection("demo").opened == 2


async def test_a_server_that_died_between_calls_is_replaced_before_the_next_call() -> None:
    tools_ = MCPTools([stdio()])
    async with tools_ as tools:
        call = by_name(tools)
        pid = (await call["demo__pid"]()).message
        session = tools_.connection("demo").session
        assert session is not None
        os.kill(pid, signal.SIGKILL)
        for _ in range(1000):  # bounded: until the session has seen the server's pipe close
            if session_closed(session):
                break
            await asyncio.sleep(0.01)
        assert session_closed(session)
        assert (await call["demo__echo"](text="fresh")).message == "fresh"
        assert tools_.connection("demo").opened == 2


async def test_an_http_server_that_went_away_and_came_back_gets_a_new_session() -> None:
    proc, port = start_http()
    try:
        tools_ = MCPTools([MCPServer.http("demo", f"http://127.0.0.1:{port}/mcp")])
        async with tools_ as tools:
            echo = by_name(tools)["demo__echo"]
            assert (await echo(text="one")).message == "one"
            stop(proc)
            with pytest.raises(MCPConnectionError):
                await echo(text="gone")
            proc, _ = start_http(port)  # the same address, a new server knowing no session
            assert (await echo(text="two")).message == "two"
            assert tools_.connection("demo").opened == 2
    finally:
        stop(proc)


async def test_tools_used_after_the_block_raise() -> None:
    async with MCPTools([stdio()]) as tools:
        pass
    with pytest.raises(MCPConnectionError, match="closed"):
        await by_name(tools)["demo__echo"](text="late")


async def test_a_server_that_cannot_start_is_an_error_naming_it() -> None:
    missing = MCPServer.stdio("gone", sys.executable, ["-c", "raise SystemExit(2)"])
    with pytest.raises(MCPConnectionError, match="cannot connect to MCP server 'gone'"):
        async with MCPTools([missing]):
            pass


# -- in a run -----------------------------------------------------------------------------------


async def test_a_react_agent_calls_mcp_tools_and_answers(demo: MCPServer) -> None:
    script = Script(
        [
            tool_call("demo__echo", "c1", text="hello"),
            tool_call("demo__stats", "c2", numbers=[2, 4]),
            tool_call("demo__pixel", "c3"),
            tool_call("demo__explode", "c4", reason="on purpose"),
        ],
        "All done.",
    )
    async with MCPTools([demo]) as tools:
        agent = ReactAgent(FunctionModel(script), tools)
        shown = {s["function"]["name"] for s in agent.tool_node.all_tools_sync()}
        assert shown == {f"demo__{n}" for n in NAMES}
        app = agent.compile(checkpointer=InMemoryCheckpointer())
        out = await app.ainvoke({"messages": [user("go")]}, thread())
    messages: list[Message] = out["messages"]
    assert roles(messages) == ["user", "assistant", "tool", "tool", "tool", "tool", "assistant"]
    found = results(messages)
    assert found["c1"].output == "hello"
    assert found["c2"].output == {"count": 2, "total": 6.0, "mean": 3.0}
    assert found["c3"].output[0]["type"] == "image"
    assert found["c4"].is_error
    assert "exploded: on purpose" in found["c4"].output
    assert not any(found[c].is_error for c in ("c1", "c2", "c3"))
    assert messages[-1].text() == "All done."
    # the model was shown the results, the error among them
    assert "exploded: on purpose" in str([m.text() for m in script.seen[1]])


async def test_in_a_run_a_timeout_and_a_dead_server_are_error_results() -> None:
    script = Script(
        [tool_call("demo__hang", "c1")],
        [tool_call("demo__die", "c2")],
        [tool_call("demo__echo", "c3", text="alive")],
        "ok",
    )
    async with MCPTools([stdio(timeout=0.5)]) as tools:
        app = ReactAgent(FunctionModel(script), tools).compile()
        out = await app.ainvoke({"messages": [user("go")]})
    found = results(out["messages"])
    assert found["c1"].is_error
    assert "did not answer within 0.5 s" in found["c1"].output
    assert found["c2"].is_error
    assert "ended during the call" in found["c2"].output
    assert (found["c3"].is_error, found["c3"].output) == (False, "alive")
    assert out["messages"][-1].text() == "ok"


# -- credentials ----------------------------------------------------------------------------------


async def test_headers_are_sent_and_their_secrets_redacted_from_results(http_url: str) -> None:
    token = "mcp-test-token-7f3a9c2e51"
    server = MCPServer.http("demo", http_url, headers={"Authorization": f"Bearer {token}"})
    assert token not in repr(server)
    async with MCPTools([server]) as tools:
        call = by_name(tools)
        assert (await call["demo__whoami"]()).message == f"Bearer {token}"  # it was sent
        failed = await call["demo__explode"](reason=f"leaked {token}")
    assert failed.is_error
    assert token not in failed.message
    assert "REDACTED" in failed.message
    assert token not in redact(f"an error saying {token}")


async def test_env_secrets_are_kept_out_of_reprs_and_redacted() -> None:
    secret = "env-secret-value-93be71d0"
    server = stdio(env={"DEMO_API_KEY": secret})
    assert secret not in repr(server)
    async with MCPTools([server]):
        pass
    assert secret not in redact(f"text with {secret}")


async def test_an_unreachable_url_is_an_error_without_the_headers() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = "unreachable-token-4410bd"
    server = MCPServer.http(
        "far", f"http://127.0.0.1:{port}/mcp", headers={"X-Api-Key": token}, connect_timeout=20
    )
    with pytest.raises(MCPConnectionError, match="cannot connect to MCP server 'far'") as caught:
        async with MCPTools([server]):
            pass
    assert token not in str(caught.value)


def test_a_server_is_a_command_or_a_url_and_has_a_usable_name() -> None:
    with pytest.raises(ValueError, match="a command"):
        MCPServer("x")
    with pytest.raises(ValueError, match="name"):
        MCPServer.stdio("has space", "python")
    assert isinstance(ToolResult("x"), ToolResult)


async def test_a_call_stopped_by_the_tool_nodes_timeout_leaves_the_session_usable() -> None:
    script = Script(
        [tool_call("demo__hang", "c1")], [tool_call("demo__echo", "c2", text="on")], "ok"
    )
    tools_ = MCPTools([stdio()])  # no timeout of its own: the ToolNode's tool_timeout stops it
    async with tools_ as tools:
        app = ReactAgent(FunctionModel(script), tools).compile()
        out = await app.ainvoke({"messages": [user("go")]}, {"tool_timeout": 0.5})
        assert tools_.connection("demo").opened == 1
    found = results(out["messages"])
    assert found["c1"].is_error
    assert "did not finish within 0.5 s" in found["c1"].output
    assert (found["c2"].is_error, found["c2"].output) == (False, "on")


async def test_the_sdks_loggers_redact_the_credentials(
    http_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = "logged-token-0c55e1f2a9"
    server = MCPServer.http("demo", http_url, headers={"Authorization": f"Bearer {token}"})
    async with MCPTools([server]):
        pass
    with caplog.at_level(logging.WARNING, logger="mcp.client.streamable_http"):
        logging.getLogger("mcp.client.streamable_http").warning("request with %s", token)
    [record] = [r for r in caplog.records if r.name == "mcp.client.streamable_http"]
    assert token not in record.getMessage()


async def test_a_connect_stopped_by_its_caller_leaves_no_server_behind(tmp_path: Path) -> None:
    started = tmp_path / "started"
    code = (  # a "server" that never answers the handshake; it notes it started
        f"import pathlib, sys; pathlib.Path({str(started)!r}).touch(); sys.stdin.read()"
    )
    mute = MCPServer.stdio("mute", sys.executable, ["-c", code], connect_timeout=120)
    tools_ = MCPTools([mute])
    began = time.monotonic()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(3), tools_:
            pass
    assert time.monotonic() - began < 60  # not the 120 s the handshake was given
    assert started.exists()
    connection = tools_.connection("mute")
    assert connection.session is None
    assert connection._owner is None  # the owner task was ended, not left waiting


async def test_arguments_the_server_refuses_are_an_error_the_model_reads() -> None:
    script = Script([tool_call("demo__echo", "c1", times="many")], "ok")
    async with MCPTools([stdio()]) as tools:
        out = (
            await ReactAgent(FunctionModel(script), tools)
            .compile()
            .ainvoke({"messages": [user("go")]})
        )
    found = results(out["messages"])
    assert found["c1"].is_error
    assert "Field required" in found["c1"].output  # the server's own check
    assert out["messages"][-1].text() == "ok"
