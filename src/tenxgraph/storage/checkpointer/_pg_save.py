"""The one statement of a `PgCheckpointer` save: one round trip, one transaction.

A save is a single statement (no BEGIN/COMMIT round trips around it) whose parts run in one
implicit transaction: all of them land, or none does. Its first part is the compare-and-swap
on the thread's row (`UPDATE ... WHERE version = expected`, or `INSERT ... ON CONFLICT DO
NOTHING` for a new thread), which also takes, extends or releases the lease. The other parts
read what it returns (among it the thread's key, which their rows carry), so they write
nothing when it matched no row:

- the new messages, appended after the last stored one (or, for a history rewrite, replacing
  the stored ones: the rows from the new length on are deleted, the others overwritten);
- the checkpoint row of the new version;
- when the save takes the thread's lease (a run's first save: the thread was not its own),
  the thread's stop requests, which were asked of no run or of another one.

Two writers racing on one thread queue on its row: the second one's compare-and-swap then
sees the version the first one wrote and matches nothing. Where the next message goes is read
in the statement's snapshot; it is right whenever the compare-and-swap matches, since no save
can have moved the thread between that snapshot and the version this one replaces. (Were it
ever wrong, the message keys would collide and the whole statement would fail.)
"""

from __future__ import annotations

import functools

# Lease times come from the database's clock, so hosts with skewed clocks agree on them.
NOW = "extract(epoch from clock_timestamp())::double precision"

# The lease after the save: held by $owner for $ttl more seconds, or released (owner NULL).
_LEASE = "CASE WHEN {owner}::text IS NULL THEN NULL ELSE " + NOW + " + {ttl} END"


@functools.cache
def save_statement(schema: str, *, new: bool, rewrite: bool) -> str:
    """The save of a new thread (`new`), or of an existing one at a given version; `rewrite`
    replaces the stored messages. Parameters, in `save_arguments` order."""
    if new:
        # $1 thread, $2 generation, $3 now, $4 owner, $5 ttl, $6 ids, $7 bodies, $8 header,
        # $9 step, $10 status, $11 node
        cas = (
            f"INSERT INTO {schema}.tx_threads (thread_id, version, generation, created_at, "
            "updated_at, lease_owner, lease_expires, lease_heartbeat) "
            f"VALUES ($1, 1, $2, $3, $3, $4::text, {_LEASE.format(owner='$4', ttl='$5')}, "
            f"{NOW}) ON CONFLICT DO NOTHING RETURNING thread_key, generation, 0::bigint AS start, "
            "log_start, $4::text IS NOT NULL AS taken"
        )
        prior = ""
        version, now, ids, bodies, header, step, status, node = (
            "1", "$3", "$6", "$7", "$8", "$9", "$10", "$11",
        )  # fmt: skip
    else:
        # $1 thread, $2 expected version, $3 generation increment, $4 now, $5 owner,
        # $6 ttl, $7 the lease owner allowed to write, $8 ids, $9 bodies, $10 header,
        # $11 step, $12 status, $13 node
        start = (
            "0::bigint"
            if rewrite
            else f"(SELECT COALESCE(MAX(m.seq) + 1, 0) FROM {schema}.tx_messages m "
            "WHERE m.thread_key = th.thread_key)"
        )
        # a rewrite's log starts at seq 0, and no version from before it loads any more
        restart = ", log_start = 0, oldest_generation = generation + 1" if rewrite else ""
        prior = f"prior AS (SELECT lease_owner FROM {schema}.tx_threads WHERE thread_id = $1), "
        cas = (
            f"UPDATE {schema}.tx_threads th SET version = version + 1, "
            "generation = generation + $3, updated_at = $4, lease_owner = $5::text, "
            f"lease_expires = {_LEASE.format(owner='$5', ttl='$6')}, lease_heartbeat = {NOW}"
            f"{restart} WHERE thread_id = $1 AND version = $2 AND (lease_owner IS NULL "
            f"OR lease_owner = $7::text OR lease_expires <= {NOW}) "
            f"RETURNING thread_key, generation, {start} AS start, log_start, "
            "$7::text IS NOT NULL AND NOT EXISTS "
            "(SELECT 1 FROM prior WHERE lease_owner = $7::text) AS taken"
        )
        version, now, ids, bodies, header, step, status, node = (
            "$2 + 1", "$4", "$8", "$9", "$10", "$11", "$12", "$13",
        )  # fmt: skip
    count = f"cardinality({ids}::text[])"
    overwrite = (
        " ON CONFLICT (thread_key, seq) DO UPDATE SET message_id = EXCLUDED.message_id, "
        "body = EXCLUDED.body"
        if rewrite
        else ""
    )
    dropped = (
        f"dropped AS (DELETE FROM {schema}.tx_messages m USING cas "
        f"WHERE m.thread_key = cas.thread_key AND m.seq >= {count}), "
        if rewrite and not new
        else ""
    )
    return (
        f"WITH {prior}cas AS ({cas}), {dropped}"
        f"added AS (INSERT INTO {schema}.tx_messages (thread_key, seq, message_id, body) "
        "SELECT cas.thread_key, cas.start + t.n - 1, decode(t.m, 'hex'), t.b "
        f"FROM cas, unnest({ids}::text[], {bodies}::text[]) WITH ORDINALITY AS t(m, b, n)"
        f"{overwrite}), "
        f"saved AS (INSERT INTO {schema}.tx_checkpoints (thread_key, version, header, "
        "message_count, generation, log_start, step, status, node, created_at) "
        f"SELECT cas.thread_key, {version}, {header}::text, cas.start - cas.log_start + {count}, "
        "cas.generation, cas.log_start, "
        f"{step}::bigint, {status}::text, {node}::text, {now}::double precision FROM cas), "
        f"cleared AS (DELETE FROM {schema}.tx_stop_requests WHERE thread_id = $1 "
        "AND EXISTS (SELECT 1 FROM cas WHERE cas.taken)) "
        "SELECT thread_key FROM cas"
    )


__all__ = ["NOW", "save_statement"]
