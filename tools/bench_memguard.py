#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the memory guard costs, and how fast it trips.

    tools/bench_memguard.py [--seconds S] [--trips N] [--json FILE]

Runs roles/memguard/files/dgxspark_memguard.py as a real process on this machine (its own config, state
and sockets in a temporary directory; a fake Docker engine on a Unix socket that answers the stop), then:
  1. CPU: S seconds (default 30) in each phase - startup at 0.25 s (seed 000) and steady at 2 s - reading
     this machine's real /proc/meminfo and /proc/pressure/memory; CPU time from /proc/<pid>/stat (user +
     system) over the samples taken (from the decision log's sample count and the state file), as CPU per
     sample and as a share of one core. Target: under 0.5 % of one core in the startup phase.
  2. Memory: the daemon's resident set (VmRSS, /proc/<pid>/status) after those runs. Target: under 30 MB.
  3. Trip latency, N times (default 5) per setting: the meminfo the daemon reads is a file here; at t0 it
     is rewritten under the floor, and the time until the fake engine receives POST .../stop is measured
     against grace + interval (the bound: the first low sample comes at most one interval after t0),
     with grace 1 s at 0.25 s and grace 3 s at 2 s (short, so the run stays short).
The process's CPU is its own: no other daemon runs in it. Both ratios come from one run on this machine.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAEMON = REPO / "roles" / "memguard" / "files" / "dgxspark_memguard.py"
GIB = 1024**3
TARGET_CORE_PERCENT = 0.5
TARGET_RSS_MB = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class _Engine(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    stops: list[float]


# The container the guards stop, as the engine lists it: the guard finds it by name and the collection's label,
# then stops it by this full ID.
LISTED = [{"Id": "c0" * 32, "Names": ["/vllm_dsv41"], "Labels": {"dgxspark.cluster.rank": "0"}}]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps(LISTED).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.server.stops.append(time.monotonic())  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        return


def meminfo_text(available: int) -> str:
    kib = available // 1024
    return f"MemTotal:       {128 * GIB // 1024} kB\nMemFree:        {kib} kB\nMemAvailable:   {kib} kB\n"


def phase_spec(floor_gib: float, interval_s: float, grace_s: float) -> dict:
    return {"floor_bytes": int(floor_gib * GIB), "interval_s": interval_s, "grace_s": grace_s}


def write_meminfo(path: Path, available: int) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(meminfo_text(available))
    os.replace(temporary, path)


def config(tmp: Path, meminfo: str, startup: tuple[float, float, float], steady: tuple[float, float, float]) -> Path:
    data = {
        "host": "bench",
        "container": "vllm_dsv41",
        "docker_socket": str(tmp / "engine.sock"),
        "phases": {
            "startup": phase_spec(*startup),
            "steady": phase_spec(*steady),
        },
        "startup_wait_s": 3600,
        "emergency_floor_bytes": int(0.25 * GIB),
        "psi_full_avg10_max": 50,
        "meminfo_path": meminfo,
        "state_path": str(tmp / "state.json"),
        "trip_path": str(tmp / "tripped.json"),
        "log_path": str(tmp / "decisions.jsonl"),
        "control_socket": str(tmp / "control.sock"),
    }
    path = tmp / "config.json"
    path.write_text(json.dumps(data))
    return path


class Guard:
    """The daemon as a child process, and its command line for phase switches."""

    def __init__(self, config_path: Path, tmp: Path) -> None:
        self.config_path = config_path
        self.tmp = tmp
        self.process = subprocess.Popen([sys.executable, str(DAEMON), "--config", str(config_path), "run"])
        deadline = time.monotonic() + 10
        while not (tmp / "control.sock").exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("bench_memguard: the daemon did not start")
            time.sleep(0.05)

    def ask(self, *args: str) -> dict:
        out = subprocess.run(
            [sys.executable, str(DAEMON), "--config", str(self.config_path), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def samples(self) -> int:
        """Samples taken so far: one state write each; counted from the state file's updates."""
        return int(json.loads((self.tmp / "state.json").read_text()).get("samples_taken", 0))

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def cpu_run(seconds: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-memguard-") as name:
        tmp = Path(name)
        guard = Guard(config(tmp, "/proc/meminfo", (0.5, 0.25, 45), (0.5, 2.0, 30)), tmp)
        try:
            results = {}
            for phase, interval in (("startup", 0.25), ("steady", 2.0)):
                guard.ask("phase", phase)
                before_cpu, before_samples, started = guard.cpu_seconds(), guard.samples(), time.monotonic()
                time.sleep(seconds)
                cpu, samples = guard.cpu_seconds() - before_cpu, guard.samples() - before_samples
                wall = time.monotonic() - started
                results[phase] = {
                    "interval_s": interval,
                    "seconds": round(wall, 2),
                    "samples": samples,
                    "cpu_s": round(cpu, 3),
                    "cpu_ms_per_sample": round(cpu * 1000 / max(samples, 1), 3),
                    "core_percent": round(100 * cpu / wall, 3),
                }
                print(
                    f"... {phase}: {samples} samples in {wall:.1f} s, CPU {cpu:.2f} s "
                    f"({results[phase]['core_percent']:.3f} % of a core)",
                    flush=True,
                )
            results["rss_mb"] = round(guard.rss_mb(), 1)
            return results
        finally:
            guard.stop()


def trip_run(trips: int, interval: float, grace: float) -> dict:
    latencies = []
    with tempfile.TemporaryDirectory(prefix="bench-memguard-") as name:
        tmp = Path(name)
        engine = _Engine(str(tmp / "engine.sock"), _Handler)
        engine.stops = []
        threading.Thread(target=engine.serve_forever, daemon=True).start()
        meminfo = tmp / "meminfo"
        write_meminfo(meminfo, 20 * GIB)
        guard = Guard(config(tmp, str(meminfo), (4.0, interval, grace), (4.0, interval, grace)), tmp)
        try:
            guard.ask("phase", "steady")
            for _trip in range(trips):
                write_meminfo(meminfo, 20 * GIB)
                guard.ask("clear")
                time.sleep(interval * 2 + 0.2)  # let a high sample go by
                stops = len(engine.stops)
                t0 = time.monotonic()
                write_meminfo(meminfo, 2 * GIB)
                while len(engine.stops) == stops:
                    if time.monotonic() - t0 > grace + interval + 10:
                        raise SystemExit("bench_memguard: no trip within grace + interval + 10 s")
                    time.sleep(0.005)
                latencies.append(engine.stops[-1] - t0)
        finally:
            guard.stop()
            engine.shutdown()
    bound = grace + interval
    return {
        "interval_s": interval,
        "grace_s": grace,
        "bound_s": bound,
        "latencies_s": [round(x, 3) for x in latencies],
        "max_s": round(max(latencies), 3),
        "median_s": round(statistics.median(latencies), 3),
        "within_bound": all(x <= bound + 0.1 for x in latencies),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--seconds", type=float, default=30, help="seconds of sampling per phase (default 30)")
    parser.add_argument("--trips", type=int, default=5, help="trips measured per setting (default 5)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    print(f"... CPU and memory: {args.seconds:g} s in the startup phase (0.25 s) and in the steady phase (2 s)")
    cpu = cpu_run(args.seconds)
    trips = []
    for interval, grace in ((0.25, 1.0), (2.0, 3.0)):
        print(f"... trip latency: {args.trips} trips at interval {interval:g} s, grace {grace:g} s", flush=True)
        trips.append(trip_run(args.trips, interval, grace))
    print("\nmemory guard: cost")
    print(f"  {'phase':<8} {'interval':>8} {'samples':>8} {'CPU/sample':>11} {'core':>9}  target")
    for phase in ("startup", "steady"):
        row = cpu[phase]
        target = f"< {TARGET_CORE_PERCENT} %  {'PASS' if row['core_percent'] < TARGET_CORE_PERCENT else 'MISS'}"
        print(
            f"  {phase:<8} {row['interval_s']:>7g}s {row['samples']:>8} {row['cpu_ms_per_sample']:>9.3f}ms "
            f"{row['core_percent']:>8.3f}%  {target if phase == 'startup' else ''}".rstrip()
        )
    rss_verdict = "PASS" if cpu["rss_mb"] < TARGET_RSS_MB else "MISS"
    print(f"  resident memory {cpu['rss_mb']:.1f} MB  (target < {TARGET_RSS_MB:g} MB)  {rss_verdict}")
    print("\nmemory guard: trip latency (from MemAvailable under the floor to the engine's stop request)")
    print(f"  {'interval':>8} {'grace':>6} {'bound':>6} {'median':>7} {'max':>6}  within grace + interval")
    for row in trips:
        print(
            f"  {row['interval_s']:>7g}s {row['grace_s']:>5g}s {row['bound_s']:>5g}s {row['median_s']:>6.3f}s "
            f"{row['max_s']:>5.3f}s  {'yes' if row['within_bound'] else 'NO'}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu, "trips": trips}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
