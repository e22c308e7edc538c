"""Credentials redacted by value, before anything is raised, logged, streamed or stored.

The process's credentials are the values given to it: the `api_key` (and other credential
settings) passed to an Agent or model client, and every environment variable whose name says
it holds a secret (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``, ...: every
provider key variable litellm reads is one). Any text can then be cleaned by looking for those
values, whatever their format; a value shorter than 8 characters is never a key and is left
alone. The environment is read lazily and again whenever it changed.

Redaction runs on error paths only (exception messages, log records that are emitted, error
chunks); a successful model call pays nothing here.
"""

from tenxgraph.core.redaction._exceptions import scrub_exception
from tenxgraph.core.redaction._known import (
    MIN_SECRET_LENGTH,
    add_secret,
    contains_secret,
    is_secret_name,
    redact,
    redact_bytes,
    redact_value,
    remember_settings,
)
from tenxgraph.core.redaction._logging import (
    THIRD_PARTY_LOGGERS,
    RedactingFilter,
    get_logger,
    protect_logger,
    protect_loggers,
)

__all__ = [
    "MIN_SECRET_LENGTH",
    "THIRD_PARTY_LOGGERS",
    "RedactingFilter",
    "add_secret",
    "contains_secret",
    "get_logger",
    "is_secret_name",
    "protect_logger",
    "protect_loggers",
    "redact",
    "redact_bytes",
    "redact_value",
    "remember_settings",
    "scrub_exception",
]
