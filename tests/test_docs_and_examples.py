"""The README's code and every example script must keep working."""

from __future__ import annotations

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
    assert lines[0].startswith("python3 -m pip install . && python3 examples/")
    assert lines[1] == 'python3 -m pip install -e ".[dev]" && python3 -m pytest'
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 '^python3 -m pip install -e \".\\[dev\\]\"' README.md" in ci
    main_example = ROOT / lines[0].split("python3 ", 2)[2]
    assert main_example.is_file()


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
