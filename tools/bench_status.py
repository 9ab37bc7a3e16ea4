#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long playbooks/status.yml takes on sim3 against a bare ping, as a ratio measured in one run (issue 29:
at most 1.5 times a ping).

    tools/bench_status.py [--rounds N] [--up] [--json FILE]

Needs sim3 running and serving (`make sim-up CLUSTER=sim3`, then boot.yml), or --up: it brings sim3 up when
`simctl.py status` says it is not running and boots it when a status says it does not serve, and takes sim3
down at the end only if it brought it up. Every run is a fresh process of the venv's ansible CLI, output
captured, timed with time.perf_counter; one warm-up run of each kind, then --rounds rounds (default 5) of

    .venv/bin/ansible all -i inventories/sim3/hosts.yml -m ansible.builtin.ping
    .venv/bin/ansible-playbook playbooks/status.yml -i inventories/sim3/hosts.yml
    .venv/bin/ansible-playbook playbooks/status.yml -i inventories/sim3/hosts.yml --check
    .venv/bin/ansible-playbook playbooks/status.yml -i inventories/sim3/hosts.yml -e status_format=json

interleaved, so that every kind sees the same load (this machine is noisy: ratios of runs close together hold
where absolute times drift; tools/bench_boot.py says more). The ratio is of the medians: status / ping. Every
status run must exit 0 (the cluster serves); one that does not is reported and fails the script.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"
BIN = REPO / ".venv" / "bin"
SIM3 = "inventories/sim3/hosts.yml"
TARGET = 1.5  # status.yml (sim3) / ping (sim3)
KINDS = {
    "ping": ("ansible", "all", "-i", SIM3, "-m", "ansible.builtin.ping"),
    "status": ("ansible-playbook", "playbooks/status.yml", "-i", SIM3),
    "status --check": ("ansible-playbook", "playbooks/status.yml", "-i", SIM3, "--check"),
    "status json": ("ansible-playbook", "playbooks/status.yml", "-i", SIM3, "-e", "status_format=json"),
}


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)


def ansible(kind: str) -> tuple[float, subprocess.CompletedProcess]:
    command, *rest = KINDS[kind]
    start = time.perf_counter()
    proc = run(str(BIN / command), *rest)
    return time.perf_counter() - start, proc


def sim3_running() -> bool:
    return run(sys.executable, str(SIMCTL), "status", "sim3").returncode == 0


def serves() -> bool:
    return ansible("status")[1].returncode == 0


def measure(rounds: int) -> dict[str, dict]:
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    failures: list[str] = []
    for kind in KINDS:  # warm-up: SSH masters (ControlPersist), the collection's plugins read once
        ansible(kind)
    for _round in range(rounds):
        for kind in KINDS:
            seconds, proc = ansible(kind)
            times[kind].append(seconds)
            if proc.returncode != 0:
                failures.append(f"{kind}: rc {proc.returncode}: {proc.stdout[-1500:]}{proc.stderr[-500:]}")
    return {
        kind: {"median_s": round(statistics.median(found), 3), "runs_s": [round(t, 3) for t in found]}
        for kind, found in times.items()
    } | {"failures": failures}  # type: ignore[operator]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--up", action="store_true", help="bring sim3 up (and boot it) when it is not")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    brought_up = False
    if not sim3_running():
        if not args.up:
            print("sim3 is not running: make sim-up CLUSTER=sim3 (or --up)", file=sys.stderr)
            return 2
        run(sys.executable, str(SIMCTL), "up", "sim3").check_returncode()
        brought_up = True
    try:
        if not serves():
            if not args.up:
                print("sim3 does not serve (status.yml fails): boot it first (or --up)", file=sys.stderr)
                return 2
            booted = run(str(BIN / "ansible-playbook"), "playbooks/boot.yml", "-i", SIM3)
            if booted.returncode != 0:
                print(booted.stdout[-3000:], file=sys.stderr)
                return 2
        figures = measure(args.rounds)
    finally:
        if brought_up:
            run(sys.executable, str(SIMCTL), "down", "sim3")
    failures = figures.pop("failures")
    ping = figures["ping"]["median_s"]
    ratios = {kind: round(figures[kind]["median_s"] / ping, 2) for kind in KINDS if kind != "ping"}
    verdict = "PASS" if ratios["status"] <= TARGET else "MISS"
    for kind, found in figures.items():
        print(f"{kind:<16} median {found['median_s']:.2f} s  runs {', '.join(f'{t:.2f}' for t in found['runs_s'])}")
    for kind, ratio in ratios.items():
        print(
            f"{kind + ' / ping':<23} {ratio:.2f}" + (f"  (target <= {TARGET}: {verdict})" if kind == "status" else "")
        )
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"figures": figures, "ratios": ratios, "target": TARGET, "rounds": args.rounds, "failures": failures},
                indent=2,
            )
            + "\n"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
