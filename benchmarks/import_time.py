"""How long a fresh process takes to import tenxgraph's entry names, over a process that
imports only asyncio and pydantic, against LangGraph's the same way; and that litellm is not
imported.

Each round runs every command once, in alternating order, as a fresh interpreter (`python -c`),
timing the whole process; the figures are medians over --runs rounds. "Over the floor" is the
command's median minus the floor's median, measured with the same interpreter (LangGraph runs in
its own environment, benchmarks/.envs/langgraph, built by benchmarks/envs.py).

    python benchmarks/import_time.py --runs 21

`--own` adds `python -X importtime`'s self time of tenxgraph's own modules, largest first.
`--baseline DIR` times another tenxgraph (DIR is its `src`, say an older revision's from
`git archive`) in the same rounds, so a change is measured against the same load:

    git archive 562e998 src | tar -x -C /tmp/old
    python benchmarks/import_time.py --runs 31 --baseline /tmp/old/src
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
LANGGRAPH_PYTHON = HERE / ".envs" / "langgraph" / "bin" / "python"

FLOOR = "import asyncio, pydantic"
FLOOR_MODEL = "import asyncio; from pydantic import BaseModel"
TENXGRAPH = (
    "import sys, tenxgraph; from tenxgraph import StateGraph, AgentState, Message\n"
    "assert 'litellm' not in sys.modules, 'litellm was imported'"
)
LANGGRAPH = "from langgraph.graph import StateGraph, MessagesState"


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(python: str, code: str, path: str | None = None) -> float:
    env = ENV if path is None else {**ENV, "PYTHONPATH": path}
    start = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, env=env)
    return (time.perf_counter() - start) * 1000


def own_modules(limit: int = 25) -> list[tuple[int, str]]:
    """tenxgraph's modules by their own import time (us), from one `-X importtime` run."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", TENXGRAPH],
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, _, name = (part.strip() for part in line[12:].split("|"))
            if name.startswith("tenxgraph"):
                rows.append((int(own), name))
    return sorted(rows, reverse=True)[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--own", action="store_true", help="list tenxgraph's slowest modules")
    parser.add_argument("--baseline", help="another tenxgraph's src directory, timed alongside")
    args = parser.parse_args()
    commands: dict[str, tuple[str, ...]] = {
        "floor": (sys.executable, FLOOR),
        "floor_model": (sys.executable, FLOOR_MODEL),
        "tenxgraph": (sys.executable, TENXGRAPH),
    }
    if LANGGRAPH_PYTHON.exists():
        commands["lg_floor"] = (str(LANGGRAPH_PYTHON), FLOOR)
        commands["langgraph"] = (str(LANGGRAPH_PYTHON), LANGGRAPH)
    if args.baseline:
        compileall.compile_dir(args.baseline, quiet=1)
        commands["baseline"] = (sys.executable, TENXGRAPH, str(Path(args.baseline).resolve()))
    # as installed: bytecode compiled (an editable checkout may have none, or stale)
    import tenxgraph

    compileall.compile_dir(str(Path(tenxgraph.__file__).parent), quiet=1)
    for command in commands.values():  # warm-up: caches, and any bytecode still missing
        timed(*command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for i in range(args.runs):
        for name in names if i % 2 == 0 else reversed(names):  # alternate the order
            times[name].append(timed(*commands[name]))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:<12} median {value:6.1f} ms   ({commands[name][1].splitlines()[0]})")
    ours = median["tenxgraph"] - median["floor"]
    print(f"tenxgraph over the floor (asyncio, pydantic):           {ours:6.1f} ms")
    print(
        "tenxgraph over the floor (asyncio, pydantic.BaseModel): "
        f"{median['tenxgraph'] - median['floor_model']:6.1f} ms"
    )
    if "baseline" in median:
        theirs = median["baseline"] - median["floor"]
        print(f"baseline over the floor (asyncio, pydantic):            {theirs:6.1f} ms")
        print(f"tenxgraph minus baseline:                               {ours - theirs:+6.1f} ms")
    if "langgraph" in median:
        theirs = median["langgraph"] - median["lg_floor"]
        print(f"langgraph over its floor (asyncio, pydantic):           {theirs:6.1f} ms")
        print(f"ratio langgraph / tenxgraph: {theirs / ours:.2f}x")
    print("litellm imported: False (the tenxgraph command asserts it)")
    if args.own:
        for own, name in own_modules():
            print(f"  {own / 1000:6.1f} ms  {name}")


if __name__ == "__main__":
    main()
