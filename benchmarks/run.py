"""Run a benchmark scenario for tenxgraph and its peers in one go and print ratios.

    python benchmarks/run.py messages [--rounds 5]

Each scenario is a module in benchmarks/scenarios/ that, run as a script with
`--framework NAME`, prints one JSON object of measurements (lower is better). Frameworks are run
in alternating fresh processes for `--rounds` rounds and the median of each figure is reported,
with the ratio peer / tenxgraph (so 3.0x means tenxgraph is three times faster; for figures
where higher is better, named `*_per_s`, the ratio is tenxgraph / peer, read the same way).

    python benchmarks/run.py s6_models --baselines litellm [--rounds 5]

`--baselines` names frameworks that run in this same interpreter (no peer env) and that
tenxgraph is built on, so they are a floor rather than a competitor: for them the table shows
what tenxgraph adds, as a difference and in percent. Without `--peers`, `--baselines` runs no
peers.
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
    parser.add_argument("--peers", default=None, help="comma-separated peer names")
    parser.add_argument(
        "--baselines",
        default="",
        help="comma-separated frameworks run with this interpreter and shown as the floor "
        "tenxgraph adds to (e.g. litellm)",
    )
    args, extra = parser.parse_known_args()
    scenario = HERE / "scenarios" / f"{args.scenario}.py"
    baselines = [b for b in args.baselines.split(",") if b]
    if args.peers is None:
        args.peers = "" if baselines else ",".join(PEERS)
    pythons = {"tenxgraph": sys.executable}
    for peer in filter(None, args.peers.split(",")):
        python = ensure(peer)
        if python is not None:
            pythons[peer] = str(python)
    peers = [name for name in pythons if name != "tenxgraph"]
    for baseline in baselines:
        pythons[baseline] = sys.executable
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in pythons}
    for _ in range(args.rounds):
        for name, python in pythons.items():
            samples[name].append(run_once(python, scenario, name, extra))
    medians = {
        name: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        for name, rows in samples.items()
    }
    ours = medians["tenxgraph"]
    if peers or not baselines:
        print_peers(args.scenario, args.rounds, medians, ["tenxgraph", *peers])
    for baseline in baselines:
        print_baseline(args.scenario, args.rounds, ours, baseline, medians[baseline])


def print_peers(
    scenario: str, rounds: int, medians: dict[str, dict[str, float]], names: list[str]
) -> None:
    ours = medians["tenxgraph"]
    print(f"scenario {scenario}: median of {rounds} rounds (ratio >1: tenxgraph ahead)")
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


def print_baseline(
    scenario: str, rounds: int, ours: dict[str, float], name: str, floor: dict[str, float]
) -> None:
    """What tenxgraph adds on top of `name` (lower is better), per figure and in percent."""
    print(f"scenario {scenario}: median of {rounds} rounds; tenxgraph on top of {name}")
    print(f"{'measure':<34}{name:>14}{'tenxgraph':>14}{'added':>14}{'added %':>12}")
    added: dict[str, tuple[float, float]] = {}
    for key in ours:
        base = floor.get(key, float("nan"))
        diff = ours[key] - base
        percent = diff / base * 100 if base else float("nan")
        added[key] = (diff, percent)
        print(f"{key:<34}{base:>14.3f}{ours[key]:>14.3f}{diff:>+14.3f}{percent:>+11.1f}%")
    if {"stream_cpu_us_per_chunk", "paired_graph_added_cpu_ms"} <= added.keys():
        # the paired figures (both sides in one process, back to back) for calls: comparing
        # two processes swings by milliseconds on a noisy machine
        nan = float("nan")
        print(
            "tenxgraph's own CPU, as a share of the bare litellm call's: "
            f"{ours.get('own_step_pct_of_bare', nan):.1f}% per Agent step in a loop, "
            f"{ours.get('own_graph_pct_of_bare', nan):.1f}% per one-node graph run, "
            f"{ours.get('own_client_pct_of_bare', nan):.1f}% for the model client alone; "
            f"per streamed chunk {ours.get('own_stream_pct_of_bare', nan):.1f}% of consuming "
            "the bare litellm stream (paired difference of process CPU "
            f"{ours.get('paired_stream_added_pct', nan):+.1f}%) "
            "[goal: at most 4% per step, +3% per chunk]"
        )
        print(
            f"tenxgraph adds {ours.get('paired_stream_added_pct', float('nan')):+.1f}% CPU per "
            f"streamed chunk (two processes: {added['stream_cpu_us_per_chunk'][1]:+.1f}%); "
            "over one bare litellm call "
            f"({ours.get('paired_bare_litellm_cpu_ms', float('nan')):.2f} ms CPU) its own "
            f"code takes {ours.get('own_step_cpu_ms', float('nan')):.2f} ms per Agent step "
            f"in a loop (paired difference {ours['paired_step_added_cpu_ms']:+.2f} ms), "
            f"{ours.get('own_graph_cpu_ms', float('nan')):.2f} ms for a one-node graph run "
            f"({ours['paired_graph_added_cpu_ms']:+.2f}), "
            f"{ours.get('own_call_cpu_ms', float('nan')):.2f} ms for a run on a new in-memory "
            f"thread ({ours['paired_call_added_cpu_ms']:+.2f}) "
            "[budget: 10% per chunk, 0.5 ms per Agent step]"
        )


if __name__ == "__main__":
    main()
