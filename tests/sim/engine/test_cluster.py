# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ranks joining on loopback: the head serves only once every rank joined; disagreement hangs, then the
NCCL watchdog kills every rank; a worker whose head goes away dies after the watchdog; SIGTERM is clean."""

from __future__ import annotations

import json
import re
import time
import urllib.request

from engine_helpers import free_port, http_status, wait_healthy

WATCHDOG = 2.0
FAST = {
    "SIM_ENGINE_LOAD_SECONDS": "0.3",
    "SIM_ENGINE_WATCHDOG_SECONDS": str(WATCHDOG),
    "SIM_ENGINE_HEARTBEAT_SECONDS": "0.2",
    "SIM_ENGINE_HEARTBEAT_TIMEOUT_SECONDS": "1",
    "SIM_ENGINE_TIME_SCALE": "0.1",
}
NCCL = re.compile(
    r"\[Rank (\d)\] Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=\d+, OpType=ALLREDUCE, "
    r"NumelIn=1, NumelOut=1, Timeout\(ms\)=2000\) ran for (\d+) milliseconds before timing out\."
)


def rank_args(rank: int, master_port: int, api_port: int, max_num_seqs: int = 4) -> list[str]:
    """What the collection renders for a 3-node tp3 shape, on loopback."""
    args = [
        "/models/v41-flash-1017",
        "--served-model-name",
        "v41-flash-1017",
        "--tensor-parallel-size",
        "3",
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        "3",
        "--node-rank",
        str(rank),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(master_port),
        "--max-model-len",
        "1048576",
        "--max-num-seqs",
        str(max_num_seqs),
        "--max-num-batched-tokens",
        "6144",
        "--kv-cache-memory-bytes",
        "2362232012",
        "--prefix-cache-retention-interval",
        "512",
    ]
    return args + (["--port", str(api_port), "--host", "127.0.0.1"] if rank == 0 else ["--headless"])


def post(port: int, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_three_ranks_join_head_serves_after_all_then_workers_die_when_head_goes(engines):
    mport, aport = free_port(), free_port()
    head = engines(rank_args(0, mport, aport), FAST, "rank0")
    w1 = engines(rank_args(1, mport, aport), FAST, "rank1")
    time.sleep(1.2)  # well past the load time: still not serving, rank 2 is missing
    assert http_status(aport) is None
    assert head.alive() and w1.alive()
    assert "rank 1 joined" in head.out() and "Application startup complete" not in head.out()

    w2 = engines(rank_args(2, mport, aport), FAST, "rank2")
    wait_healthy(aport, head, timeout=10)
    ask = [{"role": "user", "content": "Count from 1 to 10."}]
    r = post(aport, "/v1/chat/completions", {"model": "v41-flash-1017", "max_tokens": 50, "messages": ask})
    assert r["choices"][0]["message"]["content"] == "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"

    head.term()
    assert head.wait(5) == 0
    gone = time.monotonic()
    time.sleep(WATCHDOG / 2)
    assert w1.alive() and w2.alive()  # a hang first, as NCCL's
    for rank, w in ((1, w1), (2, w2)):
        assert w.wait(WATCHDOG + 5) == 134
        m = NCCL.search(w.err())
        assert m and m.group(1) == str(rank), w.err()
        assert int(m.group(2)) >= WATCHDOG * 1000
        assert "terminate called after throwing an instance of 'c10::DistBackendError'" in w.err()
    assert time.monotonic() - gone >= WATCHDOG * 0.9


def test_ranks_that_disagree_hang_without_serving_until_the_watchdog_kills_every_rank(engines):
    mport, aport = free_port(), free_port()
    ranks = [
        engines(rank_args(0, mport, aport), FAST, "rank0"),
        engines(rank_args(1, mport, aport), FAST, "rank1"),
        engines(rank_args(2, mport, aport, max_num_seqs=6), FAST, "rank2"),  # a per-host override gone wrong
    ]
    started = time.monotonic()
    while time.monotonic() - started < 1.8:  # joined and loaded by now, then hanging
        assert http_status(aport) is None
        assert all(r.alive() for r in ranks)
        time.sleep(0.05)
    for rank, proc in enumerate(ranks):
        assert proc.wait(WATCHDOG + 6) == 134
        err = proc.err()
        m = NCCL.search(err)
        assert m and m.group(1) == str(rank), err
        assert "Application startup complete" not in proc.out()
    assert "max_num_seqs: rank 0 = 4, rank 2 = 6" in ranks[0].err()


def test_worker_without_a_head_gives_up_with_torchs_connect_error(engines):
    w = engines(rank_args(1, free_port(), 0), {**FAST, "SIM_ENGINE_JOIN_TIMEOUT_SECONDS": "0.8"}, "lonely")
    assert w.wait(10) == 1
    expected = "DistNetworkError: The client socket has timed out after 800ms while trying to connect to (127.0.0.1,"
    assert expected in w.err()


def _rss_anon_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    return 0.0


def test_sigterm_stops_cleanly_releasing_memory_and_port(engines):
    aport = free_port()
    e = engines(
        ["/models/sim", "--port", str(aport), "--host", "127.0.0.1", "--max-model-len", "4096"],
        {"SIM_ENGINE_MEMORY_MIB": "160", "SIM_ENGINE_LOAD_PEAK_MIB": "64", "SIM_ENGINE_LOAD_SECONDS": "0.4"},
        "single",
    )
    wait_healthy(aport, e)
    assert _rss_anon_mib(e.pid) >= 160  # touched pages, not just mapped (the load peak is gone again)
    assert _rss_anon_mib(e.pid) < 160 + 64
    # a request in flight when SIGTERM arrives
    req = urllib.request.Request(
        f"http://127.0.0.1:{aport}/v1/completions",
        data=json.dumps({"prompt": "x", "max_tokens": 500, "stream": True}).encode(),
        headers={"content-type": "application/json"},
    )
    stream = urllib.request.urlopen(req, timeout=10)
    stream.readline()
    e.term()
    assert e.wait(5) == 0
    stream.close()
    assert http_status(aport) is None
    assert "stopped cleanly" in e.out()

    # SIGTERM during the load (before serving) is clean too
    e2 = engines(
        ["/models/sim", "--port", str(free_port()), "--host", "127.0.0.1"], {"SIM_ENGINE_LOAD_SECONDS": "30"}, "loading"
    )
    # its SIGTERM handler is set right after the timing line (a loaded machine may take seconds to get there)
    deadline = time.monotonic() + 20
    while "timing table" not in e2.out() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)
    e2.term()
    assert e2.wait(5) == 0


def test_a_rank_whose_nccl_interface_is_missing_fails_and_the_rest_hang_until_the_watchdog(engines):
    mport, aport = free_port(), free_port()
    head = engines(rank_args(0, mport, aport), {**FAST, "NCCL_SOCKET_IFNAME": "lo"}, "rank0")
    w1 = engines(rank_args(1, mport, aport), {**FAST, "NCCL_SOCKET_IFNAME": "lo"}, "rank1")
    w2 = engines(rank_args(2, mport, aport), {**FAST, "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1"}, "rank2")
    assert w2.wait(10) == 1
    assert "NCCL WARN Bootstrap : no socket interface found" in w2.err()
    assert http_status(aport) is None
    for rank, proc in ((0, head), (1, w1)):
        assert proc.wait(WATCHDOG + 6) == 134
        assert NCCL.search(proc.err()).group(1) == str(rank)


def test_nccl_interface_matching_follows_nccls_syntax():
    from vllm_sim import nccl

    names = ["docker0", "eth0", "fab0", "fab1", "lo"]
    assert nccl.matches("fab", names) == ["fab0", "fab1"]
    assert nccl.matches("^docker,lo", names) == ["eth0", "fab0", "fab1"]
    assert nccl.matches("=fab", names) == []
    assert nccl.check({"NCCL_NET": "IB"}, ib_root="/nonexistent").startswith(nccl._prefix().split(":")[0])
    assert nccl.check({"NCCL_NET": "IB", "SIM_ENGINE_NCCL_CHECKS": "0"}) is None
