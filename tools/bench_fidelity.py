#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How true the benchmark client's figures are: against known timing, and against a reference client.

    tools/bench_fidelity.py [--levels 1,2,4,8,16,32,64] [--ttft-ms 200] [--itl-ms 20] [--output-tokens 64]
                            [--rounds 4] [--aiperf | --no-aiperf] [--json FILE]
                            [--api-key-file FILE] [--ssl-certfile PEM --ssl-keyfile PEM]

With --api-key-file and --ssl-certfile/--ssl-keyfile the engine wants the key and speaks TLS (as a profile's
container.api asks), and the client sends the key read from the file and trusts the certificate: the figures
then include what TLS costs. The reference (aiperf) is left out then.

1. Truth. Starts the stand-in engine (sim/engine) on 127.0.0.1 with a flat timing table: every request's
   first token comes --ttft-ms after the engine admits it and every further token --itl-ms after the one
   before, whatever the concurrency (its --max-num-seqs is above the highest level, so nothing queues).
   At each level the client (module_utils/_bench_client.py, exactly what bench_load runs) sends
   max(32, rounds x level) requests of --output-tokens tokens. Its mean TTFT and mean TPOT
   ((e2e - TTFT) / (N - 1)) must be within 2 % (or 1 ms) of the truth. The engine's own /metrics
   histograms (its TTFT from the request's arrival) are shown next to them: the client's TTFT minus the
   engine's is what the HTTP round trip and both processes' scheduling add on this machine.
2. Not the bottleneck. At each level the client's CPU (share of one core, user+sys of this process) and
   its event loop's lateness (p99): a client that cannot keep up wakes late and stamps late.
3. Reference. With .venv-aiperf (`make venv-aiperf`), NVIDIA's aiperf (tools/aiperf/run.py, paced at
   1000 Hz so its scheduler does not spin a core) runs the same workload on the same engine at each level,
   right after ours runs it once more the way aiperf does (every user starting at once); mean TTFT and
   mean TPOT (aiperf's "inter token latency") of the two must agree within 3 %.

Users start spread over one request's duration (--burst: all at once). With a flat table and answers of
one length, users that start together stay in step, and at concurrency 64 every request of a round reaches
the engine in the same millisecond: its HTTP front end (Python threads under one GIL) takes them one after
the other before it stamps their arrival, which adds to every client's TTFT what the engine's own figure
(the "engine" column) does not show. Spread out, each request meets an idle front end.

The engine and the client share this machine's cores, so every figure is measured with both running,
as a ratio within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".ansible" / "collections"))

from ansible_collections.dgxspark.cluster.plugins.module_utils import _bench_client as client  # noqa: E402

ENGINE = REPO / "sim" / "engine" / "bin" / "vllm"
AIPERF_VENV = REPO / ".venv-aiperf"
AIPERF_RUN = REPO / "tools" / "aiperf" / "run.py"
TRUTH_TOLERANCE = 0.02  # of the true value ...
TRUTH_FLOOR_S = 0.001  # ... or 1 ms, whichever is larger
REFERENCE_TOLERANCE = 0.03
LAG_LIMIT_MS = 5.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# The served API's access, as a profile's container.api asks for it (--api-key-file, --ssl-certfile/--ssl-keyfile):
# the engine gets the key in VLLM_API_KEY and the TLS files, the client reads the key from the file and trusts the
# certificate. Empty: plain http, no key.
ACCESS: dict[str, str] = {}


def endpoint(url: str) -> client.Endpoint:
    return client.Endpoint(url, api_key_file=ACCESS.get("api_key_file"), ca_file=ACCESS.get("certfile"))


def urlopen(url: str, timeout: float):
    context = client.tls_context(ACCESS["certfile"]) if url.startswith("https:") else None
    return urllib.request.urlopen(url, timeout=timeout, context=context)


def start_engine(ttft_ms: float, itl_ms: float, max_seqs: int, workdir: Path) -> tuple[subprocess.Popen, str]:
    calibration = workdir / "flat.json"
    calibration.write_text(json.dumps({"levels": {"1": [ttft_ms, itl_ms], "2": [ttft_ms, itl_ms]}}))
    port = free_port()
    env = dict(os.environ, SIM_ENGINE_CALIBRATION=str(calibration), SIM_ENGINE_LOAD_SECONDS="0.2")
    env.pop("SIM_ENGINE_TIME_SCALE", None)
    env.pop("VLLM_API_KEY", None)
    argv = [sys.executable, str(ENGINE), "serve", "/models/fidelity", "--served-model-name", "fidelity"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", str(max_seqs), "--max-model-len", "32768"]
    argv += ["--disable-uvicorn-access-log"]
    if ACCESS.get("api_key_file"):
        env["VLLM_API_KEY"] = client.read_api_key(ACCESS["api_key_file"])  # as the head's wrapper does
    if ACCESS.get("certfile"):
        argv += ["--ssl-certfile", ACCESS["certfile"], "--ssl-keyfile", ACCESS["keyfile"]]
    log = (workdir / "engine.log").open("w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"{'https' if ACCESS.get('certfile') else 'http'}://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                f"bench_fidelity: the engine exited {proc.returncode}: {(workdir / 'engine.log').read_text()[-2000:]}"
            )
        try:
            with urlopen(url + "/health", 1) as answer:
                if answer.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("bench_fidelity: the engine did not serve within 30 s")


def engine_ttft(url: str) -> tuple[float, int]:
    """(sum, count) of the engine's own vllm:time_to_first_token_seconds histogram."""
    with urlopen(url + "/metrics", 5) as answer:
        text = answer.read().decode()
    total = count = 0.0
    for line in text.splitlines():
        match = re.match(r"vllm:time_to_first_token_seconds_(sum|count)\{[^}]*\} ([0-9.eE+-]+)", line)
        if match:
            if match.group(1) == "sum":
                total += float(match.group(2))
            else:
                count += float(match.group(2))
    return total, int(count)


def ours(url: str, concurrency: int, requests: int, output_tokens: int, prompt_tokens: int, ramp: float) -> dict:
    level = client.run_level(endpoint(url), "fidelity", concurrency, requests, prompt_tokens, output_tokens, ramp=ramp)
    ok = [r for r in level["requests"] if r["ok"]]
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok if (r["output_tokens"] or 0) > 1]
    return {
        "requests": requests,
        "errors": requests - len(ok),
        "ttft_s": statistics.fmean(r["ttft"] for r in ok) if ok else float("nan"),
        "tpot_s": statistics.fmean(tpot) if tpot else float("nan"),
        "tokens": sorted({r["output_tokens"] for r in ok}),
        "cpu_share": level["client"]["cpu_share"],
        "lag_p99_ms": level["client"]["loop_lag"]["p99_ms"],
        "wall_s": level["client"]["wall_s"],
    }


def reference(url: str, concurrency: int, requests: int, output_tokens: int, prompt_tokens: int, workdir: Path) -> dict:
    out = workdir / f"aiperf-c{concurrency}"
    argv = [str(AIPERF_VENV / "bin" / "python"), str(AIPERF_RUN), "--url", url, "--model", "fidelity"]
    argv += ["--concurrency", str(concurrency), "--requests", str(requests), "--prompt-tokens", str(prompt_tokens)]
    argv += ["--output-tokens", str(output_tokens), "--out", str(out), "--warmup", str(concurrency)]
    argv += ["--pace-hz", "1000"]  # closed loop as ours, without aiperf's busy wait for a free slot
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if proc.returncode != 0:
        return {"error": f"aiperf exited {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"}
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "ttft_s": data["ttft_ms"]["mean"] / 1000,
        "tpot_s": data["itl_ms"]["mean"] / 1000,
        "errors": data.get("errors", 0),
        "cpu_s": data.get("client_cpu_s"),
        "wall_s": data.get("wall_s"),
        "client": data.get("client", "aiperf"),
    }


def within(measured: float, truth: float, tolerance: float, floor: float = 0.0) -> bool:
    return abs(measured - truth) <= max(tolerance * abs(truth), floor)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--levels", default="1,2,4,8,16,32,64")
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=4, help="requests per level = max(32, rounds x level)")
    parser.add_argument("--aiperf", dest="aiperf", action="store_true", default=None)
    parser.add_argument("--no-aiperf", dest="aiperf", action="store_false")
    parser.add_argument(
        "--burst", action="store_true", help="start every user at once (default: spread over one request's duration)"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--api-key-file", help="the engine wants this file's key; the client sends it (401 otherwise)")
    parser.add_argument("--ssl-certfile", help="the engine speaks TLS with this certificate; the client trusts it")
    parser.add_argument("--ssl-keyfile", help="the certificate's private key (with --ssl-certfile)")
    args = parser.parse_args(argv)
    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        raise SystemExit("bench_fidelity: --ssl-certfile and --ssl-keyfile go together")
    return args


def take_access(args: argparse.Namespace) -> None:
    """ACCESS from the options: what the engine wants and what the client sends and trusts (the unit tests run
    the client this way against a server of their own: tests/unit/test_api_clients_tls.py)."""
    ACCESS.clear()
    for name in ("api_key_file", "ssl_certfile", "ssl_keyfile"):
        if getattr(args, name):
            ACCESS[name.replace("ssl_", "")] = getattr(args, name)


def main() -> int:
    args = parse_args()
    take_access(args)
    levels = [int(x) for x in args.levels.split(",")]
    use_aiperf = AIPERF_VENV.joinpath("bin", "python").exists() if args.aiperf is None else args.aiperf
    if ACCESS and use_aiperf:
        print("bench_fidelity: the reference (aiperf) is run over plain http without a key only: left out")
        use_aiperf = False
    if use_aiperf and not AIPERF_VENV.joinpath("bin", "python").exists():
        raise SystemExit("bench_fidelity: --aiperf needs .venv-aiperf (make venv-aiperf)")
    truth_ttft, truth_tpot = args.ttft_ms / 1000, args.itl_ms / 1000
    ramp = 0.0 if args.burst else truth_ttft + (args.output_tokens - 1) * truth_tpot
    workdir = Path(tempfile.mkdtemp(prefix="bench-fidelity-"))
    engine, url = start_engine(args.ttft_ms, args.itl_ms, max(levels) * 2, workdir)
    rows = []
    try:
        client.run_level(endpoint(url), "fidelity", 2, 4, args.prompt_tokens, 8)  # warm-up
        for concurrency in levels:
            requests = max(32, args.rounds * concurrency)
            before = engine_ttft(url)
            mine = ours(url, concurrency, requests, args.output_tokens, args.prompt_tokens, ramp)
            after = engine_ttft(url)
            mine["engine_ttft_s"] = (after[0] - before[0]) / max(after[1] - before[1], 1)
            row = {"concurrency": concurrency, "ours": mine}
            if use_aiperf:
                # aiperf starts its users at once: ours does the same beside it, on the same engine
                row["ours_burst"] = ours(url, concurrency, requests, args.output_tokens, args.prompt_tokens, 0.0)
                row["aiperf"] = reference(url, concurrency, requests, args.output_tokens, args.prompt_tokens, workdir)
            rows.append(row)
            print(
                f"  c={concurrency}: {requests} requests, ours TTFT {mine['ttft_s'] * 1000:.2f} ms, "
                f"TPOT {mine['tpot_s'] * 1000:.3f} ms"
                + (
                    f"; aiperf TTFT {row['aiperf']['ttft_s'] * 1000:.2f} ms, "
                    f"TPOT {row['aiperf']['tpot_s'] * 1000:.3f} ms"
                    if use_aiperf and "error" not in row["aiperf"]
                    else (f"; aiperf: {row['aiperf']['error']}" if use_aiperf else "")
                ),
                flush=True,
            )
    finally:
        os.killpg(engine.pid, signal.SIGTERM)
        try:
            engine.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(engine.pid, signal.SIGKILL)

    print(
        f"\nTruth: TTFT {args.ttft_ms:g} ms, TPOT {args.itl_ms:g} ms (flat table); tolerance "
        f"{TRUTH_TOLERANCE:.0%} or {TRUTH_FLOOR_S * 1000:g} ms. "
        f"Output {args.output_tokens} tokens, prompt ~{args.prompt_tokens}."
    )
    header = f"{'c':>3} {'n':>4} {'err':>3} {'TTFT ms':>8} {'engine':>7} {'dTTFT':>7} {'TPOT ms':>8} {'dTPOT':>7}"
    print(header + f" {'CPU':>5} {'lag99':>6}")
    verdicts = {"truth": True, "client": True, "reference": True}
    for row in rows:
        mine = row["ours"]
        ttft_ok = within(mine["ttft_s"], truth_ttft, TRUTH_TOLERANCE, TRUTH_FLOOR_S)
        tpot_ok = within(mine["tpot_s"], truth_tpot, TRUTH_TOLERANCE, TRUTH_FLOOR_S)
        client_ok = mine["lag_p99_ms"] <= LAG_LIMIT_MS and mine["cpu_share"] < 0.8 and mine["errors"] == 0
        verdicts["truth"] &= ttft_ok and tpot_ok
        verdicts["client"] &= client_ok
        print(
            f"{row['concurrency']:>3} {mine['requests']:>4} {mine['errors']:>3} {mine['ttft_s'] * 1000:>8.2f} "
            f"{mine['engine_ttft_s'] * 1000:>7.2f} {(mine['ttft_s'] / truth_ttft - 1):>+7.2%} "
            f"{mine['tpot_s'] * 1000:>8.3f} "
            f"{(mine['tpot_s'] / truth_tpot - 1):>+7.2%} {mine['cpu_share']:>5.0%} {mine['lag_p99_ms']:>6.2f}"
        )
    if use_aiperf:
        print("\nBeside aiperf (both start their users at once; same engine, same workload, one after the other):")
        print(
            f"{'c':>3} {'ours TTFT':>9} {'aiperf':>8} {'d':>7} {'ours TPOT':>9} {'aiperf':>8} {'d':>7} "
            f"{'ours CPU s':>10} {'aiperf CPU s':>12}"
        )
        for row in rows:
            ref, burst = row["aiperf"], row["ours_burst"]
            if "error" in ref:
                verdicts["reference"] = False
                print(f"{row['concurrency']:>3} aiperf failed: {ref['error'][:300]}")
                continue
            d_ttft = burst["ttft_s"] / ref["ttft_s"] - 1
            d_tpot = burst["tpot_s"] / ref["tpot_s"] - 1
            verdicts["reference"] &= abs(d_ttft) <= REFERENCE_TOLERANCE and abs(d_tpot) <= REFERENCE_TOLERANCE
            cpu = ref["cpu_s"] if ref["cpu_s"] is not None else float("nan")
            print(
                f"{row['concurrency']:>3} {burst['ttft_s'] * 1000:>9.2f} {ref['ttft_s'] * 1000:>8.2f} {d_ttft:>+7.2%} "
                f"{burst['tpot_s'] * 1000:>9.3f} {ref['tpot_s'] * 1000:>8.3f} {d_tpot:>+7.2%} "
                f"{burst['cpu_share'] * burst['wall_s']:>10.1f} {cpu:>12.1f}"
            )
    print("\n(d = ours against the truth, or against aiperf; engine = the engine's own TTFT from its /metrics;")
    print(" CPU = the client's user+sys time over the level's wall time, of one core; lag99 = its event loop, p99)")
    verdict = {True: "PASS", False: "MISS"}
    print(
        f"TTFT and TPOT within {TRUTH_TOLERANCE:.0%} (or 1 ms) of the truth at every level: "
        f"{verdict[verdicts['truth']]}"
    )
    print(
        f"client keeps up (loop lag p99 <= {LAG_LIMIT_MS:g} ms, CPU < 80 % of a core, no errors): "
        f"{verdict[verdicts['client']]}"
    )
    if use_aiperf:
        print(
            f"agrees with aiperf within {REFERENCE_TOLERANCE:.0%} (mean TTFT and TPOT) at every level: "
            f"{'PASS' if verdicts['reference'] else 'MISS'}"
        )
    else:
        print("aiperf: not run (make venv-aiperf, then --aiperf)")
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "verdicts": verdicts, "truth_ms": [args.ttft_ms, args.itl_ms]}, indent=1)
        )
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
