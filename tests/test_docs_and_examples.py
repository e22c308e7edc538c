"""The README's code and every example script must keep working."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def test_readme_opens_with_the_two_commands() -> None:
    first_block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert first_block is not None
    assert README.index(first_block.group(0)) < README.index("\n## ")
    lines = first_block.group(1).strip().splitlines()
    assert len(lines) == 2
    assert lines[0] == "python3 -m pip install . && tenxgraph demo"
    assert lines[1] == 'python3 -m pip install -e ".[dev]" && python3 -m pytest'
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 '^python3 -m pip install -e \".\\[dev\\]\"' README.md" in ci
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'tenxgraph = "tenxgraph.cli:main"' in pyproject  # the command the first line runs


@pytest.mark.parametrize(
    "block", re.findall(r"```python\n(.*?)```", README, re.S), ids=lambda b: b.splitlines()[0]
)
def test_readme_python_block_runs(block: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a real module, as a user's script would be, so pydantic can resolve its annotations
    module = types.ModuleType("readme_block")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(block, "README.md", "exec", dont_inherit=True), module.__dict__)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_offline(script: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example should show what it did"


def test_readme_command_line_block_runs(tmp_path: Path) -> None:
    """The `tenxgraph` commands the README shows, in order, offline, on a scratch database."""
    section = README[README.index("## The `tenxgraph` command") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    env = {**os.environ, "HOME": str(tmp_path), "TENXGRAPH_DB": str(tmp_path / "threads.db")}
    env.pop("OPENAI_API_KEY", None)
    command = f'"{sys.executable}" -m tenxgraph.cli'
    for line in block.group(1).strip().splitlines():
        shell = re.sub(r"(^|\| )tenxgraph ", rf"\g<1>{command} ", line)
        done = subprocess.run(
            ["bash", "-c", shell], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
        )
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        assert done.stdout.strip(), f"{line} printed nothing"
