"""N turns on a 50,000-message PostgreSQL thread by one app, which forgets the thread before
each (cold: the thread read from the store) or keeps it (`--cached`), for instruction counts of
this process (the database server's work is not counted).

    export TENXGRAPH_TEST_PG_DSN=postgresql://...
    PYTHONPATH=src python benchmarks/instructions/cold_turns.py --seed   # once: schema instr_cold
    run benchmarks/instructions/cold_turns.py 10; run benchmarks/instructions/cold_turns.py 40
    # (second - first) / 30: one cold turn (S9's graph: one node reading the last message)
    run benchmarks/instructions/cold_turns.py 10 --cached; ... 40 --cached   # one cached turn
    # --size 1000 (with --seed too): the same on a 1,000-message thread (schema instr_cold_1000)

(`run` as in this folder's README.) Every run adds two messages a turn to the thread, which
changes nothing the turns read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenarios"))

import s9_cold

SIZE = 50_000  # messages in the thread; --size to change it (a schema per size)


def schema(size: int) -> str:
    return "instr_cold" if size == SIZE else f"instr_cold_{size}"


async def seed(dsn: str, size: int) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema(size)}" CASCADE')
    finally:
        await conn.close()
    side = s9_cold.TenxGraph("pg", f"{dsn}#{schema(size)}")
    await side.open()
    try:
        await side.seed(s9_cold.WARM_THREAD, s9_cold.WARM_MESSAGES)
        await side.seed("big", size)
    finally:
        await side.close()


async def turns(dsn: str, count: int, cached: bool, size: int) -> None:
    side = s9_cold.TenxGraph("pg", f"{dsn}#{schema(size)}")
    await side.open()
    try:
        await side.turn(s9_cold.WARM_THREAD)  # the code warm, as in S9's new process
        side.read_all(await side.get_state(s9_cold.WARM_THREAD))
        await side.turn("big")  # the big thread's statements prepared, its rows read once
        for _ in range(count):
            if not cached:  # as a new process would: nothing of the thread kept
                side.app._threads.forget("big")
            await side.turn("big")
    finally:
        await side.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", type=int, nargs="?", default=0)
    parser.add_argument("--cached", action="store_true")
    parser.add_argument("--seed", action="store_true")
    parser.add_argument("--size", type=int, default=SIZE)
    args = parser.parse_args()
    dsn = os.environ["TENXGRAPH_TEST_PG_DSN"]
    if args.seed:
        asyncio.run(seed(dsn, args.size))
    else:
        asyncio.run(turns(dsn, args.count, args.cached, args.size))


if __name__ == "__main__":
    main()
