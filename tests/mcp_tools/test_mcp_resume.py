"""A run with an MCP tool that needs approval pauses in one process and is resumed in another:
the tool then runs on the second process's own session (sessions are not part of a thread)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tenxgraph.core.graph.tool_approval import APPROVAL_REASON

ROOT = Path(__file__).resolve().parents[2]


def worker(step: str, db: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.mcp_tools._resume_worker", step, str(db), "mcp-thread"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_an_approval_pause_before_an_mcp_call_is_resumed_in_another_process(
    tmp_path: Path,
) -> None:
    db = tmp_path / "threads.db"
    asked = worker("ask", db)
    assert asked == {
        "interrupt": APPROVAL_REASON,
        "asked": ["demo__echo"],
        "outputs": [],  # not run before the approval
        "last": "",
    }
    done = worker("resume", db)
    assert done["interrupt"] is None
    assert done["outputs"] == ["approved approved"]
    assert done["last"] == "done: approved approved"
