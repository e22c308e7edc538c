"""A real MCP server (tests/mcp_tools/_server.py, written with the SDK) over stdio and HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

try:  # without the `mcp` extra these tests are not collected (CI installs it with `dev`)
    import mcp  # noqa: F401
except ImportError:
    collect_ignore_glob = ["test_*.py"]

SERVER = Path(__file__).with_name("_server.py")


def start_http(port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """The server over streamable HTTP on 127.0.0.1 (`port`, or one the system picks). It
    prints its port once it listens (connections made then wait in the socket's queue):
    reading that line is the readiness."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        stop(proc)
        raise AssertionError(f"the server did not start (said {line!r})")
    return proc, int(line)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc, port = start_http()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)
