"""`MCPServer` (how to reach a server) and `MCPTools` (its tools, for a `ToolNode`).

Session lifetime: ``async with MCPTools([...]) as tools`` opens one session per server (all at
once), lists their tools, and closes every session when the block ends. Inside the block every
call of a server's tools goes through that server's one session, from any task. Each session is
owned by a background task of its own (the SDK's transports are anyio task groups, which must
be closed by the task that opened them; a tool call runs in a ToolNode task).

A session known to be over before a call (its server exited between two calls, its owner task
ended) is opened again for that call. A session that breaks during a call fails that call,
which is not retried (it may have run): it ends as an error result, so the model is told and
the run goes on, and the next call opens a new session. Tools used after the block raise,
which also ends as an error result.

Credentials: the values of `headers` and `env` entries whose names say they hold one
(``Authorization``, ``*_TOKEN``, ``*_API_KEY``, ...) are registered with
`tenxgraph.core.redaction` before anything is sent, so they are redacted from error texts,
tool messages, tenxgraph's logs and the logs of the MCP SDK and its HTTP client. They are
never put in a repr or an error message. (A credential in a `url` is not known as one: pass
it in a header.)
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tenxgraph.core.graph.tool_output import describe_exception
from tenxgraph.core.graph.tool_spec import ToolSpec
from tenxgraph.core.redaction import (
    add_secret,
    get_logger,
    is_secret_name,
    protect_logger,
    redact,
    remember_settings,
)
from tenxgraph.core.state import ToolResult
from tenxgraph.mcp._results import result_value

log = get_logger("tenxgraph.mcp")

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
_CLOSED = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


class MCPConnectionError(RuntimeError):
    """A server could not be reached, its session broke, or it refused a request. The text
    names the server, never its headers or environment."""


class MCPTimeoutError(RuntimeError):
    """A call had no answer within its server's `timeout`. (Not a TimeoutError: a ToolNode
    reads that as its own `tool_timeout`.)"""


@dataclass(frozen=True, slots=True)
class MCPServer:
    """How to reach one MCP server: a command run over stdio, or a streamable-HTTP `url`.

    Build one with `MCPServer.stdio(...)` or `MCPServer.http(...)`. Its tools are named
    ``<prefix><tool>``; the prefix defaults to ``<name>__`` (``""`` keeps the server's names).
    `timeout` (seconds) bounds each call at the protocol level (the ToolNode's `tool_timeout`
    applies too); `requires_approval` makes every tool of this server wait for a person's
    decision before it runs.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    prefix: str | None = None
    timeout: float | None = None
    connect_timeout: float = 30.0
    requires_approval: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or _SERVER_NAME.fullmatch(self.name) is None:
            raise ValueError(
                f"MCPServer name {self.name!r}: use 1 to 40 letters, digits, '_' or '-' "
                "(it prefixes the tool names)"
            )
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCPServer {self.name!r}: give a command (stdio) or a url (HTTP)")

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        prefix: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        requires_approval: bool = False,
    ) -> MCPServer:
        """A server started as ``command *args`` and spoken to over its stdin and stdout. `env`
        is added to a minimal environment (PATH, HOME...), not to this process's."""
        return cls(
            name, command=command, args=tuple(args), env=dict(env) if env else None,
            cwd=None if cwd is None else str(cwd), prefix=prefix, timeout=timeout,
            connect_timeout=connect_timeout, requires_approval=requires_approval,
        )  # fmt: skip

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        timeout: float | None = None,
        connect_timeout: float = 30.0,
        requires_approval: bool = False,
    ) -> MCPServer:
        """A server at a streamable-HTTP `url` (``http://127.0.0.1:8000/mcp``), sent `headers`
        with every request."""
        return cls(
            name, url=url, headers=dict(headers) if headers else None, prefix=prefix,
            timeout=timeout, connect_timeout=connect_timeout, requires_approval=requires_approval,
        )  # fmt: skip

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}__" if self.prefix is None else self.prefix

    def remember_secrets(self) -> None:
        """Register the credentials in `headers` and `env` for redaction."""
        for settings in (self.headers, self.env):
            if not settings:
                continue
            remember_settings(settings)
            for key, value in settings.items():  # "Bearer <token>": the token alone, too
                if is_secret_name(key) and " " in value:
                    add_secret(value.split(" ", 1)[1].strip(), key)


class _Connection:
    """One server's session, owned by a background task; reopened when found dead."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()
        self._closed = False
        self.opened = 0  # how many sessions were opened (1 + reconnects)

    async def open(self) -> ClientSession:
        async with self._lock:
            if self._closed:
                raise MCPConnectionError(f"MCP server {self.server.name!r}: the tools are closed")
            session, owner = self.session, self._owner
            if session is not None and owner is not None and not owner.done():
                if not session_closed(session):
                    return session
                log.info(
                    "the session with MCP server %s has ended; opening a new one", self.server.name
                )
            await self._end_owner()
            ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
            self._stop = asyncio.Event()
            self._owner = asyncio.create_task(
                self._own(ready, self._stop), name=f"mcp session {self.server.name}"
            )
            try:
                self.session = await ready
            except BaseException:  # failed, or the caller was stopped: no session half-open
                self._owner.cancel()
                await self._end_owner()
                raise
            self.opened += 1
            return self.session

    def mark_dead(self, session: ClientSession) -> None:
        """The session failed: the next call opens a new one."""
        if self.session is session:
            self.session = None
            self._stop.set()

    async def close(self) -> None:
        async with self._lock:
            self._closed = True
            await self._end_owner()

    async def _end_owner(self) -> None:
        self.session = None
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._stop.set()
        try:
            await owner
        except BaseException as exc:  # the owner logs its own troubles; never re-raised
            if isinstance(exc, asyncio.CancelledError) and _cancelling():
                raise

    async def _own(self, ready: asyncio.Future[ClientSession], stop: asyncio.Event) -> None:
        server = self.server
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(_transport(server))
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.fail_after(server.connect_timeout):  # only around what ends inside
                    await session.initialize()
                ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    MCPConnectionError(
                        f"cannot connect to MCP server {server.name!r}: {_reason(exc)}"
                    )
                )
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning(
                    "the session with MCP server %s ended with an error: %s",
                    server.name, _reason(exc),
                )  # fmt: skip
            if isinstance(exc, asyncio.CancelledError):
                raise


def session_closed(session: ClientSession) -> bool:
    """Whether `session` is known to be over (its transport closed: a stdio server exited, say),
    so a request would not even be sent. Reads the SDK's dispatcher, which has no public word
    for it; should that change, False (the call then fails and the next one reconnects)."""
    dispatcher = getattr(session, "_dispatcher", None)
    return getattr(dispatcher, "_closed", False) is True


# the libraries a session runs on; a filter sees only its own logger's records, so each one
_SDK_LOGGERS = ("mcp", "httpx2", "httpcore", "uvicorn")


def _protect_sdk_loggers() -> None:
    """Redact credentials from what the SDK and its HTTP client log."""
    for name in [*_SDK_LOGGERS, *list(logging.Logger.manager.loggerDict)]:
        if name.split(".")[0] in _SDK_LOGGERS:
            protect_logger(name)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _reason(exc: BaseException) -> str:
    """What went wrong, from the innermost useful exception, with credentials redacted."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return redact(describe_exception(exc))


def _transport(server: MCPServer) -> Any:
    if server.command is not None:
        params = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=dict(server.env) if server.env else None,
            cwd=server.cwd,
        )
        return stdio_client(params)
    return _http(server)


def _http(server: MCPServer) -> Any:
    import contextlib

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def connect() -> Any:
        client = httpx2.AsyncClient(
            headers=dict(server.headers or {}), timeout=httpx2.Timeout(30.0, read=300.0)
        )
        async with client, streamable_http_client(str(server.url), http_client=client) as streams:
            yield streams

    return connect()


class MCPTools:
    """The tools of some MCP servers, for a `ToolNode` or a `ReactAgent`::

        servers = [MCPServer.stdio("files", "npx", ["-y", "@modelcontextprotocol/server-fs"])]
        async with MCPTools(servers) as tools:
            agent = ReactAgent(model, tools)
            await agent.compile().ainvoke(...)

    See the module docstring for how the sessions live and die.
    """

    def __init__(self, servers: Iterable[MCPServer]) -> None:
        self.servers = list(servers)
        names = [s.name for s in self.servers]
        if len(set(names)) != len(names):
            raise ValueError(f"MCPTools: two servers have the same name ({names})")
        self._connections = {s.name: _Connection(s) for s in self.servers}
        self.tools: list[ToolSpec] = []

    def connection(self, name: str) -> _Connection:
        return self._connections[name]

    async def __aenter__(self) -> list[ToolSpec]:
        for server in self.servers:
            server.remember_secrets()
        _protect_sdk_loggers()
        try:
            listed = await asyncio.gather(
                *(self._list(self._connections[s.name]) for s in self.servers)
            )
        except BaseException:
            await self.aclose()
            raise
        tools = [spec for specs in listed for spec in specs]
        seen: set[str] = set()
        for spec in tools:
            if spec.name in seen:
                await self.aclose()
                raise ValueError(f"MCPTools: two tools are named {spec.name!r}; set a prefix")
            seen.add(spec.name)
        self.tools = tools
        return list(tools)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session (and stop the stdio servers)."""
        await asyncio.gather(*(c.close() for c in self._connections.values()))

    async def _list(self, connection: _Connection) -> list[ToolSpec]:
        session = await connection.open()
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return [_spec(connection, tool) for tool in listed]


def _spec(connection: _Connection, tool: types.Tool) -> ToolSpec:
    server = connection.server
    name = _NOT_IN_A_NAME.sub("_", server.tool_prefix + tool.name)[:64]
    remote = tool.name

    async def call(**arguments: Any) -> ToolResult:
        return await _call(connection, remote, arguments)

    call.__name__ = name
    return ToolSpec.from_schema(
        name,
        dict(tool.input_schema),
        call,
        description=tool.description or tool.title or "",
        tags=frozenset({"mcp", f"mcp:{server.name}"}),
        requires_approval=server.requires_approval,
    )


async def _call(connection: _Connection, tool: str, arguments: dict[str, Any]) -> ToolResult:
    server = connection.server
    session = await connection.open()
    try:
        result = await session.call_tool(tool, arguments, read_timeout_seconds=server.timeout)
    except MCPError as exc:
        if exc.code == types.CONNECTION_CLOSED:
            connection.mark_dead(session)
            raise MCPConnectionError(
                f"the session with MCP server {server.name!r} ended during the call (it may "
                "or may not have run); the next call opens a new session"
            ) from None
        if exc.code == types.REQUEST_TIMEOUT:
            within = f"within {server.timeout:g} s" if server.timeout else "in time"
            raise MCPTimeoutError(f"MCP server {server.name!r} did not answer {within}") from None
        raise MCPConnectionError(
            f"MCP server {server.name!r} refused the call: {redact(exc.error.message)}"
        ) from None
    except _CLOSED:
        connection.mark_dead(session)
        raise MCPConnectionError(
            f"the session with MCP server {server.name!r} is closed; the next call opens a "
            "new session"
        ) from None
    return result_value(result)


__all__ = ["MCPConnectionError", "MCPServer", "MCPTimeoutError", "MCPTools"]
