#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How long the simulated cluster takes to build and start, and how much memory sim8 uses.

    tools/bench_sim.py [--skip-cold] [--json FILE]

Measures, on this machine's Docker engine (root; no simulated cluster may be running):
  1. image build cold (no images, no rootfs tarballs, no cached .debs: debootstrap from the Debian
     archive), warm (everything cached: nothing to do), and from the tarball cache (images removed,
     tarballs kept: `docker import` only). --skip-cold leaves the cache alone and skips the cold one.
  2. sim3 up (with the engine image loaded into every node), up again (verifies), down.
  3. sim8 up (with the engine image), then one idle engine container per node, started in each
     node's inner dockerd with the sim profiles' docker_run_args:
        docker run -d --name sim-bench-engine --network=host --ipc=host --ulimit=nofile=20000:20000
          --memory=16g --memory-swap=16g dgxspark-sim/engine:latest
          python3 -c 'import vllm_sim.<every module>; sleep'
     (the engine's code loaded, idle: what a node holds before a model is served), and the memory
     that uses: the host's MemAvailable drop since before sim8 started, and the sum over the nodes
     of their cgroups' anonymous memory (rss + shmem; page cache, which the kernel reclaims, apart).
     Target: under 4 GiB. Then sim8 down.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"
BUILD = REPO / "sim" / "images" / "build.sh"
CACHE = REPO / ".cache" / "sim"
GIB = 1024**3
MIB = 1024**2
TARGET_GIB = 4.0
IDLE_ENGINE = (
    "import importlib, pkgutil, time, vllm_sim\n"
    "for m in pkgutil.iter_modules(vllm_sim.__path__):\n"
    "    if m.name.startswith('_'):\n"
    "        continue\n"
    "    try:\n"
    "        importlib.import_module('vllm_sim.' + m.name)\n"
    "    except Exception as err:\n"
    "        print('not imported:', m.name, err, flush=True)\n"
    "print('idle', flush=True)\n"
    "time.sleep(10**9)\n"
)


def sh(*argv: str, check: bool = True, quiet: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if not quiet:
        sys.stdout.write(proc.stdout)
    if check and proc.returncode != 0:
        sys.stdout.write(proc.stdout[-3000:])
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"bench_sim: {' '.join(argv)} failed ({proc.returncode})")
    return proc


def timed(label: str, *argv: str) -> float:
    print(f"... {label}", flush=True)
    start = time.monotonic()
    sh(*argv)
    took = time.monotonic() - start
    print(f"    {took:6.1f} s  {label}", flush=True)
    return took


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("bench_sim: no MemAvailable in /proc/meminfo")


def cgroup_memory(path: Path) -> dict[str, int]:
    stat = dict(line.split() for line in (path / "memory.stat").read_text().splitlines())
    return {
        "anon": int(stat["total_rss"]) + int(stat["total_shmem"]),
        "cache": int(stat["total_cache"]) - int(stat["total_shmem"]),
    }


def remove_images() -> None:
    tags = sh("docker", "images", "--format", "{{.Repository}}:{{.Tag}}", "dgxspark-sim/*").stdout.split()
    if tags:
        sh("docker", "rmi", *tags)


def bench_images(skip_cold: bool) -> dict[str, float]:
    times = {}
    if not skip_cold:
        remove_images()
        for path in (CACHE / "images", CACHE / "debs", CACHE / "build"):
            shutil.rmtree(path, ignore_errors=True)
        times["images_cold_s"] = timed("image build, cold (debootstrap x2, docker import, docker build)", str(BUILD))
    else:
        sh(str(BUILD))
    times["images_warm_s"] = timed("image build, warm (all cached)", str(BUILD))
    remove_images()
    times["images_from_tarballs_s"] = timed("image build, images removed, tarballs cached", str(BUILD))
    return times


def node_memory(nodes: list[str]) -> list[dict]:
    rows = []
    for host in nodes:
        cid = sh("docker", "inspect", "-f", "{{.Id}}", host).stdout.strip()
        node = cgroup_memory(Path(f"/sys/fs/cgroup/memory/docker/{cid}"))
        inner_path = Path(f"/sys/fs/cgroup/memory/dgxspark-sim/{host}")
        inner = cgroup_memory(inner_path) if inner_path.exists() else {"anon": 0, "cache": 0}
        rows.append({"host": host, "node_anon": node["anon"], "engine_anon": inner["anon"],
                     "cache": node["cache"] + inner["cache"]})  # fmt: skip
    return rows


def bench_sim8() -> dict[str, float]:
    results: dict[str, float] = {}
    before = mem_available()
    results["sim8_up_s"] = timed(
        "make sim-up CLUSTER=sim8 (8 nodes, engine image loaded in each)", sys.executable, str(SIMCTL), "up", "sim8"
    )
    info = json.loads(sh(sys.executable, str(SIMCTL), "describe", "sim8").stdout)
    nodes = [n["host"] for n in info["nodes"]]
    print("... one idle engine container per node (profile docker_run_args, engine modules imported)", flush=True)
    for host in nodes:
        sh("docker", "exec", host, "docker", "run", "-d", "--name", "sim-bench-engine", "--network=host", "--ipc=host",
           "--ulimit=nofile=20000:20000", "--memory=16g", "--memory-swap=16g", "dgxspark-sim/engine:latest",
           "python3", "-c", IDLE_ENGINE)  # fmt: skip
    deadline = time.monotonic() + 60
    for host in nodes:
        while "idle" not in sh("docker", "exec", host, "docker", "logs", "sim-bench-engine").stdout:
            status = sh("docker", "exec", host, "docker", "inspect", "-f", "{{.State.Status}}", "sim-bench-engine")
            if time.monotonic() > deadline or status.stdout.strip() != "running":
                logs = sh("docker", "exec", host, "docker", "logs", "sim-bench-engine", check=False)
                raise SystemExit(f"bench_sim: the idle engine on {host} did not start: {logs.stdout}{logs.stderr}")
            time.sleep(0.5)
        logs = sh("docker", "exec", host, "docker", "logs", "sim-bench-engine").stdout
        for line in logs.splitlines():
            if line.startswith("not imported"):
                print(f"    {host}: {line}")
    time.sleep(3)
    after = mem_available()
    rows = node_memory(nodes)
    print(f"    {'node':<14} {'node MiB':>9} {'engine MiB':>11} {'page cache MiB':>15}")
    for row in rows:
        node, engine, cache = row["node_anon"] / MIB, row["engine_anon"] / MIB, row["cache"] / MIB
        print(f"    {row['host']:<14} {node:9.0f} {engine:11.0f} {cache:15.0f}")
    anon = sum(r["node_anon"] + r["engine_anon"] for r in rows)
    cache = sum(r["cache"] for r in rows)
    results["sim8_anon_gib"] = anon / GIB
    results["sim8_engines_anon_gib"] = sum(r["engine_anon"] for r in rows) / GIB
    results["sim8_page_cache_gib"] = cache / GIB
    results["sim8_memavailable_drop_gib"] = (before - after) / GIB
    engines = results["sim8_engines_anon_gib"]
    print(f"    sim8 with 8 idle engines: {anon / GIB:.2f} GiB anonymous in the nodes' cgroups")
    print(f"    (engines {engines:.2f} GiB); {cache / GIB:.2f} GiB page cache besides (reclaimable)")
    print(f"    host MemAvailable dropped by {results['sim8_memavailable_drop_gib']:.2f} GiB since before sim8 started")
    worst = max(results["sim8_anon_gib"], results["sim8_memavailable_drop_gib"])
    print(f"    target under {TARGET_GIB:.0f} GiB: {'met' if worst < TARGET_GIB else 'MISSED'} ({worst:.2f} GiB)")
    results["sim8_down_s"] = timed("make sim-down CLUSTER=sim8", sys.executable, str(SIMCTL), "down", "sim8")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--skip-cold", action="store_true", help="keep the image cache; skip the cold build")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    sh(str(REPO / "sim" / "cluster" / "ensure-docker.sh"))
    running = sh("docker", "ps", "-a", "--filter", "label=org.dgxspark-sim.cluster", "--format", "{{.Names}}").stdout
    if running.split():
        raise SystemExit(f"bench_sim: simulated nodes exist ({' '.join(running.split())}): make sim-down first")
    results: dict[str, float] = {}
    results.update(bench_images(args.skip_cold))
    try:
        results["sim3_up_s"] = timed(
            "make sim-up CLUSTER=sim3 (engine image loaded)", sys.executable, str(SIMCTL), "up", "sim3"
        )
        results["sim3_up_again_s"] = timed(
            "make sim-up CLUSTER=sim3 again (verifies)", sys.executable, str(SIMCTL), "up", "sim3"
        )
        results["sim3_down_s"] = timed("make sim-down CLUSTER=sim3", sys.executable, str(SIMCTL), "down", "sim3")
        results.update(bench_sim8())
    finally:
        for cluster in ("sim3", "sim8"):
            sh(sys.executable, str(SIMCTL), "down", cluster, check=False)
    print("\nsummary")
    for key, value in results.items():
        print(f"  {key:<28} {value:8.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
