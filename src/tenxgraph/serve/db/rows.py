"""The server's records as table rows and back: the column lists both backends select and
insert, in this order, and the JSON of their dict columns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tenxgraph.serve.records import RunRecord, ThreadRecord

RUN_COLUMNS = (
    "run_id, thread_id, owner, assistant_id, kwargs, metadata, multitask_strategy, status, "
    "created_at, updated_at, worker, lease_expires, cancel, attempt, start_version, result, "
    "temporary"
)
THREAD_COLUMNS = "thread_id, owner, metadata, status, created_at, updated_at"


def thread_from_row(row: Sequence[Any]) -> ThreadRecord:
    return ThreadRecord(row[0], row[1], json.loads(row[2]), row[3], row[4], row[5])


def run_from_row(row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        owner=row[2],
        assistant_id=row[3],
        kwargs=json.loads(row[4]),
        metadata=json.loads(row[5]),
        multitask_strategy=row[6],
        status=row[7],
        created_at=row[8],
        updated_at=row[9],
        worker=row[10],
        lease_expires=row[11],
        cancel=row[12],
        attempt=row[13],
        start_version=row[14],
        result=None if row[15] is None else json.loads(row[15]),
        temporary=bool(row[16]),
    )


def run_row(run: RunRecord) -> tuple[Any, ...]:
    """The values of `RUN_COLUMNS` for `run`."""
    result = None if run.result is None else json.dumps(run.result)
    return (
        run.run_id, run.thread_id, run.owner, run.assistant_id, json.dumps(run.kwargs),
        json.dumps(run.metadata), run.multitask_strategy, run.status, run.created_at,
        run.updated_at, run.worker, run.lease_expires, run.cancel, run.attempt,
        run.start_version, result, run.temporary,
    )  # fmt: skip


__all__ = ["RUN_COLUMNS", "THREAD_COLUMNS", "run_from_row", "run_row", "thread_from_row"]
