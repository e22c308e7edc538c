"""Create the peer environments the benchmarks compare against (idempotent).

    python benchmarks/envs.py

- benchmarks/.envs/langgraph: Python 3.11 venv with LangGraph (and langchain-core) and its
  SQLite and PostgreSQL checkpoint savers (psycopg, aiosqlite).
- benchmarks/.envs/10xgraph: Python 3.12 venv with the 10xgraph package (it needs 3.12).

tenxgraph itself is measured with the interpreter that runs `benchmarks/run.py` (install the
project into it first). An environment that cannot be built is reported and skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ENVS = Path(__file__).resolve().parent / ".envs"

PEERS: dict[str, dict[str, object]] = {
    "langgraph": {
        "python": ["python3.11", "python3"],
        "packages": [
            "langgraph>=1.0",
            # s4_storage: LangGraph's SQLite and PostgreSQL savers
            "langgraph-checkpoint-sqlite",
            "langgraph-checkpoint-postgres",
            "psycopg[binary]",
            "psycopg-pool",
            "aiosqlite",
        ],
    },
    "10xgraph": {"python": ["python3.12"], "packages": ["10xgraph==0.10.3"]},
}


def find_python(names: list[str]) -> str | None:
    """A Python executable by name, looking through pyenv's versions as well as PATH."""
    for name in names:
        found = shutil.which(name)
        if found and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0:
            return found
        pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        version = name.removeprefix("python")
        for candidate in sorted(pyenv_root.glob(f"versions/{version}*/bin/{name}"), reverse=True):
            return str(candidate)
    return None


def peer_python(peer: str) -> Path:
    return ENVS / peer / "bin" / "python"


def ensure(peer: str) -> Path | None:
    """Build the venv of `peer` if missing; return its python, or None if it cannot be built."""
    python = peer_python(peer)
    stamp = ENVS / peer / ".ready"
    if stamp.exists():
        return python
    spec = PEERS[peer]
    base = find_python(spec["python"])  # type: ignore[arg-type]
    if base is None:
        print(f"[envs] {peer}: no {spec['python']} interpreter found; skipped", file=sys.stderr)
        return None
    print(f"[envs] building {peer} with {base} ...", file=sys.stderr)
    subprocess.run([base, "-m", "venv", str(ENVS / peer)], check=True)
    result = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *spec["packages"]],  # type: ignore[misc]
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        print(f"[envs] {peer}: pip failed:\n{result.stderr[-2000:]}", file=sys.stderr)
        return None
    stamp.write_text("ok\n")
    return python


def main() -> None:
    for peer in PEERS:
        python = ensure(peer)
        print(f"{peer}: {python or 'unavailable'}")


if __name__ == "__main__":
    main()
