#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long playbooks/boot.yml takes on the simulated clusters: --check against a bare ping, sim8 against
sim3, and a real boot beyond the engines' own load time.

    tools/bench_boot.py [--rounds N] [--boots N] [--up] [--no-boot] [--rollbacks N] [--json FILE]

Needs sim3 and sim8 running with the engine image (`make sim-up CLUSTER=...`, or --up). Every run is a
fresh process of the venv's ansible CLI, output captured, rc checked, timed with time.perf_counter.

1. --check: one warm-up run of each kind, then --rounds rounds (default 5), each of
       .venv/bin/ansible all -i inventories/sim3/hosts.yml -m ping
       .venv/bin/ansible-playbook playbooks/boot.yml -i inventories/sim3/hosts.yml --check
       .venv/bin/ansible-playbook playbooks/boot.yml -i inventories/sim8/hosts.yml --check
       .venv/bin/ansible-playbook playbooks/preflight.yml -i inventories/sim3/hosts.yml
       .venv/bin/ansible all -i inventories/sim8/hosts.yml -m ping
   interleaved, so that every kind sees the same load. Targets, on the medians (the boot issue):
     - boot.yml --check on sim3 within 2x of a ping on sim3:   check(sim3) / ping(sim3)  <= 2
     - boot.yml --check on sim8 within 1.3x of that on sim3:   check(sim8) / check(sim3) <= 1.3
   and, to read them: preflight.yml (the boot's steps 1-2 alone, read-only) against the same ping; a ping's
   own growth from sim3 to sim8; the check's growth divided by the ping's.
2. A real boot on sim3 (sim8 is taken down first when this script brought it up: the engines of one
   cluster at a time on this machine). The first boot of the run (on fresh nodes it also configures the
   fabric and installs the guard) is reported on its own; then --boots boots (default 3), each after the
   rank containers were removed in the nodes (the fabric and the guard are then already as planned), with
   ansible.posix.profile_tasks. For each: the boot's wall time, the engines' own start (the earliest rank
   container's start to the head's "Application startup complete.", both from Docker: the rendezvous,
   SIM_ENGINE_LOAD_SECONDS of load, the agreement), the load itself (the head's "model loaded in X s"
   line), the overhead = wall time - the engines' own start (target <= 10 s), the boot's own phase times
   (its report's "boot phases:" line), and stop.yml's wall time after it.
   The issue's third target, the check's growth from sim3 to sim8 divided by a ping's: <= 1.1.

Why ratios, all in one run: this machine is noisy (2 cores, shared with the simulated nodes), so absolute
times drift; runs close together and interleaved see the same load, and their ratios hold where the
absolute figures do not. SSH ControlPersist keeps one master connection per node, warm after the warm-up
for every kind alike. The simulated nodes share the controller's 2 cores: 8 nodes' sshd and Python compete
for them where real Sparks bring their own CPUs (see tools/bench_node_facts.py for that reading).

3. With --rollbacks N: N times, the promoted release booted, a candidate booted over it (an environment
   variable more), then rollback.yml timed back to the promoted release: its wall time, the engines' own start
   (as above) and the time beyond it (the releases issue's figure).

--up brings a cluster up (sim/cluster/simctl.py up) when `simctl.py status` says it is not running, and
takes it down at the end only if this script brought it up.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"
BIN = REPO / ".venv" / "bin"
CONTAINER = "vllm_dsv41"
TARGET_CHECK_VS_PING = 2.0  # boot.yml --check (sim3) / ping (sim3)
TARGET_SIM8_VS_SIM3 = 1.3  # boot.yml --check (sim8) / boot.yml --check (sim3) (the first issue's target)
PROFILE_ENV = {
    "ANSIBLE_CALLBACKS_ENABLED": "ansible.posix.profile_tasks",
    "PROFILE_TASKS_SORT_ORDER": "none",
    "PROFILE_TASKS_TASK_OUTPUT_LIMIT": "all",
    "PROFILE_TASKS_SUMMARY_ONLY": "true",
    "COLUMNS": "200",
}
# The boot's own phases, as its report's last line names them ("boot phases: plan and preflight 3.8 s, ...").
PHASES = ("plan and preflight", "converge", "create", "workers", "head", "wait and smoke", "steady")
PHASE_LINE = re.compile(r"boot phases: (.*?); in all ([\d.]+) s")
TARGET_GROWTH = 1.1  # (check sim8 / check sim3) / (ping sim8 / ping sim3)
TARGET_OVERHEAD_S = 10.0  # a real boot's wall time beyond the engines' own start, on a prepared sim3
RECAP_LINE = re.compile(r"^(.*?) ?-+ (\d+\.\d+)s$")


def sh(*argv: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        argv, capture_output=True, text=True, check=False, cwd=REPO, env={**os.environ, **(env or {})}
    )
    if check and proc.returncode != 0:
        sys.stdout.write(proc.stdout[-4000:])
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"bench_boot: {' '.join(argv)} failed ({proc.returncode})")
    return proc


def running(cluster: str) -> bool:
    return sh(sys.executable, str(SIMCTL), "status", cluster, check=False).returncode == 0


def nodes(cluster: str) -> list[str]:
    described = json.loads(sh(sys.executable, str(SIMCTL), "describe", cluster).stdout)
    return [node["host"] for node in described["nodes"]]


def timed(*argv: str, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = sh(*argv, env=env)
    return time.perf_counter() - start, proc


# The inventories' hosts.yml (their group_vars come along): Ansible then reads no other file of the
# directory as an inventory source (serving-profile.json, a benchmark's output), the same for every kind.
SIM3, SIM8 = "inventories/sim3/hosts.yml", "inventories/sim8/hosts.yml"
KINDS = {
    "ping sim3": ("ansible", "all", "-i", SIM3, "-m", "ansible.builtin.ping"),
    "check sim3": ("ansible-playbook", "playbooks/boot.yml", "-i", SIM3, "--check"),
    "check sim8": ("ansible-playbook", "playbooks/boot.yml", "-i", SIM8, "--check"),
    # for reading the figures above: the boot's steps 1-2 alone, and a ping's own growth to 8 nodes
    "preflight sim3": ("ansible-playbook", "playbooks/preflight.yml", "-i", SIM3),
    "ping sim8": ("ansible", "all", "-i", SIM8, "-m", "ansible.builtin.ping"),
}


def bench_check(rounds: int) -> dict[str, dict]:
    print(f"... warm-up (one run of each), then {rounds} rounds of: {', '.join(KINDS)}", flush=True)
    for argv in KINDS.values():
        timed(str(BIN / argv[0]), *argv[1:])
    samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _round in range(rounds):
        for kind, argv in KINDS.items():
            samples[kind].append(timed(str(BIN / argv[0]), *argv[1:])[0])
    figures = {}
    for kind, times in samples.items():
        figures[kind] = {"median_s": statistics.median(times), "min_s": min(times), "runs_s": times}
        print(f"    {kind:<15} " + " ".join(f"{t:6.2f}" for t in times), flush=True)
    return figures


def docker_time(stamp: str) -> dt.datetime:
    """Docker's RFC 3339 time with nanoseconds, to a datetime (microseconds)."""
    stamp = stamp.strip().replace("Z", "+00:00")
    head, _dot, rest = stamp.partition(".")
    if rest:
        digits = re.match(r"\d+", rest).group(0)
        stamp = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    return dt.datetime.fromisoformat(stamp)


def node(host: str, script: str) -> str:
    return sh("docker", "exec", host, "sh", "-c", script).stdout


def engine_start(hosts: list[str]) -> dict[str, float]:
    """The engines' own start-up, from Docker: earliest rank start to the head's 'Application startup complete.'."""
    starts = [docker_time(node(h, f"docker inspect -f '{{{{.State.StartedAt}}}}' {CONTAINER}")) for h in hosts]
    log = node(hosts[0], f"docker logs -t {CONTAINER} 2>&1")
    ready = loaded = None
    for line in log.splitlines():
        stamp, _space, text = line.partition(" ")
        if "Application startup complete." in text and ready is None:
            ready = docker_time(stamp)
        found = re.search(r"model loaded in ([\d.]+) s", text)
        if found:
            loaded = float(found.group(1))
    if ready is None or loaded is None:
        raise SystemExit(f"bench_boot: the head's log has no start-up/load line:\n{log[-2000:]}")
    head_start = starts[0]
    return {
        "engines_s": (ready - min(starts)).total_seconds(),
        "head_engine_s": (ready - head_start).total_seconds(),
        "load_s": loaded,
    }


def stages(stdout: str) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """The boot's own phase times (its report's last line) and profile_tasks' recap (tasks in the order they ran)."""
    flat = " ".join(stdout.split())
    found = PHASE_LINE.search(flat)
    if found is None:
        raise SystemExit(f"bench_boot: the boot printed no 'boot phases:' line:\n{stdout[-3000:]}")
    sums = dict.fromkeys(PHASES, 0.0)
    # each part is "<name> <seconds> s" (a phase's name may hold a comma)
    for name, seconds in re.findall(r"(?:^|, )([a-z][a-z ,]*?) ([\d.]+) s", found.group(1)):
        sums[name] = float(seconds)
    recap = stdout[stdout.rindex("TASKS RECAP") :]
    tasks = [(m.group(1), float(m.group(2))) for m in map(RECAP_LINE.match, recap.splitlines()) if m]
    return sums, tasks


def remove_ranks(hosts: list[str]) -> None:
    for host in hosts:
        node(host, f"docker rm -f {CONTAINER} >/dev/null 2>&1 || true")


def one_boot(hosts: list[str]) -> dict:
    remove_ranks(hosts)
    took, proc = timed(str(BIN / "ansible-playbook"), "playbooks/boot.yml", "-i", SIM3, env=PROFILE_ENV)
    engine = engine_start(hosts)
    sums, tasks = stages(proc.stdout)
    stop_s, _stop = timed(str(BIN / "ansible-playbook"), "playbooks/stop.yml", "-i", SIM3)
    return {
        "wall_s": took,
        **engine,
        "overhead_s": took - engine["engines_s"],
        "beyond_load_s": took - engine["load_s"],
        "stages_s": sums,
        "tasks": tasks,
        "stop_s": stop_s,
    }


def bench_boot(boots: int) -> dict:
    hosts = nodes("sim3")
    print("... sim3: the first boot of this run (on fresh nodes it also configures the fabric, installs the guard)")
    first = one_boot(hosts)
    print(f"    first boot {first['wall_s']:6.2f} s", flush=True)
    runs = []
    for _i in range(boots):
        runs.append(one_boot(hosts))
        row = runs[-1]
        print(
            f"    boot {row['wall_s']:6.2f} s: engines {row['engines_s']:5.2f} s (load {row['load_s']:.2f} s), "
            + ", ".join(f"{k} {v:.1f}" for k, v in row["stages_s"].items()),
            flush=True,
        )
    return {"first": first, "runs": runs}


def one_rollback(hosts: list[str], folder: Path) -> dict:
    """rollback.yml timed, from a candidate that serves (booted over the promoted release, which served first)
    back to the promoted release: its wall time beyond the engines' own start (the releases issue's figure)."""
    booted, proc = timed(str(BIN / "ansible-playbook"), "playbooks/boot.yml", "-i", SIM3)
    if proc.returncode != 0:
        raise SystemExit(f"bench_boot: the promoted release did not boot:\n{proc.stdout[-3000:]}")
    profile = json.loads((REPO / "inventories" / "sim3" / "serving-profile.json").read_text())
    profile["shapes"][profile["default_shape"]]["environment"] = {"BENCH_BOOT_CANDIDATE": "1"}
    candidate = folder / "bench-boot-candidate.json"
    candidate.write_text(json.dumps(profile, indent=2))
    asked = ("-e", f"dgxspark_profile={candidate}", "-e", "boot_candidate=true", "-e", "boot_replace=true")
    _took, proc = timed(str(BIN / "ansible-playbook"), "playbooks/boot.yml", "-i", SIM3, *asked)
    if proc.returncode != 0:
        raise SystemExit(f"bench_boot: the candidate did not boot:\n{proc.stdout[-3000:]}")
    took, proc = timed(str(BIN / "ansible-playbook"), "playbooks/rollback.yml", "-i", SIM3)
    if proc.returncode != 0:
        raise SystemExit(f"bench_boot: rollback.yml failed:\n{proc.stdout[-3000:]}")
    engine = engine_start(hosts)
    timed(str(BIN / "ansible-playbook"), "playbooks/stop.yml", "-i", SIM3)
    return {"wall_s": took, **engine, "overhead_s": took - engine["engines_s"], "promoted_boot_s": booted}


def bench_rollback(rollbacks: int) -> list[dict]:
    hosts = nodes("sim3")
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for _i in range(rollbacks):
            runs.append(one_rollback(hosts, Path(folder)))
            row = runs[-1]
            print(
                f"    rollback {row['wall_s']:6.2f} s: engines {row['engines_s']:5.2f} s, "
                f"beyond them {row['overhead_s']:5.2f} s",
                flush=True,
            )
    return runs


def verdict(ratio: float, target: float) -> str:
    return "PASS" if ratio <= target else "MISS"


def report(check: dict, boot: dict | None, rounds: int) -> dict:
    print(f"\nwall time, {rounds} runs each (s)")
    print(f"  {'kind':<15} {'median':>7} {'min':>7}")
    for kind, row in check.items():
        print(f"  {kind:<15} {row['median_s']:7.2f} {row['min_s']:7.2f}")
    ratios = {
        "check/ping sim3": {
            "ratio": check["check sim3"]["median_s"] / check["ping sim3"]["median_s"],
            "target": TARGET_CHECK_VS_PING,
        },
        "check sim8/sim3": {
            "ratio": check["check sim8"]["median_s"] / check["check sim3"]["median_s"],
            "target": TARGET_SIM8_VS_SIM3,
        },
    }
    ping_growth = check["ping sim8"]["median_s"] / check["ping sim3"]["median_s"]
    ratios.update(
        {
            "preflight/ping sim3": {"ratio": check["preflight sim3"]["median_s"] / check["ping sim3"]["median_s"]},
            "ping sim8/sim3": {"ratio": ping_growth},
            # what the boot adds to the growth from 3 to 8 nodes beyond what Ansible and this machine add to
            # any module (a ping grows too: 8 nodes share the controller's 2 cores)
            "check growth / ping growth": {
                "ratio": ratios["check sim8/sim3"]["ratio"] / ping_growth,
                "target": TARGET_GROWTH,
            },
        }
    )
    print("\nratios (medians)")
    print(f"  {'':<26} {'ratio':>6} {'target':>7}")
    for name, entry in ratios.items():
        if "target" not in entry:
            print(f"  {name:<26} {entry['ratio']:6.2f}")
            continue
        entry["verdict"] = verdict(entry["ratio"], entry["target"])
        print(f"  {name:<26} {entry['ratio']:6.2f} {'<= ' + format(entry['target'], '.1f'):>7}  {entry['verdict']}")
    summary: dict = {"ratios": ratios}
    if boot:
        runs = boot["runs"]

        def med(key: str) -> float:
            return statistics.median(r[key] for r in runs)

        print(f"\nreal boot on sim3, {len(runs)} boots after the first (medians, s)")
        print(
            f"  first boot of the run (fresh nodes: fabric configured, guard installed) {boot['first']['wall_s']:7.2f}"
        )
        print(f"  boot wall time                                   {med('wall_s'):7.2f}")
        print(f"  engine load (the head's 'model loaded in')       {med('load_s'):7.2f}")
        print(f"  engines' own start (first rank up -> serving)    {med('engines_s'):7.2f}")
        print(f"  beyond the load (wall - load)                    {med('beyond_load_s'):7.2f}")
        overhead = med("overhead_s")
        print(
            f"  overhead beyond the engines' own start           {overhead:7.2f}  <= {TARGET_OVERHEAD_S:.0f}  "
            + verdict(overhead, TARGET_OVERHEAD_S)
        )
        print(f"  stop.yml wall time                               {med('stop_s'):7.2f}")
        print("  where the boot's time goes (the boot's own phase times):")
        for name in PHASES:
            print(f"    {name:<20} {statistics.median(r['stages_s'][name] for r in runs):7.2f}")
        middle = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
        slowest = sorted(middle["tasks"], key=lambda t: -t[1])[:8]
        print(f"  slowest tasks of the median boot ({middle['wall_s']:.2f} s):")
        for name, seconds in slowest:
            print(f"    {seconds:6.2f}  {name}")
        summary["boot"] = {
            key: med(key)
            for key in ("wall_s", "load_s", "engines_s", "head_engine_s", "overhead_s", "beyond_load_s", "stop_s")
        } | {"first_boot_s": boot["first"]["wall_s"]}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=5, help="--check rounds after the warm-up (default 5)")
    parser.add_argument("--boots", type=int, default=3, help="real boots on sim3 after the first (default 3)")
    parser.add_argument("--no-boot", action="store_true", help="only the --check ratios")
    parser.add_argument(
        "--rollbacks", type=int, default=0, help="rollback.yml runs on sim3, from a candidate back (default 0)"
    )
    parser.add_argument("--up", action="store_true", help="bring sim3 and sim8 up first if they are not running")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.rounds < 1 or args.boots < 1:
        parser.error("need at least one round and one boot")
    if not (BIN / "ansible-playbook").exists():
        raise SystemExit("bench_boot: no .venv/bin/ansible-playbook: make venv first")
    brought_up: list[str] = []
    boot = None
    rollback: list[dict] = []
    try:
        for cluster in ("sim3", "sim8"):
            if not running(cluster):
                if not args.up:
                    raise SystemExit(f"bench_boot: {cluster} is not running: make sim-up CLUSTER={cluster}, or --up")
                print(f"... {cluster} is not running: simctl.py up {cluster}", flush=True)
                brought_up.append(cluster)
                sh(sys.executable, str(SIMCTL), "up", cluster)
        check = bench_check(args.rounds)
        if "sim8" in brought_up:
            print("... simctl.py down sim8 (brought up by this script; one cluster's engines at a time)", flush=True)
            sh(sys.executable, str(SIMCTL), "down", "sim8", check=False)
            brought_up.remove("sim8")
        if not args.no_boot:
            boot = bench_boot(args.boots)
        if args.rollbacks:
            print(f"... sim3: {args.rollbacks} rollback(s) from a candidate to the promoted release", flush=True)
            rollback = bench_rollback(args.rollbacks)
    finally:
        for cluster in brought_up:
            print(f"... simctl.py down {cluster} (brought up by this script)", flush=True)
            sh(sys.executable, str(SIMCTL), "down", cluster, check=False)
    summary = report(check, boot, args.rounds)
    if rollback:
        print(f"\nrollback.yml on sim3, {len(rollback)} run(s) (medians, s)")
        for key, what in (("wall_s", "wall time"), ("engines_s", "engines' own start"), ("overhead_s", "beyond it")):
            print(f"  {what:<20} {statistics.median(r[key] for r in rollback):7.2f}")
    if args.json:
        document = {"rounds": args.rounds, "check": check, "boot": boot, "rollback": rollback, **summary}
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
