"""A separate process racing another one on one PostgreSQL thread (run by the PG tests).

Usage: python _pg_race_worker.py DSN SCHEMA THREAD NAME ROUNDS

Prints "ready" once connected (the schema may not exist yet: both processes create it), waits
for a line on stdin, then tries to create THREAD with one message ("won N" or "stale"), then
appends ROUNDS messages, reloading and retrying whenever the other process got there first,
and prints "done CONFLICTS".
"""

from __future__ import annotations

import asyncio
import sys

from tenxgraph.core.exceptions import StaleStateError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer


async def main(dsn: str, schema: str, thread_id: str, name: str, rounds: int) -> None:
    store = PgCheckpointer(dsn, schema=schema, max_size=2)
    await store.asetup()
    print("ready", flush=True)
    sys.stdin.readline()
    first = Message.text_message(f"{name}-0", "user")
    try:
        version = await store.asave(
            thread_id,
            expected_version=None,
            state=AgentState(context=[first]),
            new_messages=[first],
        )
        print(f"won {version}", flush=True)
    except StaleStateError:
        print("stale", flush=True)
    conflicts = 0
    for n in range(1, rounds + 1):
        while True:
            snapshot = await store.aload(thread_id, AgentState)
            assert snapshot is not None
            new = Message.text_message(f"{name}-{n}", "user")
            snapshot.state.context.append(new)
            try:
                await store.asave(
                    thread_id,
                    expected_version=snapshot.version,
                    state=snapshot.state,
                    new_messages=[new],
                )
                break
            except StaleStateError:
                conflicts += 1
    print(f"done {conflicts}", flush=True)
    await store.aclose()


if __name__ == "__main__":
    dsn, schema, thread_id, name, rounds = sys.argv[1:]
    asyncio.run(main(dsn, schema, thread_id, name, int(rounds)))
