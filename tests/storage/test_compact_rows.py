"""Stored rows without what another column holds (schema 5): a message row leaves out its
message's id (the row's id column has it), a checkpoint's header the step, status and node
(columns of the checkpoint row), and the plain state's header is empty. Reading puts them
back, and databases written before (schema 4: full rows) upgrade and read as they were."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from tenxgraph.core.state import AgentState, AnnotationRef, ExecutionStatus, Message, TextBlock
from tenxgraph.storage.checkpointer import BaseCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer._codec import expand_header, plain_id
from tenxgraph.storage.checkpointer._sql import SCHEMA_VERSION
from tenxgraph.storage.checkpointer.base import (
    checkpoint_fields,
    decode_messages,
    decode_state,
    encode_header,
    encode_message,
)
from tenxgraph.storage.checkpointer.postgres import MIGRATIONS as PG_MIGRATIONS
from tenxgraph.storage.checkpointer.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tests.storage._support import Counted, msg
from tests.storage.conftest import Backend

# -- the codec --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message_id", "left_out"),
    [
        ("3218172c7a5186ad501c161a00000000", True),
        ("plain-id é ✓", True),  # JSON writes non-ASCII text as it is
        ('has "quotes"', False),
        ("back\\slash", False),
        ("tab\there", False),
        (7, False),  # a number: the text column could not say so
    ],
)
def test_a_row_leaves_out_only_an_id_its_column_gives_back_as_it_was(
    message_id: str | int, left_out: bool
) -> None:
    message = Message.text_message("hi", message_id=message_id)
    row = encode_message(message, id_column=True)
    assert ('"message_id"' not in row) is left_out
    assert plain_id(message_id) is left_out
    assert encode_message(message).startswith('{"message_id":')  # without a column: kept


def test_only_empty_annotations_of_text_blocks_are_left_out() -> None:
    bare = Message(role="user", content=[TextBlock(text="x"), TextBlock(text="y")])
    cited = Message(
        role="user",
        content=[TextBlock(text="x"), TextBlock(text="y", annotations=[AnnotationRef(url="u")])],
    )
    # the same text elsewhere (a metadata key), and a block whose annotations are not last
    lookalike = Message(
        role="user",
        content=[TextBlock(text="x"), TextBlock(text="z", cache_control={"type": "ephemeral"})],
        metadata={"a": {"k": 1, "annotations": []}},
    )
    assert encode_message(bare).count("annotations") == 0
    assert encode_message(cited).count("annotations") == 1
    assert encode_message(lookalike).count("annotations") == 1  # the metadata's
    for message in (bare, cited, lookalike):
        (back,) = decode_messages(AgentState, "t", [encode_message(message)])
        assert back.model_dump() == message.model_dump()


def _states() -> list[AgentState]:
    plain = AgentState()
    moved = AgentState()
    moved.execution_meta.set_current_node("answer")
    moved.execution_meta.advance_step()
    moved.execution_meta.status = ExecutionStatus.COMPLETED
    paused = AgentState(context_summary="earlier: greetings")
    paused.execution_meta.set_interrupt("tools", "approve?", data={"call": [1, 2.5, None]})
    orphan = AgentState()
    orphan.execution_meta.thread_id = None
    counted = Counted(count=3)
    counted.execution_meta.advance_step()
    return [plain, moved, paused, orphan, counted]


@pytest.mark.parametrize("index", range(5))
def test_a_listed_header_reads_back_equal_once_its_columns_are_put_back(index: int) -> None:
    state = _states()[index]
    if index != 3:  # (the fourth has no thread id: the header says so)
        state.execution_meta.thread_id = "t"
    stored = encode_header(state, "t", listed=True)
    for key in ('"step"', '"status"', '"current_node"'):
        assert key not in stored
    header = expand_header(stored, *checkpoint_fields(state))
    back = decode_state(type(state), "t", header, [])
    assert back.model_dump() == state.model_dump()


def test_the_plain_states_header_is_empty_and_a_full_one_is_read_as_it_is() -> None:
    state = AgentState()
    state.execution_meta.thread_id = "t"
    assert encode_header(state, "t", listed=True) == ""
    full = encode_header(state, "t")  # as schema 4 wrote it
    assert expand_header(full, 99, "error", "elsewhere") == full  # its own fields win
    custom = Counted(count=1)
    old = encode_header(custom, "t")
    assert old.startswith('{"count"')
    assert expand_header(old, 5, "completed", "x") == old


def test_a_listed_header_written_by_other_means_still_gets_its_columns() -> None:
    """A header edited by hand (other spacing, keys in another order) reads the same."""
    state = Counted(count=4)
    state.execution_meta.thread_id = "t"
    stored = json.dumps({"count": 4, "execution_meta": {}}, indent=1)
    back = decode_state(Counted, "t", stored, [], listed=(2, "completed", "answer"))
    assert back.count == 4
    meta = back.execution_meta
    assert (meta.step, meta.status, meta.current_node) == (2, "completed", "answer")


# -- the stores ------------------------------------------------------------------------------


async def _save(
    store: BaseCheckpointer, state: AgentState, expected: int | None, *new: Message
) -> int:
    state.execution_meta.thread_id = "t"
    return await store.asave("t", expected_version=expected, state=state, new_messages=list(new))


async def test_stored_rows_hold_no_copy_of_their_columns_and_read_back_whole(
    sql_backend: Backend,
) -> None:
    store = sql_backend.store
    system = Message.text_message("rules", "system")
    odd = Message.text_message("odd id", message_id='say "hi"')
    numbered = Message.text_message("numbered", message_id=42)
    plain = msg("a")
    await _save(store, AgentState(), None, system, plain)
    state = AgentState()
    state.execution_meta.set_current_node("answer")
    state.execution_meta.advance_step()
    await _save(store, state, 1, odd, numbered)
    rows = await sql_backend.sql("SELECT message_id, body FROM tx_messages ORDER BY seq")
    assert [json.loads(body).get("message_id") for _, body in rows] == [None, None, 'say "hi"', 42]
    headers = await sql_backend.sql(
        "SELECT header, step, node FROM tx_checkpoints ORDER BY version"
    )
    assert headers == [("", 0, "__start__"), ("", 1, "answer")]
    expected = [system, plain, odd, numbered]
    head = await store.aload("t", AgentState)
    assert head is not None
    assert [(m.message_id, m.text(), m.role) for m in head.state.context] == [
        (m.message_id, m.text(), m.role) for m in expected
    ]
    assert (head.state.execution_meta.step, head.state.execution_meta.current_node) == (1, "answer")
    first = await store.aload("t", AgentState, 1)
    assert first is not None
    assert first.state.execution_meta.current_node == "__start__"
    # the paged reads put the ids back too
    recent = await store.aload_recent("t", AgentState, 1)
    assert recent is not None
    assert [m.message_id for m in recent.state.context] == [m.message_id for m in expected]
    assert [m.message_id for m in await store.aread_log("t", AgentState, 0, 0, 4)] == [
        m.message_id for m in expected
    ]
    found = await store.asystem_messages("t", AgentState, 0, 0, 4)
    assert [(at, m.message_id) for at, m in found] == [(0, system.message_id)]
    assert await store.afind_ids("t", 0, [system.message_id, 42, "nope"], 4) == {
        str(system.message_id),
        "42",
    }
    # a restore copies the rows as they are, and they still read back whole
    assert await store.arestore("t", 1, expected_version=2) == 3
    restored = await store.aload("t", AgentState)
    assert restored is not None
    assert [m.message_id for m in restored.state.context] == [system.message_id, plain.message_id]


async def test_sqlite_keeps_a_hex_id_as_its_bytes_and_finds_it_either_way(
    tmp_path: Path,
) -> None:
    store = SqliteCheckpointer(tmp_path / "ids.db")
    try:
        made, uuid_hex = msg("made"), Message.text_message("uuid", message_id=uuid.uuid4().hex)
        upper = Message.text_message("upper", message_id="AB" * 16)  # not lowercase: text
        await _save(store, AgentState(), None, made, uuid_hex, upper)
        conn = sqlite3.connect(tmp_path / "ids.db")
        ids = [r[0] for r in conn.execute("SELECT message_id FROM tx_messages ORDER BY seq")]
        assert ids == [
            bytes.fromhex(str(made.message_id)),
            bytes.fromhex(uuid_hex.message_id),
            "AB" * 16,
        ]
        # a row written before schema 5 keeps a hex id as text: found all the same
        older = msg("older")
        conn.execute(
            "INSERT INTO tx_messages (thread_key, seq, message_id, body) "
            "SELECT thread_key, 3, ?, ? FROM tx_threads WHERE thread_id = 't'",
            (str(older.message_id), encode_message(older)),
        )
        conn.commit()
        conn.close()
        wanted = [made.message_id, uuid_hex.message_id, upper.message_id, older.message_id, "x"]
        assert await store.afind_ids("t", 0, wanted, 4) == {str(i) for i in wanted[:4]}
        head = await store.aload("t", AgentState)
        assert head is not None
        assert [m.message_id for m in head.state.context] == wanted[:3]
    finally:
        await store.aclose()


# ids of every shape the id column must keep apart and give back: 16 letters and the hex of
# their bytes, 16 bytes of UTF-8 that are not letters, upper-case hex, 15 and 17 characters,
# non-ASCII, a UUID's hex, and a number
ODD_IDS: list[str | int] = [
    "abcdefghijklmnop",
    b"abcdefghijklmnop".hex(),
    "ÉÉÉÉÉÉÉÉ",
    "AB" * 16,
    "abcdefghijklmno",
    "abcdefghijklmnopq",
    "日本語のメッセージ",
    "3218172c7a5186ad501c161a000000ff",
    7,
]


async def test_message_ids_of_every_shape_are_kept_apart_and_read_back(
    sql_backend: Backend,
) -> None:
    messages = [Message.text_message(f"m{i}", message_id=mid) for i, mid in enumerate(ODD_IDS)]
    await _save(sql_backend.store, AgentState(), None, *messages)
    store = sql_backend.open()
    head = await store.aload("t", AgentState)
    assert head is not None
    assert [m.message_id for m in head.state.context] == ODD_IDS
    recent = await store.aload_recent("t", AgentState, 2)  # the rest read from the log
    assert recent is not None
    assert [m.message_id for m in recent.state.context] == ODD_IDS
    count = len(ODD_IDS)
    for mid in ODD_IDS:
        assert await store.afind_ids("t", 0, [mid], count) == {str(mid)}
    near = ["abcdefghijklmnoq", "ab" * 16, "ÉÉÉÉÉÉÉ", "8"]
    assert await store.afind_ids("t", 0, near, count) == set()
    assert await store.afind_ids("t", 0, ODD_IDS, count) == {str(i) for i in ODD_IDS}


async def _schema_4(backend: Backend) -> None:
    """An empty schema-4 database, made by the statements of versions 1 to 4."""
    if backend.name == "sqlite":
        for version in range(1, 5):
            for statement in SQLITE_MIGRATIONS[version]:
                await backend.sql(statement)
    else:
        await backend.sql(f'CREATE SCHEMA IF NOT EXISTS "{backend.schema}"')
        for version in range(1, 5):
            for statement in PG_MIGRATIONS[version](f'"{backend.schema}"'):
                await backend.sql(statement)
    await backend.sql("CREATE TABLE tx_schema_version (version INTEGER)")
    await backend.sql("INSERT INTO tx_schema_version VALUES (4)")


async def _old_rows(backend: Backend, versions: list[tuple[AgentState, list[Message]]]) -> None:
    """A thread as schema 4 stored it: full message rows and full headers."""
    seq = 0
    for version, (state, new) in enumerate(versions, start=1):
        for message in new:
            await backend.sql(
                "INSERT INTO tx_messages (thread_id, seq, message_id, body) VALUES (?, ?, ?, ?)",
                "t", seq, str(message.message_id), encode_message(message),
            )  # fmt: skip
            seq += 1
        step, status, node = checkpoint_fields(state)
        await backend.sql(
            "INSERT INTO tx_checkpoints (thread_id, version, header, message_count, generation, "
            "log_start, step, status, node, created_at) VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?, ?)",
            "t", version, encode_header(state, "t"), seq, step, status, node, float(version),
        )  # fmt: skip
    await backend.sql(
        "INSERT INTO tx_threads (thread_id, version, generation, created_at, updated_at) "
        "VALUES (?, ?, 0, 1.0, 1.0)",
        "t", len(versions),
    )  # fmt: skip


async def test_a_schema_4_database_upgrades_and_reads_its_full_rows(sql_backend: Backend) -> None:
    await _schema_4(sql_backend)
    system = Message.text_message("rules", "system")
    first, second = Counted(count=1), Counted(count=2)
    first.execution_meta.thread_id = second.execution_meta.thread_id = "t"
    second.execution_meta.set_current_node("answer")
    second.execution_meta.advance_step()
    second.execution_meta.status = ExecutionStatus.COMPLETED
    old = [system, msg("a"), Message.text_message("b", message_id=5)]
    await _old_rows(sql_backend, [(first, old[:2]), (second, old[2:])])
    await sql_backend.sql("INSERT INTO tx_stop_requests VALUES ('t', 1.0)")
    await sql_backend.sql("UPDATE tx_threads SET lease_owner = 'run-1', lease_expires = 9e9")
    store = sql_backend.open()
    head = await store.aload("t", Counted)
    assert (await sql_backend.sql("SELECT version FROM tx_schema_version")) == [(SCHEMA_VERSION,)]
    assert head is not None
    assert head.version == 2
    assert await store.ais_stop_requested("t")
    holder = await store.alease_holder("t")
    assert holder is not None
    assert holder.owner == "run-1"
    await store.arelease_lease("t", "run-1")
    assert head.state.model_dump(exclude={"context"}) == second.model_dump(exclude={"context"})
    assert [m.model_dump() for m in head.state.context] == [m.model_dump() for m in old]
    before = await store.aload("t", Counted, 1)
    assert before is not None
    assert before.state.count == 1
    assert before.state.execution_meta.current_node == "__start__"
    recent = await store.aload_recent("t", Counted, 1)
    assert recent is not None
    assert [m.message_id for m in recent.state.context] == [m.message_id for m in old]
    found = await store.asystem_messages("t", Counted, 0, 0, 3)
    assert [m.message_id for _, m in found] == [system.message_id]
    assert await store.afind_ids("t", 0, [5, old[1].message_id], 3) == {"5", str(old[1].message_id)}
    # new rows after the old ones, in the new form; both read back, and restore over them
    third = Counted(count=3)
    third.execution_meta.set_current_node("answer")
    assert await _save(store, third, 2, msg("c")) == 3
    rows = await sql_backend.sql("SELECT body FROM tx_messages ORDER BY seq")
    assert [json.loads(b).get("message_id") is None for (b,) in rows] == [False] * 3 + [True]
    head = await store.aload("t", Counted)
    assert head is not None
    assert [m.text() for m in head.state.context] == ["rules", "a", "b", "c"]
    assert await store.arestore("t", 2, expected_version=3) == 4
    restored = await store.aload("t", Counted)
    assert restored is not None
    assert restored.state.count == 2
    assert restored.state.execution_meta.status == ExecutionStatus.COMPLETED
    assert [m.model_dump() for m in restored.state.context] == [m.model_dump() for m in old]
    history = [(i.version, i.step, i.status, i.message_count) for i in await store.ahistory("t")]
    assert history == [(4, 1, "completed", 3), (3, 0, "running", 4), (2, 1, "completed", 3),
                       (1, 0, "running", 2)]  # fmt: skip
