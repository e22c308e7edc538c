"""Serving under load: `tenxgraph serve` workers on one PostgreSQL, many concurrent streaming
clients, and (with --kill) one worker SIGKILLed in the middle.

    source .ci/postgres.sh; start_postgres
    python3 benchmarks/serve/load.py --workers 1 --clients 200
    python3 benchmarks/serve/load.py --workers 2 --clients 200 --kill

Each client creates a thread on one worker (round robin) and streams one run of
`benchmarks/serve/app.py` (one tool call, then an answer of 20 tokens 25 ms apart). A client
whose worker dies reconnects to another one and joins its run's stream from the last event it
got (`Last-Event-ID`). At the end every thread is checked: exactly one run, finished as a
success, and the history [human, ai (tool call), tool, ai (answer)] with every message once.
Reported: runs/s over the whole test, time to first answer token (p50, p99) and to the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "benchmarks" / "serve" / "app.py") + ":graph"


FIRST_TOKENS: list[Any] = []  # clients that got their first answer token, in order
KILL_AFTER = [0]  # --kill: how many first tokens before the kill
QUARTER = asyncio.Event()


@dataclass
class Client:
    thread_id: str = ""
    run_id: str = ""
    started: float = 0.0
    first_token: float | None = None
    ended: float | None = None
    reconnects: int = 0
    events: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fresh_database(dsn: str) -> str:
    name = f"serve_load_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return dsn.rsplit("/", 1)[0] + "/" + name


def start_worker(dsn: str, port: int, lease_ttl: float) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tenxgraph.cli", "serve", APP, "--db", dsn,
               "--port", str(port), "--lease-ttl", str(lease_ttl)]  # fmt: skip
    log = open(f"/tmp/serve-load-{port}.log", "wb")  # noqa: SIM115 - the process keeps it
    return subprocess.Popen(command, cwd=ROOT, stderr=log)


async def wait_ready(http: httpx.AsyncClient, url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if (await http.get(f"{url}/ok")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)  # a process starting: polling its health endpoint
    raise SystemExit(f"worker {url} did not become ready")


async def _read(response: httpx.Response, client: Client) -> str | None:
    """Read SSE events until `end`; the last event id seen (None when ended)."""
    event, last = "", None
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            last = line[4:]
        elif line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            client.events.append(event)
            data = json.loads(line[6:])
            if event == "metadata":
                client.run_id = data["run_id"]
            elif event == "messages" and client.first_token is None:
                chunk = data[0]
                if chunk.get("type") == "AIMessageChunk" and chunk.get("content"):
                    client.first_token = time.perf_counter()
                    FIRST_TOKENS.append(client)
                    if len(FIRST_TOKENS) >= KILL_AFTER[0]:
                        QUARTER.set()
            elif event == "end":
                client.ended = time.perf_counter()
                return None
    return last


async def one_client(http: httpx.AsyncClient, urls: list[str], alive: list[bool], i: int,
                     client: Client) -> None:  # fmt: skip
    home = i % len(urls)
    client.thread_id = str(uuid.uuid4())
    for url in (urls[home], *urls):  # the home worker, or another if it died meanwhile
        try:
            body = {"thread_id": client.thread_id, "if_exists": "do_nothing"}
            (await http.post(f"{url}/threads", json=body)).raise_for_status()
            break
        except httpx.TransportError:
            continue
    question = {"type": "human", "content": f"where is order {i}?"}
    body = {"assistant_id": "bench", "stream_mode": ["messages-tuple"],
            "input": {"messages": [question]}}  # fmt: skip
    client.started = time.perf_counter()
    last: str | None = None
    try:
        path = f"{urls[home]}/threads/{client.thread_id}/runs/stream"
        async with http.stream("POST", path, json=body) as response:
            last = await _read(response, client)
        if client.ended is not None:
            return
    except httpx.TransportError as exc:
        if all(alive):
            raise RuntimeError(f"client {i} lost a live worker: {exc!r}") from exc
    while client.ended is None:  # the worker died: join the run on a live one
        client.reconnects += 1
        other = next(u for k, u in enumerate(urls) if alive[k] and k != home)
        if not client.run_id:  # died before the run's first event reached us
            runs = (await http.get(f"{other}/threads/{client.thread_id}/runs")).json()
            if not runs:  # nor was the run queued: ask again
                path = f"{other}/threads/{client.thread_id}/runs/stream"
                async with http.stream("POST", path, json=body) as response:
                    last = await _read(response, client)
                continue
            client.run_id = runs[0]["run_id"]
        headers = {"Last-Event-ID": last} if last else {}
        path = f"{other}/threads/{client.thread_id}/runs/{client.run_id}/stream"
        try:
            async with http.stream("GET", path, headers=headers) as response:
                last = await _read(response, client) or last
        except httpx.TransportError:
            continue


async def check(http: httpx.AsyncClient, url: str, clients: list[Client]) -> dict[str, int]:
    """Every thread: one run, a success, and its four messages once each."""
    bad = 0
    for c in clients:
        runs = (await http.get(f"{url}/threads/{c.thread_id}/runs")).json()
        state = (await http.get(f"{url}/threads/{c.thread_id}/state")).json()
        messages = state["values"]["messages"]
        kinds = [m["type"] for m in messages]
        ids = [m["id"] for m in messages]
        ok = (len(runs) == 1 and runs[0]["status"] == "success" and len(set(ids)) == len(ids)
              and kinds == ["human", "ai", "tool", "ai"])  # fmt: skip
        bad += not ok
        if not ok and bad <= 3:
            print("bad thread", c.thread_id, [r["status"] for r in runs], kinds, file=sys.stderr)
    resumed = sum(c.events.count("metadata") > 1 for c in clients)  # a second attempt began
    return {"bad_threads": bad, "resumed_runs": resumed}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("TENXGRAPH_TEST_PG_DSN"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--kill", action="store_true", help="SIGKILL the last worker mid-test")
    parser.add_argument("--lease-ttl", type=float, default=3.0)
    parser.add_argument("--sqlite", help="a SQLite file instead of PostgreSQL (one worker)")
    args = parser.parse_args()
    if not args.dsn and not args.sqlite:
        raise SystemExit("needs --dsn or TENXGRAPH_TEST_PG_DSN (source .ci/postgres.sh)")
    KILL_AFTER[0] = max(1, args.clients // 4)
    dsn = args.sqlite or await fresh_database(args.dsn)
    ports = [free_port() for _ in range(args.workers)]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    procs = [start_worker(dsn, p, args.lease_ttl) for p in ports]
    alive = [True] * args.workers
    limits = httpx.Limits(max_connections=args.clients * 2, max_keepalive_connections=50)
    timeout = httpx.Timeout(120.0, connect=10.0)
    try:
        async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
            for url in urls:
                await wait_ready(http, url)
            clients = [Client() for _ in range(args.clients)]
            begin = time.perf_counter()
            tasks = [asyncio.create_task(one_client(http, urls, alive, i, c))
                     for i, c in enumerate(clients)]  # fmt: skip
            if args.kill:
                await QUARTER.wait()
                alive[-1] = False
                procs[-1].send_signal(signal.SIGKILL)
                killed_at = time.perf_counter() - begin
            await asyncio.gather(*tasks)
            wall = time.perf_counter() - begin
            verdict = await check(http, urls[0], clients)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    ttft = sorted((c.first_token or c.ended or 0) - c.started for c in clients)
    total = sorted((c.ended or 0) - c.started for c in clients)
    p99 = ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))]
    report = {
        "workers": args.workers,
        "clients": args.clients,
        "killed_at_s": round(killed_at, 2) if args.kill else None,
        "reconnected_clients": sum(c.reconnects > 0 for c in clients),
        "runs_per_s": round(len(clients) / wall, 1),
        "ttft_p50_ms": round(statistics.median(ttft) * 1000, 1),
        "ttft_p99_ms": round(p99 * 1000, 1),
        "run_p50_ms": round(statistics.median(total) * 1000, 1),
        "run_max_ms": round(total[-1] * 1000, 1),
        **verdict,
    }
    print(json.dumps(report))
    if verdict["bad_threads"]:
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
