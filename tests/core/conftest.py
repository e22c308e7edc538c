"""Fixtures for the core tests: a mocked OpenAI endpoint, and model retries that never wait."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tenxgraph.core.llm import retry
from tests.core.llm._support import OPENAI_URL


@pytest.fixture
def openai_api() -> Iterator[respx.Route]:
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        yield mock.post(OPENAI_URL)


@pytest.fixture(autouse=True)
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays the retry loop asked for, recorded instead of waited (in every core
    test, so a regression cannot hang)."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(retry, "sleep", record)
    monkeypatch.setattr(retry, "jitter_source", lambda: 1.0)
    return delays
