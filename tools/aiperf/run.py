#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run NVIDIA aiperf (the reference benchmark client) once and print one normalized JSON object.

    tools/aiperf/run.py --url http://127.0.0.1:18123 --model m --concurrency 8 --requests 32 \\
        --prompt-tokens 128 --output-tokens 64 [--warmup 8] --out /tmp/aiperf-c8

Needs `make venv-aiperf` (.venv-aiperf/bin/aiperf and the offline tokenizer
.venv-aiperf/vllm-sim-tokenizer/); this script itself is standard library only and runs under any
Python 3.11+ (it calls aiperf as a subprocess). tools/aiperf/README.md has the details.

What it runs: `aiperf profile` against the OpenAI chat completions endpoint (`--endpoint-type chat
--streaming`), concurrency mode (`--concurrency C --request-count N`, plus `--warmup-request-count
W`), synthetic prompts of P tokens (`--isl P --isl-stddev 0`, measured with the local tokenizer) and
a fixed output length: `max_tokens = O` (`--osl O --osl-stddev 0 --use-legacy-max-tokens`) with
`ignore_eos: true` and `min_tokens: O` in every request (`--extra-inputs`). Token counts come from
the server's `usage` (`--use-server-token-count`, which also asks for
`stream_options.include_usage`), not from the tokenizer. No dashboard, server-metrics scraping,
GPU telemetry or plots (`--ui-type none --no-server-metrics --no-gpu-telemetry`).

What it reads: DIR/artifacts/profile_export_aiperf.json (aiperf's summary export, schema 1.4 in
aiperf 0.13.0): per metric an object with "unit" and "avg", and for per-request metrics also
"p50", "p90", "p99", ... The console table (DIR/aiperf.log) is not parsed.

    ttft_ms                           <- time_to_first_token          (ms; first content chunk - request start)
    itl_ms                            <- inter_token_latency          (ms; per request (latency - TTFT) / (OSL - 1))
    request_latency_ms                <- request_latency              (ms)
    output_token_throughput_per_user  <- output_token_throughput_per_user (tokens/s/user; per request 1000 / ITL)
    output_token_throughput           <- output_token_throughput.avg  (tokens/s; all output tokens / benchmark duration)
    request_throughput                <- request_throughput.avg       (requests/s)
    errors                            <- error_request_count.avg, else the counts in error_summary
    aiperf.prompt_tokens_mean         <- usage_prompt_tokens.avg      (server's count: P + the chat rendering)
    aiperf.output_tokens_mean         <- output_sequence_length.avg   (server's count; should be O)
    aiperf.benchmark_duration_s       <- benchmark_duration.avg       (profiling phase only)
    aiperf.effective_concurrency      <- effective_concurrency.avg    (time-weighted requests in flight)
    aiperf.credit_to_start_latency_ms <- credit_to_start_latency.avg  (slot granted -> HTTP request sent:
                                         aiperf's own lag, outside TTFT; large = aiperf not keeping up)

wall_s is the wall time of the whole `aiperf profile` process (start-up, warmup, profiling, export);
client_cpu_s is user + system CPU of aiperf and every child process it waited for
(resource.getrusage(RUSAGE_CHILDREN) after minus before).

Exit status: 0 with the JSON on stdout; 1 when aiperf failed (the reason and the tail of its log on
stderr; the JSON still on stdout if it wrote its export); 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AIPERF_VENV = REPO / ".venv-aiperf"
DEFAULT_AIPERF = AIPERF_VENV / "bin" / "aiperf"
DEFAULT_TOKENIZER = AIPERF_VENV / "vllm-sim-tokenizer"
EXPORT = "profile_export_aiperf.json"
STATS = {"mean": "avg", "p50": "p50", "p90": "p90", "p99": "p99"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Run aiperf profile once (chat, streaming, fixed output length) and print one JSON object.",
        epilog="Extra aiperf options go after `--`, e.g. -- --workers-max 2",
    )
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:18123")
    p.add_argument("--model", required=True, help="served model name")
    p.add_argument("--concurrency", type=int, required=True, help="requests in flight")
    p.add_argument("--requests", type=int, required=True, help="requests measured (after the warmup)")
    p.add_argument("--prompt-tokens", type=int, required=True, help="prompt length, in the tokenizer's tokens")
    p.add_argument("--output-tokens", type=int, required=True, help="max_tokens = min_tokens, ignore_eos")
    p.add_argument("--warmup", type=int, default=0, help="warmup requests before measuring (default 0)")
    p.add_argument("--out", type=Path, required=True, help="directory for aiperf's artifacts, log and result.json")
    p.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER), help="tokenizer path or name (default: %(default)s)")
    p.add_argument("--aiperf", default=str(DEFAULT_AIPERF), help="aiperf executable (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="aiperf --random-seed (same prompts every run; default 1)")
    p.add_argument("--api-key", default=None, help="bearer token, if the server wants one")
    p.add_argument("--timeout", type=float, default=None, help="kill aiperf after this many seconds")
    p.add_argument(
        "--pace-hz",
        type=float,
        default=None,
        help="issue at most HZ requests/s (--request-rate HZ --arrival-pattern constant) on top of the "
        "concurrency cap, instead of aiperf's stock concurrency mode, whose timing manager polls for a "
        "free slot in a busy loop (about 0.6 core); e.g. 1000 (default: stock mode)",
    )
    p.add_argument("extra", nargs="*", help="more aiperf profile options (after --)")
    args = p.parse_args(argv)
    for name in ("concurrency", "requests", "prompt_tokens", "output_tokens"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.output_tokens < 2:
        p.error("--output-tokens must be >= 2 (aiperf has no ITL for 1-token answers)")
    if args.warmup < 0:
        p.error("--warmup must be >= 0")
    if args.pace_hz is not None and args.pace_hz <= 0:
        p.error("--pace-hz must be > 0")
    return args


def aiperf_command(args: argparse.Namespace, artifacts: Path) -> list[str]:
    o = str(args.output_tokens)
    cmd = [
        args.aiperf, "profile",
        "--model", args.model,
        "--tokenizer", args.tokenizer,
        "--url", args.url,
        "--endpoint-type", "chat",
        "--streaming",
        "--concurrency", str(args.concurrency),
        "--request-count", str(args.requests),
        "--isl", str(args.prompt_tokens), "--isl-stddev", "0",
        "--osl", o, "--osl-stddev", "0",
        "--use-legacy-max-tokens",
        "--extra-inputs", "ignore_eos:true",
        "--extra-inputs", f"min_tokens:{o}",
        "--use-server-token-count",
        "--random-seed", str(args.seed),
        "--ui-type", "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--artifact-dir", str(artifacts),
    ]  # fmt: skip
    if args.warmup:
        cmd += ["--warmup-request-count", str(args.warmup)]
    if args.pace_hz:
        cmd += ["--request-rate", f"{args.pace_hz:g}", "--arrival-pattern", "constant"]
    if args.api_key:
        cmd += ["--api-key", args.api_key]
    return cmd + list(args.extra)


def aiperf_env() -> dict[str, str]:
    env = dict(os.environ)
    # aiperf 0.13.0 resolves a tokenizer through snapshot_download(local_files_only=True) when
    # HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE is set, and that rejects a local directory
    # ("Repo id must be in the form ..."). Left unset, a local path is loaded as is (no hub call).
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("NO_COLOR", "1")
    env.setdefault("COLUMNS", "160")
    return env


def stats(export: dict, tag: str) -> dict[str, float] | None:
    metric = export.get(tag)
    if not isinstance(metric, dict) or "avg" not in metric:
        return None
    return {key: float(metric[src]) for key, src in STATS.items() if src in metric}


def scalar(export: dict, tag: str) -> float | None:
    metric = export.get(tag)
    if isinstance(metric, dict) and "avg" in metric:
        return float(metric["avg"])
    return None


def error_count(export: dict) -> int:
    count = scalar(export, "error_request_count")
    if count is not None:
        return int(count)
    return sum(int(e.get("count", 0)) for e in export.get("error_summary") or [] if isinstance(e, dict))


def aiperf_version(aiperf: str) -> str:
    # aiperf lives in its own venv next to its python: ask its metadata rather than import it here.
    python = Path(aiperf).parent / "python"
    try:
        out = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('aiperf'))"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def normalize(
    args: argparse.Namespace, export: dict, version: str, wall_s: float, cpu_s: float, export_path: Path
) -> dict:
    result = {
        "client": f"aiperf {version}",
        "concurrency": args.concurrency,
        "requests": int(scalar(export, "request_count") or 0),
        "ttft_ms": stats(export, "time_to_first_token"),
        "itl_ms": stats(export, "inter_token_latency"),
        "request_latency_ms": stats(export, "request_latency"),
    }
    per_user = stats(export, "output_token_throughput_per_user")
    if per_user is not None:
        result["output_token_throughput_per_user"] = per_user
    result.update(
        {
            "output_token_throughput": scalar(export, "output_token_throughput"),
            "request_throughput": scalar(export, "request_throughput"),
            "errors": error_count(export),
            "wall_s": round(wall_s, 3),
            "client_cpu_s": round(cpu_s, 3),
            "aiperf": {
                "export": str(export_path),
                "requests_asked": args.requests,
                "warmup": args.warmup,
                "pace_hz": args.pace_hz,
                "prompt_tokens_asked": args.prompt_tokens,
                "prompt_tokens_mean": scalar(export, "usage_prompt_tokens"),
                "output_tokens_asked": args.output_tokens,
                "output_tokens_mean": scalar(export, "output_sequence_length"),
                "benchmark_duration_s": scalar(export, "benchmark_duration"),
                "effective_concurrency": scalar(export, "effective_concurrency"),
                "credit_to_start_latency_ms": scalar(export, "credit_to_start_latency"),
                "complete": bool(export.get("is_complete")) and not export.get("was_cancelled"),
            },
        }
    )
    return result


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM aiperf's process group, SIGKILL what is left after 10 s, and reap aiperf."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not Path(args.aiperf).is_file():
        print(f"run.py: {args.aiperf} not found: run `make venv-aiperf` first (or pass --aiperf)", file=sys.stderr)
        return 1
    if args.tokenizer == str(DEFAULT_TOKENIZER) and not (DEFAULT_TOKENIZER / "tokenizer.json").is_file():
        print(f"run.py: {DEFAULT_TOKENIZER}/tokenizer.json not found: run `make venv-aiperf`", file=sys.stderr)
        return 1

    out = args.out.resolve()
    artifacts = out / "artifacts"
    out.mkdir(parents=True, exist_ok=True)
    export_path = artifacts / EXPORT
    if export_path.exists():
        export_path.unlink()  # never report a previous run's numbers
    cmd = aiperf_command(args, artifacts)
    (out / "command.json").write_text(json.dumps(cmd, indent=1) + "\n")
    log_path = out / "aiperf.log"

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    with open(log_path, "wb") as log:
        # Its own process group, so that a timeout (or Ctrl-C) stops aiperf's services too.
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=aiperf_env(),
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=args.timeout)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as e:
            stop_group(proc)
            if isinstance(e, KeyboardInterrupt):
                raise
            rc = None
    wall_s = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    failed = rc != 0 or not export_path.is_file()
    if failed:
        why = f"timed out after {args.timeout} s" if rc is None else f"exited {rc}"
        if rc == 0:
            why = f"exited 0 but wrote no {export_path}"
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        print(f"run.py: aiperf {why} (log: {log_path})\n" + "\n".join(tail), file=sys.stderr)
        if not export_path.is_file():
            return 1

    # An export from this run (a previous one was removed above), even if aiperf then failed.
    export = json.loads(export_path.read_text())
    version = export.get("aiperf_version") or aiperf_version(args.aiperf)
    result = normalize(args, export, version, wall_s, cpu_s, export_path)
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
