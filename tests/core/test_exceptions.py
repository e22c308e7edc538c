"""The exception hierarchy: codes, messages, context, to_dict."""

from __future__ import annotations

import pytest

from tenxgraph.core import exceptions as exc
from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    GraphStopRequested,
    MetricsError,
    NodeError,
    NodeTimeoutError,
    ResourceNotFoundError,
    SchemaVersionError,
    SerializationError,
    StaleStateError,
    StorageError,
    TransientStorageError,
)


def test_graph_error_str_is_code_then_message() -> None:
    error = GraphError("something broke", "X_042", {"node": "MAIN"})
    assert str(error) == "[X_042] something broke"
    assert (error.message, error.error_code, error.context) == (
        "something broke",
        "X_042",
        {"node": "MAIN"},
    )
    assert error.args == ("something broke",)


def test_graph_error_defaults() -> None:
    error = GraphError("m")
    assert error.error_code == "GRAPH_000"
    assert error.context == {}
    assert str(error) == "[GRAPH_000] m"


def test_graph_error_copies_its_context() -> None:
    context = {"k": 1}
    error = GraphError("m", context=context)
    context["k"] = 2
    assert error.context == {"k": 1}


def test_to_dict() -> None:
    error = NodeError("node failed", context={"node": "A", "attempt": 2})
    assert error.to_dict() == {
        "error_type": "NodeError",
        "error_code": "NODE_001",
        "message": "node failed",
        "context": {"node": "A", "attempt": 2},
    }


def test_repr_names_class_message_and_code() -> None:
    assert (
        repr(StaleStateError("old")) == "StaleStateError('old', error_code='STORAGE_CONFLICT_001')"
    )


@pytest.mark.parametrize(
    ("cls", "code"),
    [
        (NodeError, "NODE_001"),
        (NodeTimeoutError, "NODE_TIMEOUT_001"),
        (GraphRecursionError, "RECURSION_001"),
        (StorageError, "STORAGE_000"),
        (TransientStorageError, "STORAGE_TRANSIENT_001"),
        (SerializationError, "STORAGE_SERIALIZATION_001"),
        (SchemaVersionError, "STORAGE_SCHEMA_001"),
        (StaleStateError, "STORAGE_CONFLICT_001"),
        (ResourceNotFoundError, "STORAGE_NOT_FOUND_001"),
        (MetricsError, "METRICS_001"),
    ],
)
def test_default_codes(cls: type[GraphError], code: str) -> None:
    error = cls("m")
    assert error.error_code == code
    assert str(error) == f"[{code}] m"
    assert cls("m", "OVERRIDE_1").error_code == "OVERRIDE_1"


def test_node_timeout_error_is_a_node_error() -> None:
    assert issubclass(NodeTimeoutError, NodeError)
    tool_timeout = NodeTimeoutError("tool ran too long", "NODE_TIMEOUT_002")
    with pytest.raises(NodeError):
        raise tool_timeout
    assert str(tool_timeout) == "[NODE_TIMEOUT_002] tool ran too long"


@pytest.mark.parametrize(
    "cls",
    [
        TransientStorageError,
        SerializationError,
        SchemaVersionError,
        StaleStateError,
        ResourceNotFoundError,
    ],
)
def test_storage_errors_are_storage_errors_and_graph_errors(cls: type[StorageError]) -> None:
    assert issubclass(cls, StorageError)
    assert issubclass(cls, GraphError)
    with pytest.raises(StorageError):
        raise cls("m")


def test_graph_errors_are_exceptions_and_stop_requested_is_separate() -> None:
    for cls in (NodeError, GraphRecursionError, StorageError, MetricsError):
        assert issubclass(cls, GraphError)
    assert issubclass(GraphError, Exception)
    assert issubclass(GraphStopRequested, Exception)
    assert not issubclass(GraphStopRequested, GraphError)


def test_module_exports() -> None:
    assert set(exc.__all__) >= {
        "GraphError",
        "GraphRecursionError",
        "GraphStopRequested",
        "MetricsError",
        "NodeError",
        "NodeTimeoutError",
        "ResourceNotFoundError",
        "SchemaVersionError",
        "SerializationError",
        "StaleStateError",
        "StorageError",
        "TransientStorageError",
    }
