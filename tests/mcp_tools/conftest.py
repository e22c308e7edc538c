"""A real MCP server (tests/mcp_tools/_server.py, written with the SDK) over stdio and HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

SERVER = Path(__file__).with_name("_server.py")


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """The server over streamable HTTP on 127.0.0.1. It prints its port once it listens
    (connections made then wait in the socket's queue): reading that line is the readiness."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), f"the server did not start (said {line!r})"
        yield f"http://127.0.0.1:{int(line)}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
