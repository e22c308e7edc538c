"""Constants and enums of tenxgraph.utils."""

from __future__ import annotations

import tenxgraph.utils as utils
from tenxgraph.utils import ResponseGranularity
from tenxgraph.utils import constants as constants_module
from tenxgraph.utils.constants import (
    DEFAULT_ANONYMOUS_USER_ID,
    DEFAULT_NODE_TIMEOUT_SECONDS,
    DEFAULT_TOOL_TIMEOUT_SECONDS,
    END,
    START,
    ExecutionState,
)


def test_start_and_end() -> None:
    assert START == "__start__"
    assert END == "__end__"


def test_default_timeouts() -> None:
    assert DEFAULT_NODE_TIMEOUT_SECONDS == 900.0
    assert DEFAULT_TOOL_TIMEOUT_SECONDS == 300.0
    assert isinstance(DEFAULT_NODE_TIMEOUT_SECONDS, float)
    assert isinstance(DEFAULT_TOOL_TIMEOUT_SECONDS, float)


def test_default_anonymous_user_id() -> None:
    assert DEFAULT_ANONYMOUS_USER_ID == "anonymous"


def test_response_granularity_is_importable_from_utils_with_its_values() -> None:
    assert ResponseGranularity is constants_module.ResponseGranularity
    assert [g.value for g in ResponseGranularity] == ["full", "partial", "low"]
    assert ResponseGranularity("low") is ResponseGranularity.LOW
    assert ResponseGranularity.FULL == "full"


def test_utils_execution_state_is_the_coarse_run_status_enum() -> None:
    assert utils.ExecutionState is ExecutionState
    assert [s.value for s in ExecutionState] == [
        "running",
        "paused",
        "completed",
        "error",
        "interrupted",
        "aborted",
        "idle",
    ]


def test_utils_reexports_the_constants() -> None:
    for name in constants_module.__all__:
        assert name in utils.__all__
        assert getattr(utils, name) is getattr(constants_module, name)
