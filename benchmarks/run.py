"""Run a benchmark scenario for tenxgraph and its peers in one go and print ratios.

    python benchmarks/run.py messages [--rounds 5]

Each scenario is a module in benchmarks/scenarios/ that, run as a script with
`--framework NAME`, prints one JSON object of measurements (lower is better). Frameworks are run
in alternating fresh processes for `--rounds` rounds and the median of each figure is reported,
with the ratio peer / tenxgraph (so 3.0x means tenxgraph is three times faster; for figures
where higher is better, named `*_per_s`, the ratio is tenxgraph / peer, read the same way).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from envs import PEERS, ensure

HERE = Path(__file__).resolve().parent


def run_once(python: str, scenario: Path, framework: str, extra: list[str]) -> dict[str, float]:
    proc = subprocess.run(
        [python, str(scenario), "--framework", framework, *extra],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{framework} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peer names")
    args, extra = parser.parse_known_args()
    scenario = HERE / "scenarios" / f"{args.scenario}.py"
    pythons = {"tenxgraph": sys.executable}
    for peer in filter(None, args.peers.split(",")):
        python = ensure(peer)
        if python is not None:
            pythons[peer] = str(python)
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in pythons}
    for _ in range(args.rounds):
        for name, python in pythons.items():
            samples[name].append(run_once(python, scenario, name, extra))
    medians = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in samples.items()
    }
    ours = medians["tenxgraph"]
    names = list(medians)
    print(f"scenario {args.scenario}: median of {args.rounds} rounds (ratio >1: tenxgraph ahead)")
    header = f"{'measure':<34}" + "".join(f"{n:>14}" for n in names)
    header += "".join(f"{n + '/ours':>18}" for n in names[1:])
    print(header)
    for key in ours:
        row = f"{key:<34}" + "".join(f"{medians[n].get(key, float('nan')):>14.3f}" for n in names)
        for n in names[1:]:
            theirs = medians[n].get(key, float("nan"))
            if key.endswith("_per_s"):
                ratio = ours[key] / theirs if theirs else float("nan")
            else:
                ratio = theirs / ours[key] if ours[key] else float("nan")
            row += f"{ratio:>17.1f}x"
        print(row)


if __name__ == "__main__":
    main()
