#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine; install and start one if not.
#
# Usage: sim/cluster/ensure-docker.sh
#
# Idempotent and safe to run concurrently (it takes a lock):
#   1. `docker info` already works: nothing to do.
#   2. no dockerd binary: install Debian's docker.io with apt-get (needs root and the Debian archive).
#   3. dockerd not running: start it in the background (log: /var/log/dockerd-sim.log), then wait
#      until `docker info` answers (DOCKER_WAIT_SECONDS, default 60).
# Nothing starts dockerd for you on a machine of this kind (no systemd as PID 1), so `make sim-up`
# and `make test` call this first. Exits non-zero with a message saying what is wrong otherwise.
set -euo pipefail

wait_seconds=${DOCKER_WAIT_SECONDS:-60}
log=${DOCKERD_LOG:-/var/log/dockerd-sim.log}
lock=${DOCKER_ENSURE_LOCK:-/run/lock/dgxspark-sim-ensure-docker.lock}

say() { printf 'ensure-docker: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

engine_ok() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

command -v docker >/dev/null 2>&1 || need_cli=1
if [[ -z ${need_cli:-} ]] && engine_ok; then
    exit 0
fi

mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock -w 600 9 || die "timed out waiting for another ensure-docker run (lock $lock)"
# Another run may have finished the job while we waited for the lock.
if command -v docker >/dev/null 2>&1 && engine_ok; then
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    [[ $(id -u) == 0 ]] || die "dockerd is not installed and this is not root: run 'apt-get install -y docker.io' as root"
    command -v apt-get >/dev/null 2>&1 || die "dockerd is not installed and there is no apt-get here: install a Docker engine"
    say "installing Debian's docker.io (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed (is the Debian archive reachable?)"
    # policy-rc.d: no init system here to start it; we start dockerd ourselves below.
    apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null ||
        die "apt-get install docker.io failed"
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but no dockerd on PATH"
fi

if pgrep -x dockerd >/dev/null 2>&1; then
    say "dockerd is running (pid $(pgrep -x dockerd | head -1)) but 'docker info' fails yet; waiting"
else
    [[ $(id -u) == 0 ]] || die "dockerd is not running and this is not root: start it as root"
    say "starting dockerd in the background (log: $log)"
    mkdir -p "$(dirname "$log")"
    # setsid + nohup: dockerd outlives this script and the make that called it.
    setsid nohup dockerd >>"$log" 2>&1 </dev/null &
    disown || true
fi

for ((i = 0; i < wait_seconds; i++)); do
    if engine_ok; then
        say "engine ready: $(docker info --format 'Docker {{.ServerVersion}}, storage {{.Driver}}, cgroup v{{.CgroupVersion}} ({{.CgroupDriver}})') after ${i}s"
        exit 0
    fi
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        say "dockerd exited; last lines of $log:"
        tail -n 20 "$log" >&2 || true
        die "dockerd did not stay up"
    fi
    sleep 1
done
say "last lines of $log:"
tail -n 20 "$log" >&2 || true
die "'docker info' still fails after ${wait_seconds}s"
