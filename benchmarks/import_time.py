"""How long `import tenxgraph` (and its state model) takes, and whether it pulls in litellm.

Runs `python -X importtime` in fresh interpreters and sums the self time of tenxgraph's own
modules (third-party imports such as pydantic are reported apart). Median of --runs.

    python benchmarks/import_time.py --runs 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

TARGETS = ("tenxgraph", "tenxgraph.core.state")


def measure(target: str) -> tuple[float, float, bool]:
    """(own self-time ms, total cumulative ms, litellm imported?) for one fresh import."""
    code = f"import sys, {target}; print('litellm' in sys.modules)"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    own = total = 0.0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[12:].split("|"))
        if name.startswith("tenxgraph"):
            own += int(self_us)
        if not line[12:].split("|")[2].startswith("  "):  # a top-level import
            total += int(cumulative_us)
    return own / 1000, total / 1000, proc.stdout.strip() == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for target in TARGETS:
        rows = [measure(target) for _ in range(args.runs)]
        own = statistics.median(r[0] for r in rows)
        total = statistics.median(r[1] for r in rows)
        litellm = any(r[2] for r in rows)
        print(
            f"import {target:<22} own {own:6.1f} ms   with dependencies {total:6.1f} ms   "
            f"litellm imported: {litellm}"
        )


if __name__ == "__main__":
    main()
