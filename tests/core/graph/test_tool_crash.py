"""A tool's side effect happens once even when the process dies right after the tool ran."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("_tool_crash_worker.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


def run_worker(db: Path, counter: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), str(db), str(counter), mode],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_tool_that_ran_before_a_sigkill_is_replayed_not_run_again(tmp_path: Path) -> None:
    db, counter = tmp_path / "threads.db", tmp_path / "charges.txt"

    crashed = run_worker(db, counter, "crash")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert counter.read_text() == "charged 5\n"  # the tool ran, then the process died

    resumed = run_worker(db, counter, "resume")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "done: charged 5"  # the run finished with the result
    assert counter.read_text() == "charged 5\n"  # exactly once
