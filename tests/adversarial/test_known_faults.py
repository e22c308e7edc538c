"""Known faults, end to end (issue 15's "ones that already pass": hostile rows, provider faults,
CLI errors): each tried through a compiled app or the `tenxgraph` command as a hostile user or
a failing provider would, checking the promise a user relies on, not only that something raised.

- Hostile stored rows (SQLite, PostgreSQL): a message row that is not JSON, has an unknown role
  or tries to smuggle fields into the state, a header of the wrong type or with a key of its
  own, a missing message row, a corrupt tool-ledger row, a pickle or a ``{"__class__": ...}``
  payload. Reading, running or streaming the thread raises `SerializationError` naming the
  thread and the field; no node and no tool runs, nothing is written, nothing stored is
  unpickled or imported, and the other threads of the database keep working.
- Provider faults, through an `Agent` in a graph kept by memory, SQLite and PostgreSQL: a 429
  then a 200, a 500 every time, a 401, a timeout, a lost connection, a 200 whose body is not
  JSON (or is a proxy's HTML page), a stream that breaks after its first chunk. Each is retried
  or not as the README says, the thread keeps no partial answer, and the next user message is
  answered.
- The `tenxgraph` command: a module, attribute or file that is not there, an unknown thread, a
  database file that is garbage or another program's, a model without its key, a hostile
  thread id, a thread with a corrupt row. Each is the documented exit code and one line on
  stderr, without a traceback, and the database is left as it was.

Only public API of the time before these promises is imported at module level, so that the
suite runs (and fails case by case) against the old code too.
"""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tenxgraph.core.exceptions import (
    ModelAuthError,
    ModelError,
    ModelUnavailableError,
    SerializationError,
)
from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph
from tenxgraph.core.llm import retry
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import BaseCheckpointer
from tenxgraph.utils.constants import END, START
from tests.adversarial._faults_support import (
    USER_GRAPH,
    BrokenStream,
    Crash,
    Damage,
    Shop,
    World,
    answering,
    class_in_a_typed_header_field,
    class_payload,
    class_row,
    closes_the_list,
    command_line,
    dies_before_saving_tool_messages,
    digest,
    dump,
    extra_message_field,
    garbage,
    header_extra_key,
    header_wrong_type,
    latest_header,
    missing_row,
    not_json,
    pickle_in_a_typed_header_field,
    pickle_payload,
    pickled_row,
    set_header,
    stored_rows,
    text_file,
    truncated,
    unknown_role,
)
from tests.cli.conftest import Cli, cli, home
from tests.core.graph._support import inp, texts
from tests.core.llm._support import OPENAI_URL, drain, sent
from tests.storage.conftest import Backend

__all__ = ["cli", "home"]  # the `tenxgraph` command run in-process, as tests/cli runs it

KEY = "sk-known-faults-not-a-real-key-0123456789"  # a fake; never a real key
MODEL = "openai/gpt-4o-mini"
RETRIES = 2  # the retries the provider-fault tests configure: 3 requests in all

VICTIM = {"thread_id": "victim"}
BYSTANDER = {"thread_id": "bystander"}


# == 1. hostile stored rows ===================================================================


HOSTILE_ROWS = [
    pytest.param(not_json, "context.1", None, id="message-not-json"),
    pytest.param(unknown_role, "context.1.role", None, id="message-unknown-role"),
    pytest.param(closes_the_list, "context.1", None, id="message-closing-the-list"),
    pytest.param(extra_message_field, "context.1.credits", None, id="message-extra-field"),
    pytest.param(header_wrong_type, "credits", None, id="header-wrong-type"),
    pytest.param(header_extra_key, "is_admin", None, id="header-extra-key"),
    pytest.param(missing_row, "context", "lists 2 messages but only 1", id="message-row-missing"),
    pytest.param(pickled_row, "context.1", None, id="message-pickle"),
    pytest.param(class_row, "context.1.role", None, id="message-class-dict"),
    pytest.param(class_in_a_typed_header_field, "credits", None, id="header-class-dict"),
    pytest.param(pickle_in_a_typed_header_field, "credits", None, id="header-pickle"),
]


def attempts(app: CompiledGraph) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every way a user reaches the victim thread: read it, send a turn, continue it, stream."""
    return {
        "aget_state": lambda: app.aget_state(VICTIM),
        "ainvoke": lambda: app.ainvoke(inp("pay 5"), VICTIM),
        "ainvoke(None)": lambda: app.ainvoke(None, VICTIM),
        "astream": lambda: drain(app.astream(inp("pay 5"), VICTIM), []),
    }


async def two_threads(backend: Backend, world: World) -> None:
    app = world.app(backend.store)
    await app.ainvoke(inp("hello"), VICTIM)
    await app.ainvoke(inp("hello"), BYSTANDER)


async def bystander_still_works(app: CompiledGraph) -> None:
    state = await app.aget_state(BYSTANDER)
    assert state is not None
    assert texts(state.context) == ["hello", "echo hello"]
    result = await app.ainvoke(inp("still there?"), BYSTANDER)
    assert texts(result["messages"]) == ["still there?", "echo still there?"]


def names(error: SerializationError, field: str, says: str | None = None) -> None:
    """The error names the thread and the field in its context, and in its text the thread and
    the field (or, for a row that is not there, what is missing)."""
    assert "'victim'" in str(error)
    assert error.context.get("thread_id") == "victim"
    assert error.context.get("field") == field
    assert (says or field) in str(error)


@pytest.mark.parametrize(("damage", "field", "says"), HOSTILE_ROWS)
async def test_a_hostile_row_is_refused_naming_the_thread_and_nothing_runs_or_is_written(
    sql_backend: Backend, tmp_path: Path, damage: Damage, field: str, says: str | None
) -> None:
    world = World()
    await two_threads(sql_backend, world)
    marker = tmp_path / "unpickled"
    await damage(sql_backend, marker)
    before = await stored_rows(sql_backend)
    app = world.app(sql_backend.open())  # another process, reading what is stored
    ran = world.model_calls
    for how, attempt in attempts(app).items():
        with pytest.raises(SerializationError) as caught:
            await attempt()
        try:
            names(caught.value, field, says)
        except AssertionError as exc:
            raise AssertionError(f"{how}: {caught.value!r}: {exc}") from None
    assert world.model_calls == ran  # no node ran
    assert world.paid == []  # no tool ran
    assert await stored_rows(sql_backend) == before  # nothing was written
    assert not marker.exists()  # nothing was unpickled or imported
    await bystander_still_works(app)


def test_the_planted_pickle_is_live(tmp_path: Path) -> None:
    """The pickle planted above does create its file when unpickled: were stored data ever
    unpickled, the tests using it would see the file."""
    marker = tmp_path / "unpickled"
    pickle.loads(pickle_payload(marker).encode("ascii")).close()  # the point: it runs
    assert marker.exists()


async def test_a_class_dict_in_a_loose_field_stays_inert_data(
    sql_backend: Backend, tmp_path: Path
) -> None:
    """Where a field takes any JSON, a ``{"__class__": ...}`` dict is read back as the dict it
    is: nothing is imported, and the thread takes turns as before."""
    world = World()
    await two_threads(sql_backend, world)
    marker = tmp_path / "imported"
    payload = class_payload(marker)
    header = {**await latest_header(sql_backend), "notes": payload}
    await set_header(sql_backend, json.dumps(header))
    app = world.app(sql_backend.open())
    state = await app.aget_state(VICTIM)
    assert isinstance(state, Shop)
    assert state.notes == payload
    result = await app.ainvoke(inp("again"), VICTIM)
    assert texts(result["messages"]) == ["again", "echo again"]
    assert not marker.exists()


async def test_a_corrupt_ledger_row_is_refused_and_the_recorded_tool_never_runs_again(
    sql_backend: Backend,
) -> None:
    world = World()
    first = world.app(sql_backend.store)
    await first.ainvoke(inp("hello"), BYSTANDER)
    dies_before_saving_tool_messages(sql_backend.store)
    with pytest.raises(Crash):
        await first.ainvoke(inp("pay 5"), VICTIM)
    assert world.paid == [5]  # paid once, and recorded in the ledger
    ((asked, call, result),) = await sql_backend.sql(
        "SELECT message_id, call_id, result FROM tx_tool_results WHERE thread_id = ?", "victim"
    )
    assert call == "call-pay"
    assert json.loads(result)  # a real record, now damaged
    await sql_backend.sql(
        "UPDATE tx_tool_results SET result = ? WHERE thread_id = ?",
        '{"message": {"role": "tool", "content": [',
        "victim",
    )
    before = await stored_rows(sql_backend)
    app = world.app(sql_backend.open())
    field = f"tool_result[{asked!r}, 'call-pay']"
    ran = world.model_calls
    for how in ("ainvoke(None)", "astream(None)"):
        run = (
            app.ainvoke(None, VICTIM)
            if how == "ainvoke(None)"
            else drain(app.astream(None, VICTIM), [])
        )
        with pytest.raises(SerializationError) as caught:
            await run
        names(caught.value, field)
    assert world.paid == [5]  # the recorded payment was not made again
    assert world.model_calls == ran
    after = await stored_rows(sql_backend)
    # no message, no ledger record was written (the damaged row is not "repaired" by a re-run);
    # what the failed step leaves is what any failed step leaves: versions recording the error
    assert after["tx_messages"] == before["tx_messages"]
    assert after["tx_tool_results"] == before["tx_tool_results"]
    assert after["tx_checkpoints"][: len(before["tx_checkpoints"])] == before["tx_checkpoints"]
    state = await app.aget_state(VICTIM)
    assert state is not None
    assert state.execution_meta.status.value == "error"
    assert texts(state.context) == ["pay 5", ""]
    await bystander_still_works(app)
    # new input starts a new turn: the thread is not bricked by its damaged record
    result = await app.ainvoke(inp("hello again"), VICTIM)
    assert texts(result["messages"]) == ["hello again", "echo hello again"]


# == 2. provider faults through an Agent in a graph ===========================================


@pytest.fixture
def openai_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[respx.Route]:
    """The provider's HTTP endpoint, mocked (anything else refused), and a fake key."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        yield mock.post(OPENAI_URL)


def agent_app(store: BaseCheckpointer) -> CompiledGraph:
    graph = StateGraph()
    graph.add_node("agent", Agent(MODEL, retry_config=retry.RetryConfig(max_retries=RETRIES)))
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(checkpointer=store)


async def run_turn(app: CompiledGraph, text: str, streamed: bool, into: list[Any]) -> None:
    config = {"thread_id": "t"}
    if streamed:
        await drain(app.astream(inp(text), config), into)
    else:
        into.append(await app.ainvoke(inp(text), config))


async def stored_thread(backend: Backend) -> list[Message]:
    """The thread as another process reads it back."""
    store = backend.open() if backend.is_sql else backend.store
    state = await agent_app(store).aget_state({"thread_id": "t"})
    assert state is not None
    return state.context


def sent_roles(route: respx.Route, n: int = -1) -> list[tuple[str, str]]:
    return [(m["role"], str(m.get("content"))) for m in sent(route, n)["messages"]]


async def next_turn_is_answered(backend: Backend, app: CompiledGraph, route: respx.Route) -> None:
    """The provider is back: the next user message gets its answer, after the failed turn's
    question and with nothing of the failed answer."""
    route.side_effect = answering("Back again.")
    calls = route.call_count
    await app.ainvoke(inp("are you there?"), {"thread_id": "t"})
    assert route.call_count == calls + 1
    assert sent_roles(route) == [("user", "hi"), ("user", "are you there?")]
    stored = await stored_thread(backend)
    assert [(m.role, m.text()) for m in stored] == [
        ("user", "hi"),
        ("user", "are you there?"),
        ("assistant", "Back again."),
    ]


STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "stream"])


@STREAMED
async def test_a_rate_limit_is_retried_after_its_retry_after_and_one_answer_is_stored(
    backend: Backend, openai_api: respx.Route, slept: list[float], streamed: bool
) -> None:
    then = answering("Hello there.")
    replies = iter(
        [
            lambda r: httpx.Response(
                429, json={"error": {"message": "slow down"}}, headers={"retry-after": "7"}
            ),
            then,
        ]
    )
    openai_api.side_effect = lambda request: next(replies)(request)
    seen: list[Any] = []
    await run_turn(agent_app(backend.store), "hi", streamed, seen)
    assert openai_api.call_count == 2
    assert len(slept) == 1
    assert slept[0] >= 7  # at least as long as the provider asked
    stored = await stored_thread(backend)
    assert [(m.role, m.text()) for m in stored] == [("user", "hi"), ("assistant", "Hello there.")]


FAILURES = [
    pytest.param(
        lambda r: httpx.Response(500, json={"error": {"message": "boom"}}),
        ModelUnavailableError,
        True,
        id="500",
    ),
    pytest.param(httpx.ReadTimeout("timed out"), ModelUnavailableError, True, id="timeout"),
    pytest.param(httpx.ConnectError("connection refused"), ModelUnavailableError, True, id="conn"),
    pytest.param(
        lambda r: httpx.Response(
            200, content=b'{"id": "chatcmpl-x", "choices": [', headers={"content-type": "json"}
        ),
        ModelError,
        False,
        id="200-malformed-json",
    ),
    pytest.param(
        lambda r: httpx.Response(
            200, content=b"<html><h1>502 Bad Gateway</h1></html>", headers={"content-type": "html"}
        ),
        ModelError,
        False,
        id="200-html-page",
    ),
]


@STREAMED
@pytest.mark.parametrize(("failure", "expected", "transient"), FAILURES)
async def test_a_failing_provider_leaves_no_partial_answer_and_the_next_turn_works(
    backend: Backend,
    openai_api: respx.Route,
    slept: list[float],
    streamed: bool,
    failure: Any,
    expected: type[ModelError],
    transient: bool,
) -> None:
    openai_api.side_effect = failure
    app = agent_app(backend.store)
    seen: list[Any] = []
    with pytest.raises(expected) as caught:
        await run_turn(app, "hi", streamed, seen)
    error = caught.value
    assert error.provider == "openai"
    assert KEY not in str(error)
    if transient:  # retried as configured, then given up, saying so
        assert openai_api.call_count == 1 + RETRIES
        assert len(slept) == RETRIES
        assert f"{RETRIES} retries" in str(error)
    else:  # whether or not it is retried, it ends: a typed error, not a raw parse error
        assert 1 <= openai_api.call_count <= 1 + RETRIES
    if streamed:
        assert seen
        assert seen[-1].event == "error"
        assert not [c for c in seen if c.message is not None and c.message.role == "assistant"]
    stored = await stored_thread(backend)
    assert [(m.role, m.text()) for m in stored] == [("user", "hi")]  # no partial answer
    await next_turn_is_answered(backend, app, openai_api)


@STREAMED
async def test_a_rejected_key_is_not_retried_and_the_thread_takes_the_next_turn(
    backend: Backend, openai_api: respx.Route, slept: list[float], streamed: bool
) -> None:
    openai_api.side_effect = lambda r: httpx.Response(
        401, json={"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    )
    app = agent_app(backend.store)
    with pytest.raises(ModelAuthError) as caught:
        await run_turn(app, "hi", streamed, [])
    assert openai_api.call_count == 1  # a bad key is not retried
    assert slept == []
    assert caught.value.status_code == 401
    assert KEY not in str(caught.value)
    assert [m.role for m in await stored_thread(backend)] == ["user"]
    await next_turn_is_answered(backend, app, openai_api)  # the key was fixed


async def test_a_stream_broken_after_its_first_chunk_is_not_retried_nor_stored(
    backend: Backend, openai_api: respx.Route, slept: list[float]
) -> None:
    openai_api.side_effect = lambda r: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=BrokenStream()
    )
    app = agent_app(backend.store)
    seen: list[Any] = []
    with pytest.raises(ModelUnavailableError):
        await run_turn(app, "hi", True, seen)
    shown = [c.message.text() for c in seen if c.message is not None and c.message.delta]
    assert "".join(shown) == "Once upon"  # shown to the user before the break...
    assert openai_api.call_count == 1  # ...so not asked again, despite the retries configured
    assert slept == []
    stored = await stored_thread(backend)
    assert [(m.role, m.text()) for m in stored] == [("user", "hi")]  # nothing partial kept
    await next_turn_is_answered(backend, app, openai_api)
    assert "Once upon" not in json.dumps(sent(openai_api))


# == 3. the `tenxgraph` command ===============================================================


def one_line_error(result: Any) -> None:
    """What every failing command prints: one line on stderr, no traceback."""
    assert result.err.startswith("tenxgraph: error: "), result
    assert result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err


@pytest.fixture
def db(cli: Cli, tmp_path: Path) -> Path:
    """A database holding one finished thread, 'kept'."""
    path = tmp_path / "threads.db"
    made = cli("chat", "--model", "test", "--thread", "kept", "--db", str(path), stdin="hello\n")
    assert made.code == 0, made.err
    return path


@pytest.fixture
def graph_file(tmp_path: Path) -> Path:
    path = tmp_path / "user_graph.py"
    path.write_text(USER_GRAPH)
    return path


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("no_such_module_kf:app", "No module named 'no_such_module_kf'"),
        ("{file}:nope", "has no attribute 'nope'"),
        ("{dir}/missing.py:builder", "No file"),
    ],
    ids=["module", "attribute", "file"],
)
def test_a_graph_that_is_not_there_is_exit_4_and_nothing_is_written(
    cli: Cli, db: Path, graph_file: Path, target: str, says: str
) -> None:
    before = dump(db)
    target = target.format(file=graph_file, dir=graph_file.parent)
    for args in (["run", target, "--input", "hi", "--db", str(db)], ["graph", target]):
        result = cli(*args)
        one_line_error(result)
        assert says in result.err
        assert result.code == 4, result
    assert dump(db) == before


@pytest.mark.parametrize(
    "thread", ["nobody", "'; DROP TABLE tx_threads; --", "../../etc/passwd", "kept%", "KEPT"]
)
def test_an_unknown_thread_is_exit_4_and_nothing_is_written(
    cli: Cli, db: Path, graph_file: Path, thread: str
) -> None:
    before = dump(db)
    for args in (
        ["threads", "show", thread],
        ["threads", "delete", thread, "--yes"],
        ["run", f"{graph_file}:builder", "--thread", thread, "--continue"],
    ):
        result = cli(*args, "--db", str(db))
        one_line_error(result)
        assert f"No thread {thread!r}" in result.err
        assert result.code == 4, result
    assert dump(db) == before
    assert "kept" in cli("threads", "list", "--db", str(db)).out


ON_A_THREAD = ["threads-show", "threads-delete", "chat", "run", "demo"]


@pytest.mark.parametrize("command", ["threads-list", *ON_A_THREAD])
@pytest.mark.parametrize("make", [garbage, text_file, truncated], ids=["garbage", "text", "cut"])
def test_a_corrupt_database_file_is_one_line_and_left_as_it_was(
    cli: Cli, tmp_path: Path, graph_file: Path, make: Callable[[Path], None], command: str
) -> None:
    path = tmp_path / "broken.db"
    make(path)
    before = digest(path)
    result = cli(*command_line(command, "kept", graph_file), "--db", str(path), stdin="hi\n")
    one_line_error(result)
    assert str(path) in result.err  # says which file
    assert result.code == 1, result  # a failure that is neither usage nor "not found"
    assert digest(path) == before  # not "repaired", not overwritten
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("broken")) == [
        "broken.db"
    ]


def test_a_directory_given_as_the_database_is_not_found(cli: Cli, tmp_path: Path) -> None:
    for args in (["threads", "list"], ["threads", "show", "kept"]):
        result = cli(*args, "--db", str(tmp_path))
        one_line_error(result)
        assert f"No database at {tmp_path}" in result.err
        assert result.code == 4, result


@pytest.mark.parametrize(
    "args",
    [["threads", "list"], ["threads", "show", "kept"], ["threads", "delete", "kept", "--yes"]],
    ids=["list", "show", "delete"],
)
def test_reading_another_programs_database_writes_nothing_into_it(
    cli: Cli, tmp_path: Path, args: list[str]
) -> None:
    """`--db` pointing at the wrong SQLite file (another program's) must not change it."""
    path = tmp_path / "bookmarks.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE bookmarks (url TEXT)")
    conn.execute("INSERT INTO bookmarks VALUES ('https://example.com')")
    conn.commit()
    conn.close()
    before = dump(path)
    result = cli(*args, "--db", str(path))
    assert "Traceback" not in result.err
    if result.code != 0:
        one_line_error(result)
    if args[1] != "list":
        assert result.code == 4, result
    assert dump(path) == before


@pytest.mark.parametrize(
    "args",
    [
        ["chat", "--model", MODEL, "--thread", "kept"],
        ["demo", "--model", MODEL, "--thread", "kept", "--yes"],
    ],
    ids=["chat", "demo"],
)
def test_a_model_without_its_key_is_exit_3_and_nothing_is_written(
    cli: Cli, db: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = dump(db)
    with respx.mock(using="httpx") as mock:  # and nothing is sent anywhere
        result = cli(*args, "--db", str(db), stdin="hi\n")
        assert not mock.calls
    one_line_error(result)
    assert "OPENAI_API_KEY" in result.err
    assert result.code == 3, result
    assert dump(db) == before


HOSTILE_IDS = [
    pytest.param("", id="empty"),
    pytest.param("a\nb", id="newline"),
    pytest.param("a\x1b[2Jb", id="terminal-escape"),
    pytest.param("x" * 300, id="300-chars"),
    pytest.param(os.fsdecode(b"\xff\xfe"), id="undecodable-bytes"),  # as argv decodes them
]


@pytest.mark.parametrize("command", ON_A_THREAD)
@pytest.mark.parametrize("thread", HOSTILE_IDS)
def test_a_hostile_thread_id_is_a_usage_error_in_one_line_and_nothing_is_written(
    cli: Cli, db: Path, graph_file: Path, thread: str, command: str
) -> None:
    before = dump(db)
    result = cli(*command_line(command, thread, graph_file), "--db", str(db), stdin="hi\n")
    one_line_error(result)
    assert dump(db) == before
    assert result.code == 2, result  # documented: 2, a usage error (bad arguments)


@pytest.mark.parametrize("command", ["threads-show", "chat", "run", "demo"])
def test_a_thread_with_a_corrupt_row_is_one_line_naming_it_and_left_as_it_was(
    cli: Cli, db: Path, graph_file: Path, command: str
) -> None:
    conn = sqlite3.connect(db)
    conn.execute('UPDATE tx_messages SET body = \'{"role": "root"\' WHERE seq = 1')
    conn.commit()
    conn.close()
    before = dump(db)
    result = cli(*command_line(command, "kept", graph_file), "--db", str(db), stdin="hello\n")
    one_line_error(result)
    assert "Thread 'kept'" in result.err
    assert "context.1" in result.err
    assert result.code == 1, result
    assert dump(db) == before
    listed = cli("threads", "list", "--db", str(db))
    assert listed.code == 0, listed.err
    assert "kept" in listed.out
