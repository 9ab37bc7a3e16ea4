#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long dgxspark.cluster.node_facts takes on the simulated clusters, against a bare ping.

    tools/bench_node_facts.py [--clusters sim3,sim8] [--rounds N] [--up] [--json FILE]

For each cluster (inventories/<cluster>, which must be running: `make sim-up CLUSTER=...`, or --up),
runs the venv's ansible CLI, each run a fresh process, output to /dev/null, rc checked:
    .venv/bin/ansible all -i inventories/<cluster> -m ping
    .venv/bin/ansible all -i inventories/<cluster> -m dgxspark.cluster.node_facts   (default sections)
one warm-up run of each, then --rounds rounds (default 5) of one ping and one node_facts run, interleaved,
timed with time.perf_counter. Prints the median and min wall time per kind and cluster, and the ratios on
the medians against the targets (the node_facts issue):
  - node_facts within 1.5x of ping on sim3:          node_facts(sim3) / ping(sim3)       <= 1.5
  - node_facts on sim8 within 1.3x of that on sim3:  node_facts(sim8) / node_facts(sim3) <= 1.3

Why ratios, all in one run: this machine is noisy (2 cores, shared with the simulated nodes and whatever
else runs), so absolute times drift from one minute to the next; runs of both kinds close together and
interleaved see the same load, and their ratios hold where the absolute figures do not. SSH
ControlPersist (ansible.cfg: ControlMaster=auto, ControlPersist=600s) keeps one master connection per
node: after the warm-up runs it is warm for both kinds alike, so neither pays the SSH handshake.

Reading the sim8/sim3 figure: the simulated nodes are containers on the same 2 cores as the controller,
so 8 nodes' sshd, Python and module runs compete for them where 8 real Sparks bring their own CPUs. A
bare ping grows from sim3 to sim8 too; "node_facts growth / ping growth" divides that out, and near 1.0
says the module itself scales with the nodes as Ansible's own round trip does.

--up brings a cluster up first (sim/cluster/simctl.py up) when `simctl.py status` says it is not running,
and takes it down at the end only if this script brought it up.
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
ANSIBLE = REPO / ".venv" / "bin" / "ansible"
KINDS = {"ping": "ping", "node_facts": "dgxspark.cluster.node_facts"}
TARGET_FACTS_VS_PING = 1.5  # node_facts(sim3) / ping(sim3)
TARGET_SIM8_VS_SIM3 = 1.3  # node_facts(sim8) / node_facts(sim3)


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)
    if check and proc.returncode != 0:
        sys.stdout.write(proc.stdout[-3000:])
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"bench_node_facts: {' '.join(argv)} failed ({proc.returncode})")
    return proc


def running(cluster: str) -> bool:
    return sh(sys.executable, str(SIMCTL), "status", cluster, check=False).returncode == 0


def run_once(cluster: str, module: str) -> float:
    """One fresh `ansible all -m MODULE` on the cluster; its wall time in seconds."""
    argv = [str(ANSIBLE), "all", "-i", f"inventories/{cluster}", "-m", module]
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(
            f"bench_node_facts: {' '.join(argv)} failed ({proc.returncode}); "
            f"run it by hand for the output (is {cluster} up? make sim-status CLUSTER={cluster})"
        )
    return took


def bench_cluster(cluster: str, rounds: int) -> dict[str, dict]:
    print(f"... {cluster}: warm-up (one run of each), then {rounds} rounds of ping and node_facts", flush=True)
    for module in KINDS.values():
        run_once(cluster, module)
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _round in range(rounds):
        for kind, module in KINDS.items():
            samples[kind].append(run_once(cluster, module))
    figures = {}
    for kind, times in samples.items():
        figures[kind] = {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times}
        print(f"    {cluster} {kind:<10} " + " ".join(f"{t:5.2f}" for t in times), flush=True)
    return figures


def verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio <= target else "MISS"


def report(results: dict[str, dict], rounds: int) -> dict[str, dict]:
    print(f"\nwall time of `ansible all -m ...`, {rounds} runs each (s)")
    print(f"  {'cluster':<8} {'kind':<11} {'median':>7} {'min':>7}")
    for cluster, figures in results.items():
        for kind, row in figures.items():
            print(f"  {cluster:<8} {kind:<11} {row['median_s']:7.2f} {row['min_s']:7.2f}")
    ratios: dict[str, dict] = {}
    for cluster, figures in results.items():
        ratio = figures["node_facts"]["median_s"] / figures["ping"]["median_s"]
        entry = {"ratio": ratio}
        if cluster == "sim3":
            entry.update(target=TARGET_FACTS_VS_PING, verdict=verdict(ratio, TARGET_FACTS_VS_PING))
        ratios[f"node_facts/ping {cluster}"] = entry
    if "sim3" in results and "sim8" in results:
        ratio = results["sim8"]["node_facts"]["median_s"] / results["sim3"]["node_facts"]["median_s"]
        ratios["node_facts sim8/sim3"] = {
            "ratio": ratio,
            "target": TARGET_SIM8_VS_SIM3,
            "verdict": verdict(ratio, TARGET_SIM8_VS_SIM3),
        }
        ping_growth = results["sim8"]["ping"]["median_s"] / results["sim3"]["ping"]["median_s"]
        ratios["ping sim8/sim3"] = {"ratio": ping_growth}
        # What node_facts adds to the growth from 3 to 8 nodes beyond what Ansible and the machine add to
        # any module (a ping grows as well): about 1.0 means the module's own work does not grow.
        ratios["node_facts growth / ping growth"] = {"ratio": ratios["node_facts sim8/sim3"]["ratio"] / ping_growth}
    print("\nratios (medians)")
    print(f"  {'':<32} {'ratio':>6} {'target':>7}")
    for name, entry in ratios.items():
        target = f"<= {entry['target']:.1f}" if "target" in entry else ""
        print(f"  {name:<32} {entry['ratio']:6.2f} {target:>7}  {entry.get('verdict', '')}".rstrip())
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--clusters", default="sim3,sim8", help="comma-separated clusters (default sim3,sim8)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per cluster after the warm-up (default 5)")
    parser.add_argument("--up", action="store_true", help="bring a cluster up first if it is not running")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    clusters = [c.strip() for c in args.clusters.split(",") if c.strip()]
    if not clusters or args.rounds < 1:
        parser.error("need at least one cluster and one round")
    if not ANSIBLE.exists():
        raise SystemExit(f"bench_node_facts: no {ANSIBLE.relative_to(REPO)}: make venv first")
    brought_up: list[str] = []
    results: dict[str, dict] = {}
    try:
        for cluster in clusters:
            if not running(cluster):
                if not args.up:
                    raise SystemExit(
                        f"bench_node_facts: {cluster} is not running: make sim-up CLUSTER={cluster}, or --up"
                    )
                print(f"... {cluster} is not running: simctl.py up {cluster}", flush=True)
                brought_up.append(cluster)
                sh(sys.executable, str(SIMCTL), "up", cluster)
        for cluster in clusters:
            results[cluster] = bench_cluster(cluster, args.rounds)
    finally:
        for cluster in brought_up:
            print(f"... simctl.py down {cluster} (brought up by this script)", flush=True)
            sh(sys.executable, str(SIMCTL), "down", cluster, check=False)
    ratios = report(results, args.rounds)
    if args.json:
        document = {"rounds": args.rounds, "clusters": results, "ratios": ratios}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
