"""`tenxgraph serve`: a real process on a SQLite file, the graph served under its name, bearer
tokens from the command line, a clean stop on SIGTERM; and its usage errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path

import pytest

from tenxgraph.cli import main

pytest.importorskip("uvicorn")
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, token: str | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def _wait_ok(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a process starting: its health endpoint, polled
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        with suppress(OSError):
            if _get(f"{url}/ok")[0] == 200:
                return
        time.sleep(0.05)
    raise AssertionError("tenxgraph serve did not become ready")


def test_serve_runs_the_graph_under_its_name_behind_tokens(tmp_path: Path) -> None:
    port = _free_port()
    command = [
        sys.executable, "-m", "tenxgraph.cli", "serve", "examples/weather_app.py:app",
        "--port", str(port), "--db", str(tmp_path / "server.db"), "--auth-token", "s3cret=ada",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ok(url, process)
        assert _get(f"{url}/assistants/agent")[0] == 401
        status, assistant = _get(f"{url}/assistants/agent", "s3cret")
        assert status == 200
        assert isinstance(assistant, dict)
        assert assistant["graph_id"] == "agent"  # ReactAgent names its graph
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    # uvicorn stops gracefully, then ends with the signal it caught
    assert process.returncode in (0, -signal.SIGTERM), err.decode()
    assert "Traceback" not in err.decode()
    assert (tmp_path / "server.db").exists()


def test_serve_refuses_a_token_without_its_user(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["serve", "examples/weather_app.py:app", "--auth-token", "lonely"])
    assert code == 2
    assert "--auth-token takes TOKEN=USER" in capsys.readouterr().err


def test_serve_warns_when_anyone_can_reach_it_without_auth(tmp_path: Path) -> None:
    port = _free_port()
    command = [
        sys.executable, "-m", "tenxgraph.cli", "serve", "examples/weather_app.py:app",
        "--host", "0.0.0.0", "--port", str(port), "--db", str(tmp_path / "server.db"),
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        _wait_ok(f"http://127.0.0.1:{port}", process)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert "no --auth-token and not on loopback" in err.decode()
