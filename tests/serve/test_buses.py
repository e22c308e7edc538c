"""`PgBus` and `RedisBus`: a publish on one bus wakes the waiters of another (two connections,
as two workers would have), and a bus whose connection was cut reconnects and wakes everyone
(what was published meanwhile is lost, so its waiters must look again)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tenxgraph.serve.bus import Bus, run_topic
from tests.serve.conftest import redis_url
from tests.storage.conftest import pg_dsn

WAIT = 10.0  # a bound on waits that should end at once: a broken bus fails, it does not hang


def _pg(channel: str) -> Any:
    from tenxgraph.serve.pg_bus import PgBus

    return PgBus(pg_dsn(), channel=channel)


def _redis(channel: str) -> Any:
    from tenxgraph.serve.redis_bus import RedisBus

    return RedisBus(redis_url(), channel=channel)


@pytest.fixture(params=["pg", "redis"])
async def two_buses(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, Any]]:
    import uuid

    make = _pg if request.param == "pg" else _redis
    channel = f"tx_test_{uuid.uuid4().hex[:12]}"
    first, second = make(channel), make(channel)
    await first.start()
    await second.start()
    try:
        yield first, second
    finally:
        await first.stop()
        await second.stop()


async def test_a_publish_wakes_a_waiter_on_another_bus(two_buses: tuple[Bus, Bus]) -> None:
    first, second = two_buses
    topic, other = run_topic("r1"), run_topic("r2")
    with second.watch(topic) as woke, second.watch(other) as not_woken:
        with first.watch(topic) as local:
            await first.publish(topic)
            assert local.is_set()  # this process's waiters at once
        await asyncio.wait_for(woke.wait(), WAIT)
        with second.watch("probe") as probe:  # sent after `topic`: arrives after it
            await first.publish("probe")
            await asyncio.wait_for(probe.wait(), WAIT)
        assert not not_woken.is_set()  # a topic wakes its own waiters only
    with first.watch(other) as back:  # and the other way round
        await second.publish(other)
        await asyncio.wait_for(back.wait(), WAIT)


async def test_many_topics_published_at_once_wake_their_waiters_on_another_bus(
    two_buses: tuple[Bus, Bus],
) -> None:
    """A worker's event writer names every run it wrote for in one publish: 400 run topics
    are over 16,000 characters, more than one NOTIFY carries, so they go in several."""
    first, second = two_buses
    topics = [run_topic(f"run-{i:04d}-{'x' * 30}") for i in range(400)]
    with contextlib.ExitStack() as stack:
        woken = [stack.enter_context(second.watch(topic)) for topic in topics]
        await first.publish_many(topics)
        await asyncio.wait_for(asyncio.gather(*(w.wait() for w in woken)), WAIT)


async def _cut(bus: Any) -> None:
    """Cut the bus's listening connection from the server side."""
    if type(bus).__name__ == "PgBus":
        import asyncpg

        conn = await asyncpg.connect(bus.dsn)
        try:
            pid = bus._listener.get_server_pid()
            assert await conn.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await conn.close()
    else:
        import redis.asyncio as redis

        client = redis.from_url(bus.url)
        try:
            assert await client.client_kill_filter(_type="pubsub") >= 1
        finally:
            await client.aclose()


async def test_a_cut_bus_reconnects_and_wakes_everyone(two_buses: tuple[Any, Any]) -> None:
    first, second = two_buses
    topic = run_topic("r1")
    with second.watch(topic) as woke, second.watch("other") as other:
        before = second.connections
        await _cut(second)
        # nobody published: the wake-ups come from the reconnection itself
        await asyncio.wait_for(woke.wait(), WAIT)
        await asyncio.wait_for(other.wait(), WAIT)
        assert second.connections == before + 1
        woke.clear()
        await asyncio.wait_for(second.listening.wait(), WAIT)
        await first.publish(topic)  # and it hears the other bus again
        await asyncio.wait_for(woke.wait(), WAIT)


@pytest.mark.parametrize("with_redis", [False, True])
def test_create_app_on_postgresql_picks_its_bus(with_redis: bool) -> None:
    from tenxgraph.core.llm import FunctionModel
    from tenxgraph.prebuilt import ReactAgent
    from tenxgraph.serve import create_app
    from tenxgraph.serve.pg_bus import PgBus
    from tenxgraph.serve.redis_bus import RedisBus

    graph = ReactAgent(FunctionModel(lambda messages, info: "hi"), []).compile(name="g")
    url = "redis://127.0.0.1:1/0" if with_redis else None  # nothing connects before start
    app = create_app(graph, db="postgresql://nobody@127.0.0.1:1/none", redis_url=url)
    bus = app.state.tenxgraph.bus
    assert type(bus) is (RedisBus if with_redis else PgBus)
