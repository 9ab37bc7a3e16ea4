#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check aiperf (tools/aiperf/run.py) against a stand-in engine whose timing is known and flat.

    tools/aiperf/calibrate.py --out /tmp/aiperf-cal [--levels 1,8,64] [--ttft 200 --itl 20] [-- AIPERF_OPTS]

Writes a calibration file {"levels": {"1": [TTFT, ITL], "<max level>": [TTFT, ITL]},
"prefill_tokens_per_s": 5100} (the same TTFT and ITL at every concurrency), starts the stand-in
engine from this checkout on 127.0.0.1 (sim/engine/bin/vllm serve, a local process, no docker)
with SIM_ENGINE_CALIBRATION pointing at it, runs tools/aiperf/run.py once per level (N = max(32,
4 x C) requests after C warmup requests, output 64 tokens, prompt 128 tokens), stops the engine,
and prints one Markdown table (and writes OUT/summary.json):

    truth          the configured TTFT and ITL
    engine         what the engine itself recorded over the run (its /metrics histograms:
                   vllm:time_to_first_token_seconds and vllm:inter_token_latency_seconds, sum/count
                   deltas; warmup included). The engine records each token at its scheduled
                   deadline (sim/engine/vllm_sim/engine.py), measured from when it parsed the
                   request: so ITL is 20.000 by construction, and TTFT differs from the truth only
                   by the rescaling when concurrency changes. A thread that writes late on a busy
                   host is not seen here; it is seen by any client.
    aiperf         run.py's ttft_ms.mean and itl_ms.mean
    cpu            client_cpu_s (aiperf and its children), per request and as a share of one core
                   over aiperf's wall time; the engine's CPU seconds over the same run
    keeps up       request_throughput against the ideal C / (TTFT + (O - 1) x ITL), aiperf's
                   effective concurrency (time-weighted requests in flight) and its credit-to-start
                   lag (a slot is free -> the HTTP request is sent; not part of TTFT)

The host's load average is recorded before each level: other work on the machine skews both
the engine and aiperf. Standard library only; run it with any Python 3.11+.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINE = REPO / "sim" / "engine" / "bin" / "vllm"
RUN = Path(__file__).resolve().parent / "run.py"
METRIC_RE = re.compile(r"^(vllm:[a-z_]+)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - loopback only
        return r.status, r.read().decode()


def engine_metrics(base: str) -> dict[str, float]:
    text = get(base + "/metrics")[1]
    out = {}
    for line in text.splitlines():
        m = METRIC_RE.match(line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_engine(calibration: Path, port: int, log: Path, max_seqs: int) -> subprocess.Popen:
    env = dict(os.environ, SIM_ENGINE_CALIBRATION=str(calibration), SIM_ENGINE_LOAD_SECONDS="0.2")
    cmd = [
        sys.executable, str(ENGINE), "serve", "/models/x", "--served-model-name", "m",
        "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", str(max_seqs),
        "--max-model-len", "8192", "--disable-uvicorn-access-log",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"calibrate: the engine exited {proc.returncode} (log: {log})")
        try:
            if get(f"http://127.0.0.1:{port}/health", timeout=1)[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    stop_engine(proc)
    sys.exit(f"calibrate: the engine did not serve within 60 s (log: {log})")


def stop_engine(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def delta_mean(before: dict, after: dict, name: str) -> float | None:
    n = after.get(name + "_count", 0) - before.get(name + "_count", 0)
    s = after.get(name + "_sum", 0) - before.get(name + "_sum", 0)
    return 1000 * s / n if n else None


COLUMNS = [
    ("C", "concurrency", "{}"),
    ("N", "requests", "{}"),
    ("err", "errors", "{}"),
    ("load 1m", "load_avg_1m", "{:.2f}"),
    ("TTFT truth", "truth_ttft_ms", "{:.1f}"),
    ("TTFT engine", "engine_ttft_ms", "{:.1f}"),
    ("TTFT aiperf", "aiperf_ttft_ms", "{:.1f}"),
    ("TTFT aiperf p99", "aiperf_ttft_p99_ms", "{:.1f}"),
    ("ITL truth", "truth_itl_ms", "{:.2f}"),
    ("ITL engine", "engine_itl_ms", "{:.3f}"),
    ("ITL aiperf", "aiperf_itl_ms", "{:.3f}"),
    ("req/s aiperf", "request_throughput", "{:.2f}"),
    ("req/s ideal", "ideal_request_throughput", "{:.2f}"),
    ("eff. C", "effective_concurrency", "{:.1f}"),
    ("lag ms", "credit_to_start_latency_ms", "{:.1f}"),
    ("wall s", "wall_s", "{:.1f}"),
    ("client CPU s", "client_cpu_s", "{:.1f}"),
    ("CPU s/req", "client_cpu_s_per_request", "{:.3f}"),
    ("cores", "client_cores", "{:.2f}"),
    ("engine CPU s", "engine_cpu_s", "{:.1f}"),
]


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table (times in ms; CPU s/req counts the warmup requests too)."""
    lines = ["| " + " | ".join(col[0] for col in COLUMNS) + " |", "|" + "---:|" * len(COLUMNS)]
    for row in rows:
        cells = ["-" if row.get(key) is None else fmt.format(row[key]) for _head, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description="aiperf against the stand-in engine with flat, known timing")
    p.add_argument("--out", type=Path, required=True, help="directory for the runs, the engine log and summary.json")
    p.add_argument("--levels", default="1,8,64", help="concurrency levels (default %(default)s)")
    p.add_argument("--ttft", type=float, default=200.0, help="TTFT in ms at every level (default %(default)s)")
    p.add_argument("--itl", type=float, default=20.0, help="ITL in ms at every level (default %(default)s)")
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--factor", type=int, default=4, help="requests = max(32, factor x concurrency)")
    p.add_argument("--python", default=sys.executable, help="interpreter for run.py (default: this one)")
    p.add_argument("--pace-hz", type=float, default=None, help="run.py --pace-hz (default: aiperf's stock mode)")
    p.add_argument("extra", nargs="*", help="aiperf options passed through run.py (after --)")
    args = p.parse_args()

    levels = [int(x) for x in args.levels.split(",")]
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    calibration = out / "calibration.json"
    top = str(max(*levels, 2))
    calibration.write_text(
        json.dumps({"levels": {"1": [args.ttft, args.itl], top: [args.ttft, args.itl]}, "prefill_tokens_per_s": 5100})
        + "\n"
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = start_engine(calibration, port, out / "engine.log", max(128, *levels))
    rows = []
    try:
        for c in levels:
            n = max(32, args.factor * c)
            load = os.getloadavg()[0]
            m0, cpu0 = engine_metrics(base), proc_cpu_s(engine.pid)
            cmd = [
                args.python, str(RUN), "--url", base, "--model", "m", "--concurrency", str(c),
                "--requests", str(n), "--prompt-tokens", str(args.prompt_tokens),
                "--output-tokens", str(args.output_tokens), "--warmup", str(c), "--out", str(out / f"c{c}"),
            ]  # fmt: skip
            if args.pace_hz:
                cmd += ["--pace-hz", f"{args.pace_hz:g}"]
            if args.extra:
                cmd += ["--", *args.extra]
            run = subprocess.run(cmd, capture_output=True, text=True, check=False)
            m1, cpu1 = engine_metrics(base), proc_cpu_s(engine.pid)
            if run.returncode != 0:
                print(f"calibrate: run.py failed at concurrency {c}:\n{run.stderr}", file=sys.stderr)
                return 1
            r = json.loads(run.stdout)
            ideal_latency_s = (args.ttft + (args.output_tokens - 1) * args.itl) / 1000
            engine_ttft = delta_mean(m0, m1, "vllm:time_to_first_token_seconds")
            rows.append(
                {
                    "concurrency": c,
                    "requests": r["requests"],
                    "errors": r["errors"],
                    "load_avg_1m": round(load, 2),
                    "truth_ttft_ms": args.ttft,
                    "truth_itl_ms": args.itl,
                    "engine_ttft_ms": engine_ttft,
                    "engine_itl_ms": delta_mean(m0, m1, "vllm:inter_token_latency_seconds"),
                    "aiperf_ttft_ms": r["ttft_ms"]["mean"],
                    "aiperf_ttft_p99_ms": r["ttft_ms"]["p99"],
                    "aiperf_itl_ms": r["itl_ms"]["mean"],
                    "aiperf_latency_ms": r["request_latency_ms"]["mean"],
                    "request_throughput": r["request_throughput"],
                    "ideal_request_throughput": c / ideal_latency_s,
                    "output_tokens_mean": r["aiperf"]["output_tokens_mean"],
                    "effective_concurrency": r["aiperf"]["effective_concurrency"],
                    "credit_to_start_latency_ms": r["aiperf"]["credit_to_start_latency_ms"],
                    "wall_s": r["wall_s"],
                    "client_cpu_s": r["client_cpu_s"],
                    "client_cpu_s_per_request": r["client_cpu_s"] / (n + c),
                    "client_cores": r["client_cpu_s"] / r["wall_s"],
                    "engine_cpu_s": round(cpu1 - cpu0, 2),
                    "result": str(out / f"c{c}" / "result.json"),
                }
            )
    finally:
        stop_engine(engine)

    (out / "summary.json").write_text(
        json.dumps({"pace_hz": args.pace_hz, "extra": args.extra, "rows": rows}, indent=2) + "\n"
    )
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
