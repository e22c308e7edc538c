"""`WireCounter`: a loopback TCP proxy in front of PostgreSQL that reads what clients send.

It parses the frontend side of the wire protocol (the server side is passed on untouched) and
counts what its clients send:

- round trips: each `Sync` (the end of an extended-protocol exchange: parse/bind/execute), each
  `Flush` (asyncpg preparing a statement it has not used on that connection yet) and each
  simple `Query` makes the client wait for the server's answer;
- write transactions: an explicit BEGIN ... COMMIT block, or a single statement run outside
  one, that contains an INSERT, UPDATE or DELETE (as sent: whether the server then refused it
  is not read);
- connections opened.

The proxy runs on its own thread and event loop, so it outlives the clients' loops (several
`asyncio.run()` calls in a row). Counts are taken before bytes are forwarded: once a client
has its answer, the request that asked for it has been counted. Used by the PostgreSQL
checkpointer tests and by benchmarks/pg_round_trips.py.
"""

from __future__ import annotations

import asyncio
import re
import struct
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_CANCEL_REQUEST = 80877102
_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
_BEGIN = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION)\b", re.IGNORECASE)
_END = re.compile(r"^\s*(COMMIT|ROLLBACK|END|ABORT)\b", re.IGNORECASE)


@dataclass
class Tally:
    """What the clients sent since the last `reset()`."""

    round_trips: int = 0
    write_transactions: int = 0
    connections: int = 0
    #: the statements of each round trip, in order (their SQL, shortened)
    exchanges: list[list[str]] = field(default_factory=list)


class _Client:
    """One client connection's parse state."""

    def __init__(self, counter: WireCounter) -> None:
        self.counter = counter
        self.buffer = b""
        self.started = False
        self.statements: dict[bytes, str] = {}  # prepared statement name -> SQL
        self.pending: list[str] = []  # statements of the exchange being sent
        self.in_block = False  # inside BEGIN ... COMMIT
        self.block_writes = False

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if not self.started:
                if len(self.buffer) < 8:
                    return
                length, code = struct.unpack("!ii", self.buffer[:8])
                if len(self.buffer) < length:
                    return
                self.buffer = self.buffer[length:]
                if code not in (_SSL_REQUEST, _GSSENC_REQUEST, _CANCEL_REQUEST):
                    self.started = True  # the StartupMessage
                    with self.counter.lock:
                        self.counter.tally.connections += 1
                continue
            if len(self.buffer) < 5:
                return
            kind = self.buffer[:1]
            (length,) = struct.unpack("!i", self.buffer[1:5])
            if len(self.buffer) < 1 + length:
                return
            body = self.buffer[5 : 1 + length]
            self.buffer = self.buffer[1 + length :]
            self._message(kind, body)

    def _message(self, kind: bytes, body: bytes) -> None:
        if kind == b"P":  # Parse: name, query, ...
            name, rest = body.split(b"\0", 1)
            self.statements[name] = sql = rest.split(b"\0", 1)[0].decode()
            self.pending.append(f"(prepare) {sql}")
        elif kind == b"B":  # Bind: portal, statement, ...
            statement = body.split(b"\0", 2)[1]
            self.pending.append(self.statements.get(statement, "?"))
        elif kind == b"Q":  # a simple query: its own round trip
            sql = body.rstrip(b"\0").decode()
            self.pending.append(sql)
            self._statement(sql)
            self._exchange()
        elif kind == b"S":  # Sync: the end of an exchange, its statements committed
            for sql in self.pending:
                if not sql.startswith("(prepare)"):
                    self._statement(sql)
            self._exchange()
        elif kind == b"H":  # Flush: asyncpg awaits a statement's description before binding
            self._exchange()

    def _statement(self, sql: str) -> None:
        """Follow transaction blocks and count the write transactions `sql` ends."""
        for part in filter(str.strip, sql.split(";")):
            if _BEGIN.match(part):
                self.in_block, self.block_writes = True, False
            elif _END.match(part):
                if self.in_block and self.block_writes and part.split()[0].upper() != "ROLLBACK":
                    self._count_write()
                self.in_block = False
            elif _WRITES.search(part):
                if self.in_block:
                    self.block_writes = True
                else:
                    self._count_write()

    def _count_write(self) -> None:
        with self.counter.lock:
            self.counter.tally.write_transactions += 1

    def _exchange(self) -> None:
        shown = [" ".join(sql.split())[:100] for sql in self.pending]
        self.pending = []
        with self.counter.lock:
            tally = self.counter.tally
            tally.round_trips += 1
            tally.exchanges.append(shown)


class WireCounter:
    """A counting proxy to the server of `dsn`; `dsn` of the proxy is `self.dsn`.

    Use as a context manager (it starts and stops its thread)."""

    def __init__(self, dsn: str) -> None:
        self.target = urlsplit(dsn)
        self.lock = threading.Lock()
        self.tally = Tally()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None
        self._sockets: set[asyncio.StreamWriter] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        self.dsn = ""

    def __enter__(self) -> WireCounter:
        self._thread.start()
        started: Future[asyncio.base_events.Server] = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        )
        self._server = started.result(10)
        port = self._server.sockets[0].getsockname()[1]
        netloc = self.target.netloc.rsplit("@", 1)
        user = f"{netloc[0]}@" if len(netloc) == 2 else ""
        query = dict(parse_qsl(self.target.query))
        query["sslmode"] = "disable"  # the proxy reads the protocol: no TLS through it
        self.dsn = urlunsplit(
            self.target._replace(netloc=f"{user}127.0.0.1:{port}", query=urlencode(query))
        )
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._sockets):
            writer.close()
        await self._server.wait_closed()
        if self._handlers:  # each ends once both its sockets are closed
            await asyncio.wait(self._handlers, timeout=10)

    def reset(self) -> Tally:
        """The counts so far; counting starts again from zero."""
        with self.lock:
            tally, self.tally = self.tally, Tally()
        return tally

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host = self.target.hostname or "127.0.0.1"
        port = self.target.port or 5432
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        self._sockets.update((writer, up_writer))
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        client = _Client(self)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, parse: bool) -> None:
            try:
                while data := await src.read(65536):
                    if parse:
                        client.feed(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))
        finally:
            self._sockets.difference_update((writer, up_writer))
            self._handlers.discard(handler)
