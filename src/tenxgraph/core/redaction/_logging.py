"""Log records cleaned of credentials, by a filter on each logger that may see one."""

from __future__ import annotations

import logging

from tenxgraph.core.redaction._exceptions import scrub_exception
from tenxgraph.core.redaction._known import redact


class RedactingFilter(logging.Filter):
    """A logging filter that redacts credentials from each record it lets through: the
    formatted message and the exception attached to it. Records are never dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: let logging report it as usual
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            scrub_exception(record.exc_info[1])
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


_FILTER = RedactingFilter()


class DebugOptInFilter(logging.Filter):
    """Drops a third-party logger's DEBUG records unless that logger itself was set to DEBUG.

    litellm and the openai SDK log every request at DEBUG, prompts and tool arguments
    included: a root logger at DEBUG (``logging.basicConfig(level=logging.DEBUG)``) would
    write conversations to the logs. Asking the library itself (``LITELLM_LOG=DEBUG``,
    ``logging.getLogger("LiteLLM").setLevel(logging.DEBUG)``) still shows them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        own = logging.getLogger(record.name).level
        return logging.NOTSET < own <= record.levelno


_QUIET = DebugOptInFilter()

# the ones that log request contents at DEBUG
CONTENT_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "openai", "openai._base_client")

# loggers of the libraries on the model path; some log a provider's error body at DEBUG
THIRD_PARTY_LOGGERS = (
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "openai",
    "openai._base_client",
    "httpx",
    "httpcore",
)


def protect_logger(logger: logging.Logger | str) -> logging.Logger:
    """Attach the redacting filter to `logger` (once). A logger filter sees only the records
    logged on that very logger, so each logger that may see a credential needs it."""
    found = logging.getLogger(logger) if isinstance(logger, str) else logger
    if _FILTER not in found.filters:
        found.addFilter(_FILTER)
    return found


# a library's loggers print nothing until the application configures logging (without a
# handler anywhere, Python would print WARNING and above to stderr by itself)
_LIBRARY = logging.getLogger("tenxgraph")
if not any(isinstance(h, logging.NullHandler) for h in _LIBRARY.handlers):
    _LIBRARY.addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)`, with credentials redacted from what it logs."""
    return protect_logger(name)


def protect_loggers() -> None:
    """Protect the model path's third-party loggers and every tenxgraph logger created so far;
    keep the request dumps of litellm and the openai SDK for who asks those libraries."""
    for name in THIRD_PARTY_LOGGERS:
        protect_logger(name)
    for name in CONTENT_LOGGERS:
        found = logging.getLogger(name)
        if _QUIET not in found.filters:
            found.addFilter(_QUIET)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and (
            name == "tenxgraph" or name.startswith("tenxgraph.")
        ):
            protect_logger(logger)


__all__ = [
    "CONTENT_LOGGERS",
    "THIRD_PARTY_LOGGERS",
    "DebugOptInFilter",
    "RedactingFilter",
    "get_logger",
    "protect_logger",
    "protect_loggers",
]
