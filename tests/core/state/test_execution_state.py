"""ExecutionState (alias ExecMeta): enums, defaults, helpers, from_dict."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tenxgraph.core.state import ExecMeta, ExecutionState, ExecutionStatus, StopRequestStatus
from tenxgraph.core.state import execution_state as execution_state_module


def test_exec_meta_is_execution_state() -> None:
    assert ExecMeta is ExecutionState
    assert execution_state_module.StopRequestStatus is StopRequestStatus


def test_execution_status_values() -> None:
    assert [s.value for s in ExecutionStatus] == [
        "running",
        "interrupted_before",
        "interrupted_after",
        "completed",
        "error",
    ]
    assert ExecutionStatus.RUNNING == "running"


def test_stop_request_status_values() -> None:
    assert [s.value for s in StopRequestStatus] == ["none", "stop_requested", "stopped"]


def test_current_node_is_required() -> None:
    with pytest.raises(ValidationError) as info:
        ExecutionState()  # type: ignore[call-arg]
    assert info.value.errors()[0]["loc"] == ("current_node",)


def test_defaults() -> None:
    meta = ExecutionState(current_node="n")
    assert meta.step == 0
    assert meta.status is ExecutionStatus.RUNNING
    assert meta.interrupted_node is None
    assert meta.interrupt_reason is None
    assert meta.interrupt_data is None
    assert meta.thread_id is None
    assert meta.stop_current_execution is StopRequestStatus.NONE
    assert meta.internal_data == {}
    assert ExecutionState(current_node="other").internal_data is not meta.internal_data


def test_is_running() -> None:
    meta = ExecutionState(current_node="n")
    assert meta.is_running() is True
    meta.complete()
    assert meta.is_running() is False


@pytest.mark.parametrize(
    "status", [ExecutionStatus.INTERRUPTED_BEFORE, ExecutionStatus.INTERRUPTED_AFTER]
)
def test_is_interrupted_for_both_interrupted_statuses(status: ExecutionStatus) -> None:
    meta = ExecutionState(current_node="n", status=status)
    assert meta.is_interrupted() is True
    assert meta.is_running() is False


@pytest.mark.parametrize(
    "status", [ExecutionStatus.RUNNING, ExecutionStatus.COMPLETED, ExecutionStatus.ERROR]
)
def test_is_interrupted_is_false_otherwise(status: ExecutionStatus) -> None:
    assert ExecutionState(current_node="n", status=status).is_interrupted() is False


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        (StopRequestStatus.NONE, False),
        (StopRequestStatus.STOP_REQUESTED, True),
        (StopRequestStatus.STOPPED, False),
    ],
)
def test_is_stopped_requested(stop: StopRequestStatus, expected: bool) -> None:
    meta = ExecutionState(current_node="n", stop_current_execution=stop)
    assert meta.is_stopped_requested() is expected


def test_advance_step_and_set_current_node() -> None:
    meta = ExecutionState(current_node="a")
    meta.advance_step()
    meta.advance_step()
    meta.set_current_node("b")
    assert (meta.step, meta.current_node) == (2, "b")


def test_complete() -> None:
    meta = ExecutionState(current_node="a")
    meta.complete()
    assert meta.status == ExecutionStatus.COMPLETED


def test_error_records_status_and_message() -> None:
    meta = ExecutionState(current_node="a", internal_data={"kept": 1})
    meta.error("it broke")
    assert meta.status == ExecutionStatus.ERROR
    assert meta.internal_data == {"kept": 1, "error": "it broke"}


@pytest.mark.parametrize(
    "status", [ExecutionStatus.INTERRUPTED_BEFORE, ExecutionStatus.INTERRUPTED_AFTER]
)
def test_set_interrupt_and_clear_interrupt(status: ExecutionStatus) -> None:
    meta = ExecutionState(current_node="a")
    meta.set_interrupt("approve", "needs approval", status, {"amount": 10})
    assert meta.status == status
    assert meta.is_interrupted()
    assert (meta.interrupted_node, meta.interrupt_reason) == ("approve", "needs approval")
    assert meta.interrupt_data == {"amount": 10}
    meta.clear_interrupt()
    assert meta.status == ExecutionStatus.RUNNING
    assert (meta.interrupted_node, meta.interrupt_reason, meta.interrupt_data) == (None, None, None)
    assert not meta.is_interrupted()


def test_set_interrupt_defaults_to_interrupted_before_without_data() -> None:
    meta = ExecutionState(current_node="a")
    meta.set_interrupt("n", "why")
    assert meta.status == ExecutionStatus.INTERRUPTED_BEFORE
    assert meta.interrupt_data is None


@pytest.mark.parametrize(
    "status", [ExecutionStatus.RUNNING, ExecutionStatus.COMPLETED, ExecutionStatus.ERROR]
)
def test_set_interrupt_with_a_non_interrupt_status_raises(status: ExecutionStatus) -> None:
    meta = ExecutionState(current_node="a")
    with pytest.raises(ValueError, match="interrupted status"):
        meta.set_interrupt("n", "why", status)
    assert meta.status == ExecutionStatus.RUNNING
    assert meta.interrupted_node is None


def test_from_dict_accepts_the_old_internal_data_spelling() -> None:
    meta = ExecutionState.from_dict(
        {"current_node": "n", "step": 3, "status": "completed", "_internal_data": {"k": "v"}}
    )
    assert meta.internal_data == {"k": "v"}
    assert meta.step == 3
    assert meta.status == ExecutionStatus.COMPLETED


def test_from_dict_accepts_internal_data_and_does_not_modify_its_input() -> None:
    data = {"current_node": "n", "internal_data": {"a": 1}}
    assert ExecutionState.from_dict(data).internal_data == {"a": 1}
    legacy = {"current_node": "n", "_internal_data": {"b": 2}}
    ExecutionState.from_dict(legacy)
    assert legacy == {"current_node": "n", "_internal_data": {"b": 2}}


def test_from_dict_round_trips_model_dump() -> None:
    meta = ExecutionState(current_node="n", step=4, thread_id="t")
    meta.set_interrupt("n", "r", ExecutionStatus.INTERRUPTED_AFTER, {"x": [1]})
    assert ExecutionState.from_dict(meta.model_dump()) == meta
