"""Retrying model calls ourselves: litellm is called with `num_retries=0` because its own
retries differ by provider (the openai SDK retries on its own; the others need tenacity)."""

from __future__ import annotations

import asyncio
import datetime
import random
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from tenxgraph.core.exceptions import (
    ModelAuthError,
    ModelContextWindowError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
)


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """How transient provider failures (429, 5xx, timeouts, lost connections) are retried:
    exponential backoff with full jitter, never longer than `max_delay`, and never shorter
    than the provider's Retry-After."""

    max_retries: int = 3
    initial_delay: float = 1.0
    max_delay: float = 30.0
    backoff_factor: float = 2.0
    retryable_status_codes: frozenset[int] = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"RetryConfig.max_retries must be >= 0, got {self.max_retries}")
        if self.initial_delay < 0 or self.max_delay < 0 or self.backoff_factor < 1:
            raise ValueError(
                "RetryConfig needs initial_delay >= 0, max_delay >= 0 and backoff_factor >= 1"
            )

    def delay(
        self, attempt: int, retry_after: float | None, rng: Callable[[], float]
    ) -> float | None:
        """Seconds to wait before retry number `attempt` (1-based), or None when the provider
        asked for a longer wait than `max_delay` (retrying sooner would only be refused)."""
        backoff = min(self.max_delay, self.initial_delay * self.backoff_factor ** (attempt - 1))
        if self.jitter:
            backoff *= rng()
        if retry_after is not None:
            if retry_after > self.max_delay:
                return None
            return max(backoff, retry_after)
        return backoff


NO_RETRY = RetryConfig(max_retries=0)


def retry_config_from(value: RetryConfig | bool | None) -> RetryConfig:
    """`True` -> the defaults, `False`/`None` -> no retries, a RetryConfig -> itself."""
    if isinstance(value, RetryConfig):
        return value
    if value is True:
        return RetryConfig()
    if value is False or value is None:
        return NO_RETRY
    raise TypeError(f"retry_config must be a RetryConfig, True, False or None, not {value!r}")


# module-level so tests can observe and skip the waiting
sleep = asyncio.sleep
jitter_source: Callable[[], float] = random.random


def is_retryable(error: ModelError, config: RetryConfig) -> bool:
    if isinstance(error, ModelAuthError | ModelContextWindowError | ModelRequestError):
        return False
    status = error.status_code
    if status is None:  # a timeout or a connection that never got an answer
        return isinstance(error, ModelUnavailableError)
    return status in config.retryable_status_codes


def retry_after_seconds(headers: Any) -> float | None:
    """The Retry-After (or retry-after-ms) header, in seconds, if the provider sent one."""
    if not headers:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        value = headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.datetime.now(when.tzinfo)).total_seconds())


__all__ = [
    "NO_RETRY",
    "RetryConfig",
    "is_retryable",
    "retry_after_seconds",
    "retry_config_from",
]
