"""Exceptions raised by tenxgraph.

Every error carries a stable `error_code` (for logs and alerting), a human message that says
what went wrong and what to do, and an optional `context` dict with the details. `str(err)`
is ``"[CODE] message"``. Credentials the process holds are redacted from the message and the
context as the error is made (and again when it is shown), so no error carries a key.
"""

from __future__ import annotations

from typing import Any

from tenxgraph.core.redaction import redact, redact_value


class GraphError(Exception):
    """Base class of every tenxgraph error."""

    default_code = "GRAPH_000"

    def __init__(
        self,
        message: str,
        error_code: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.message = redact(message)
        self.error_code = error_code or self.default_code
        self.context: dict[str, Any] = redact_value(dict(context or {}))
        super().__init__(self.message)

    def __str__(self) -> str:
        return redact(f"[{self.error_code}] {self.message}")

    def __reduce__(self) -> tuple[Any, ...]:
        # keep the code and context across pickling (multiprocessing, task queues)
        return (type(self), (self.message, self.error_code, self.context))

    def __repr__(self) -> str:
        return redact(f"{type(self).__name__}({self.message!r}, error_code={self.error_code!r})")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description of the error, for logs and API responses."""
        return {
            "error_type": type(self).__name__,
            "error_code": self.error_code,
            "message": redact(self.message),
            "context": redact_value(self.context),
        }


class NodeError(GraphError):
    """A node raised; the original exception is the `__cause__`."""

    default_code = "NODE_001"


class NodeTimeoutError(NodeError):
    """A node (NODE_TIMEOUT_001) or a tool (NODE_TIMEOUT_002) ran past its time limit."""

    default_code = "NODE_TIMEOUT_001"


class GraphRecursionError(GraphError):
    """A run executed more steps than its `recursion_limit` allows."""

    default_code = "RECURSION_001"

    @classmethod
    def limit_reached(cls, limit: int, next_nodes: list[str]) -> GraphRecursionError:
        """The error of a run stopped after `limit` steps, `next_nodes` still to run. Its text
        says "recursion limit" as 10xgraph's does (callers match on it); `context` has
        `recursion_limit` and `next`."""
        return cls(
            f"Graph execution exceeded recursion limit: {limit} steps ran without reaching END "
            f"(next: {next_nodes}). If the graph needs more steps, raise it: "
            f"config={{'recursion_limit': {max(2 * limit, 100)}}}",
            context={"recursion_limit": limit, "next": list(next_nodes)},
        )


class BudgetExceededError(GraphError):
    """A run's budget would be exceeded by the next model or tool call (with
    `Budget(on_exceeded="error")`); nothing of the step that asked for it is stored.
    `context`: the `limit`, its `max` and what the run had `spent`."""

    default_code = "BUDGET_001"


class UnreachableNodesWarning(UserWarning):
    """`compile()` found nodes no edge or condition leads to (code GRAPH_003). They still run
    when a node routes to them with `Command(goto=...)`; annotating that node's return type
    with `Command` tells the compiler so, and silences this warning. `nodes` names them."""

    code = "GRAPH_003"

    def __init__(self, message: str, nodes: list[str]) -> None:
        super().__init__(message)
        self.nodes = list(nodes)


class GraphStopRequested(Exception):
    """Raised inside a run when `app.stop(config)` asked it to stop."""


class StorageError(GraphError):
    """A checkpointer could not read or write."""

    default_code = "STORAGE_000"


class TransientStorageError(StorageError):
    """A storage failure that may succeed on retry (connection lost, lock timeout)."""

    default_code = "STORAGE_TRANSIENT_001"


class SerializationError(StorageError):
    """Stored data could not be encoded or decoded; the message names the thread and field."""

    default_code = "STORAGE_SERIALIZATION_001"


class SchemaVersionError(StorageError):
    """The database schema is newer than this version of tenxgraph understands."""

    default_code = "STORAGE_SCHEMA_001"


class StaleStateError(StorageError):
    """A write was based on a version of the thread that another writer already replaced."""

    default_code = "STORAGE_CONFLICT_001"


class ThreadBusyError(StorageError):
    """Another run holds the thread (its lease has not expired); nothing was written. Retry
    later, or choose what a second run does with `config["multitask_strategy"]`."""

    default_code = "STORAGE_THREAD_BUSY_001"


class LeaseLostError(StorageError):
    """A run lost its thread's lease (it expired, and another run took the thread) before it
    could save; nothing was written. The other run now owns the thread."""

    default_code = "STORAGE_LEASE_LOST_001"


class ResourceNotFoundError(StorageError):
    """The thread, message or record asked for does not exist."""

    default_code = "STORAGE_NOT_FOUND_001"


class EmbeddingError(StorageError):
    """A store's embedding function failed or gave vectors that do not fit its index (wrong
    count, wrong dims, not numbers). Nothing was written; the cause is the `__cause__`."""

    default_code = "STORAGE_EMBEDDING_001"


class MetricsError(GraphError):
    """A metrics or callback sink failed."""

    default_code = "METRICS_001"


class ModelError(GraphError):
    """A model provider refused or failed a call. `context` names the provider, model and HTTP
    status; the message says what to do."""

    default_code = "MODEL_000"

    @property
    def provider(self) -> str | None:
        return self.context.get("provider")

    @property
    def model(self) -> str | None:
        return self.context.get("model")

    @property
    def status_code(self) -> int | None:
        return self.context.get("status_code")


class ModelAuthError(ModelError):
    """The provider rejected the credentials (401/403), or no key was found for it."""

    default_code = "MODEL_AUTH_001"


class ModelRateLimitError(ModelError):
    """The provider said to slow down (429) and our retries ran out."""

    default_code = "MODEL_RATE_LIMIT_001"


class ModelContextWindowError(ModelError):
    """The request is longer than the model's context window."""

    default_code = "MODEL_CONTEXT_001"


class ModelUnavailableError(ModelError):
    """The provider failed (5xx), timed out or could not be reached, after our retries."""

    default_code = "MODEL_UNAVAILABLE_001"


class ModelRequestError(ModelError):
    """The provider rejected the request as invalid (400, 404, 422): fix the request."""

    default_code = "MODEL_REQUEST_001"


class UnsupportedContentError(ModelRequestError):
    """A content block the model's provider cannot take in that form (audio for Anthropic,
    audio by URL for OpenAI, video for OpenAI...), found before the request is sent: nothing
    was sent. The message names the block, the form and the provider, and says what to give
    instead; `context` has `provider`, `model`, `block_type`, `media_kind` and `where`
    ("message" or "tool result")."""

    default_code = "MODEL_CONTENT_001"

    @property
    def block_type(self) -> str | None:
        return self.context.get("block_type")

    @property
    def media_kind(self) -> str | None:
        return self.context.get("media_kind")


class MediaUploadError(ModelRequestError):
    """Uploading media to a provider's Files API (`MultimodalConfig` with `FILE_ID` handling)
    failed, before the model was asked: nothing was sent to the model. Not retried;
    `fallback_models` are tried. `context` has `provider`, `model`, `status_code` (the upload's,
    None when none came), `sha256`, `mime_type` and the provider's redacted `detail`."""

    default_code = "MODEL_UPLOAD_001"


class OutputValidationError(GraphError):
    """An Agent's final answer did not match its `output_schema`, also after the model was
    shown the validation errors `output_retries` times. `raw_text` is the last answer's JSON
    text (the output tool's arguments in tool mode); `errors` are pydantic's errors for it
    (`ValidationError.errors()`, without URLs); `context` also has `schema`, `attempts`,
    `model`."""

    default_code = "OUTPUT_001"

    @property
    def raw_text(self) -> str:
        return str(self.context.get("raw_text", ""))

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.context.get("errors") or [])


class FetchError(GraphError):
    """Fetching a URL's content failed: the response was too large (FETCH_002), too slow
    (FETCH_003), of a type not allowed (FETCH_004), an HTTP error or unreachable (FETCH_005),
    or redirected too often (FETCH_006). `context` has the `url` and the details."""

    default_code = "FETCH_000"


class UnsafeURLError(FetchError):
    """A URL was refused before anything was sent to it: a scheme other than http(s),
    credentials in the URL, or a host that resolves to a loopback, private, link-local,
    metadata or otherwise non-public address. `context` has the `url` and the `reason`."""

    default_code = "FETCH_001"


__all__ = [
    "BudgetExceededError",
    "EmbeddingError",
    "FetchError",
    "GraphError",
    "GraphRecursionError",
    "GraphStopRequested",
    "LeaseLostError",
    "MediaUploadError",
    "MetricsError",
    "ModelAuthError",
    "ModelContextWindowError",
    "ModelError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelUnavailableError",
    "NodeError",
    "NodeTimeoutError",
    "OutputValidationError",
    "ResourceNotFoundError",
    "SchemaVersionError",
    "SerializationError",
    "StaleStateError",
    "StorageError",
    "ThreadBusyError",
    "TransientStorageError",
    "UnreachableNodesWarning",
    "UnsafeURLError",
    "UnsupportedContentError",
]
