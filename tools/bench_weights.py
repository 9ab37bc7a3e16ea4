#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's speed on sim3 (issue 30): playbooks/weights.yml against one plain copy over SSH between the
same nodes, in the same run.

    flock /tmp/sim.lock tools/bench_weights.py [--rounds 3] [--small 300] [--large 4] [--large-mib 64] [--json FILE]

Needs sim3 running (`make sim-up CLUSTER=sim3`) and .venv; configures the fabric first where it is not (prepare.yml).
`make bench-weights` runs it (under flock /tmp/sim.lock: the sim clusters are shared).

The model directory is generated on the head under /srv/dgxspark-bench/model: --small files of 64 KiB to 1 MiB
(random sizes, seeded) and --large files of --large-mib MiB, random bytes. The profile is sim3's with that
host.weights_path. The head's manifest is hashed once before anything is timed (weights.yml -e weights_report=true).

Timed, each --rounds times, interleaved (time.perf_counter on this machine):

  plain copy   on the head: tar -C DIR -cf - . | ssh root@<worker1's fabric address> tar -C DIR2 -xf -
               (the sim nodes have no rsync: a tar stream over one SSH connection is the closest plain copy; the
               head gets a key of its own for the run, which worker1 accepts (authorized_keys2) until the run ends)
  sync, one    ansible-playbook playbooks/weights.yml, worker1 empty, worker2 already matching
  sync, two    the same with both workers empty

For each sync the playbook's whole wall time (its plan and node_facts round trips included) and the transfer's own
seconds (the weights_sync task's, as it says them) are reported. Ratios: sync one / plain (target <= 1.2) and sync
two / sync one (target <= 1.5), each for the whole playbook and for the transfer alone; medians of the rounds.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAD, W1, W2 = "sim3-head", "sim3-worker1", "sim3-worker2"
ROOT = "/srv/dgxspark-bench"
WEIGHTS = f"{ROOT}/model"
PLAIN = f"{ROOT}/plain"
KEY = "/root/.ssh/dgxspark-bench-key"
MARK = "dgxspark-bench-weights"
EXTRA_KEYS = "/root/.ssh/authorized_keys2"

WRITE = """
import os, random, sys
root, small, large, large_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(30)
for i in range(small):
    path = os.path.join(root, "extra", f"part-{i:04d}.bin")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(os.urandom(rng.randint(64 * 1024, 1024 * 1024)))
for i in range(large):
    with open(os.path.join(root, f"model-{i + 1:05d}-of-{large:05d}.safetensors"), "wb") as out:
        for _ in range(large_mib):
            out.write(os.urandom(1024 * 1024))
with open(os.path.join(root, "config.json"), "w") as out:
    out.write('{"model_type": "bench"}')
"""


def sh(host: str, script: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", "exec", host, "sh", "-c", script], capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        sys.exit(f"{host}: {script!r} failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return proc


def playbook(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "ansible-playbook"), *args, "-i", "inventories/sim3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return time.perf_counter() - start, proc


def transfer_seconds(output: str) -> float:
    """The longest transfer the weights_sync task said ("HOST: N file(s) from SOURCE, ... in S s")."""
    flat = " ".join(output.split())
    found = [float(s) for s in re.findall(r"file\(s\) from sim3-head, .*? in ([\d.]+) s, each SHA-256 checked", flat)]
    if not found:
        sys.exit(f"no transfer said in the output:\n{output[-4000:]}")
    return max(found)


def clean(host: str) -> None:
    sh(host, f"rm -rf {WEIGHTS} {PLAIN} /var/cache/dgxspark-cluster && mkdir -p {WEIGHTS}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=300)
    parser.add_argument("--large", type=int, default=4)
    parser.add_argument("--large-mib", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    for host in (HEAD, W1, W2):
        if sh(host, "true", check=False).returncode != 0:
            sys.exit(f"{host} is not running: make sim-up CLUSTER=sim3 first")
    if "10.99.3.1" not in sh(HEAD, "ip -br addr").stdout:
        print("the fabric is not configured: ansible-playbook playbooks/prepare.yml -i inventories/sim3", flush=True)
        seconds, proc = playbook("playbooks/prepare.yml")
        if proc.returncode != 0:
            sys.exit(proc.stdout[-4000:])
    profile = json.loads((REPO / "inventories" / "sim3" / "serving-profile.json").read_text())
    profile["host"]["weights_path"] = WEIGHTS
    scratch = Path(tempfile.mkdtemp(prefix="bench-weights-"))
    (scratch / "profile.json").write_text(json.dumps(profile))
    given = ["-e", f"dgxspark_profile={scratch / 'profile.json'}", "-e", "weights_progress_every=0"]
    for host in (HEAD, W1, W2):
        sh(host, f"rm -rf {ROOT} /var/cache/dgxspark-cluster && mkdir -p {WEIGHTS}")
    sh(HEAD, f"python3 -c {shlex.quote(WRITE)} {WEIGHTS} {args.small} {args.large} {args.large_mib}")
    size = int(sh(HEAD, f"du -sb {WEIGHTS} | cut -f1").stdout.split()[0])
    files = int(sh(HEAD, f"find {WEIGHTS} -type f | wc -l").stdout.strip())
    print(
        f"model directory: {files} files, {size / 2**20:.1f} MiB ({args.small} small, {args.large} large)", flush=True
    )
    seconds, proc = playbook(
        "playbooks/weights.yml", *given, "-e", "weights_report=true", "-e", "weights_hash_seconds=900"
    )
    if proc.returncode != 0:
        sys.exit(proc.stdout[-4000:])
    # a key of the run's own on the head, accepted by worker1 for the run only (removed after, whatever happens)
    sh(HEAD, f"mkdir -p /root/.ssh && rm -f {KEY} {KEY}.pub && ssh-keygen -q -t ed25519 -N '' -C {MARK} -f {KEY}")
    public = sh(HEAD, f"cat {KEY}.pub").stdout.strip()
    # authorized_keys2, which sshd reads too (the sim's authorized_keys is mounted read-only); made for the run alone
    if sh(W1, f"test -e {EXTRA_KEYS}", check=False).returncode == 0:
        sys.exit(f"{W1}: {EXTRA_KEYS} exists already: not touched; remove it or run on a fresh sim3")
    sh(W1, f"mkdir -p /root/.ssh && echo {shlex.quote(public)} > {EXTRA_KEYS}")
    plain_command = (
        f"mkdir -p {PLAIN} && tar -C {WEIGHTS} -cf - . | ssh -i {KEY} -o BatchMode=yes -o StrictHostKeyChecking=no "
        f"-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@10.99.3.2 'mkdir -p {PLAIN} && tar -C {PLAIN} -xf -'"
    )
    rows: dict[str, list[float]] = {k: [] for k in ("plain", "one", "one_transfer", "two", "two_transfer")}
    try:
        for round_ in range(1, args.rounds + 1):
            sh(W1, f"rm -rf {PLAIN}")
            start = time.perf_counter()
            sh(HEAD, plain_command)
            rows["plain"].append(time.perf_counter() - start)
            sh(W1, f"rm -rf {PLAIN}")
            clean(W1)
            wall, proc = playbook("playbooks/weights.yml", *given)
            if proc.returncode != 0:
                sys.exit(proc.stdout[-4000:])
            rows["one"].append(wall)
            rows["one_transfer"].append(transfer_seconds(proc.stdout))
            clean(W1)
            clean(W2)
            wall, proc = playbook("playbooks/weights.yml", *given)
            if proc.returncode != 0:
                sys.exit(proc.stdout[-4000:])
            rows["two"].append(wall)
            rows["two_transfer"].append(transfer_seconds(proc.stdout))
            print(
                f"round {round_}: plain {rows['plain'][-1]:.2f} s; sync one {rows['one'][-1]:.2f} s (transfer "
                f"{rows['one_transfer'][-1]:.1f} s); sync two {rows['two'][-1]:.2f} s (transfer "
                f"{rows['two_transfer'][-1]:.1f} s)",
                flush=True,
            )
    finally:
        sh(HEAD, f"rm -f {KEY} {KEY}.pub", check=False)
        sh(W1, f"grep -q ' {MARK}$' {EXTRA_KEYS} && rm -f {EXTRA_KEYS}", check=False)
    med = {k: statistics.median(v) for k, v in rows.items()}
    ratios = {
        "one_vs_plain": med["one"] / med["plain"],
        "one_transfer_vs_plain": med["one_transfer"] / med["plain"],
        "two_vs_one": med["two"] / med["one"],
        "two_transfer_vs_one_transfer": med["two_transfer"] / med["one_transfer"],
    }
    print(f"medians of {args.rounds}: " + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()))
    print(
        f"sync one / plain copy: {ratios['one_vs_plain']:.2f}x the whole playbook, "
        f"{ratios['one_transfer_vs_plain']:.2f}x its transfer (target <= 1.2)"
    )
    print(
        f"sync two / sync one:   {ratios['two_vs_one']:.2f}x the whole playbook, "
        f"{ratios['two_transfer_vs_one_transfer']:.2f}x the transfer (target <= 1.5)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"files": files, "bytes": size, "rounds": rows, "medians": med, "ratios": ratios})
        )
    for host in (HEAD, W1, W2):
        sh(host, f"rm -rf {ROOT}", check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
