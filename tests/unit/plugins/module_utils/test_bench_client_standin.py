# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bench client against the stand-in engine (sim/engine) run as a local process on 127.0.0.1.

One engine for the module, ten times faster than the seeds' clock (SIM_ENGINE_TIME_SCALE 0.1 would still be
slow for a unit test: 0.01), tp3's table, seed 000's 1M context. What the sim test (tests/sim/cluster/
test_sim3_seed.py) relies on is checked here first: /tokenize, the needle sized and counted by the server,
refused above max_model_len, and a burst's aggregate.
"""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _bench_client as client
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.seed import burst_summary

ROOT = pathlib.Path(__file__).resolve().parents[4]
SCALE = 0.01


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIM_ENGINE_")}
    env.update(PYTHONPATH=str(ROOT / "sim" / "engine"), SIM_ENGINE_LOAD_SECONDS="0", SIM_ENGINE_TIME_SCALE=str(SCALE))
    logs = tmp_path_factory.mktemp("engine")
    argv = [sys.executable, "-m", "vllm_sim", "serve", "/models/v41-flash-1017", "--served-model-name", "m"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1048576", "--max-num-seqs", "4"]
    with open(logs / "out", "wb") as out, open(logs / "err", "wb") as err:
        process = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the stand-in engine did not serve: {(logs / 'err').read_text()[-2000:]}")
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def test_tokenize_counts_as_usage_does(engine: str) -> None:
    endpoint = client.Endpoint(engine)
    counted = client.count_prompt_tokens(endpoint, "m", "x" * 400)
    # chat: "user: <400 x>\nassistant:" is 417 characters, 105 tokens by the stand-in's rule
    assert counted == {"count": 105, "max_model_len": 1048576}
    assert client.served_max_model_len(endpoint, "m") == 1048576
    assert client.count_prompt_tokens(client.Endpoint("http://127.0.0.1:9"), "m", "x") is None


def test_needle_sized_and_counted_by_the_server(engine: str) -> None:
    needle = client.run_needle(client.Endpoint(engine), "m", 20000, 0.5, seed=3, max_model_len=1048576)
    assert needle["found"] and needle["error"] is None and not needle["refused"]
    assert needle["counted_by"] == "usage" and needle["context_tokens"] == needle["tokenized_tokens"]
    assert abs(needle["context_tokens"] - 20000) <= 40  # within 0.2 % of the requested size
    assert needle["started_at"] <= needle["finished_at"]


def test_needle_above_max_model_len_is_refused_unsent(engine: str) -> None:
    before = _prompt_tokens_total(engine)
    needle = client.run_needle(client.Endpoint(engine), "m", 20000, 0.5, max_model_len=16384)
    assert needle["refused"] and not needle["found"] and needle["started_at"] is None
    assert "exceed max_model_len 16384" in needle["error"]
    assert _prompt_tokens_total(engine) == before


def test_seed_000_needle_on_the_stand_in(engine: str) -> None:
    """The full 443,223-token needle: its real count from the server, found, and fast (87.1 s x 0.01)."""
    started = time.monotonic()
    needle = client.run_needle(client.Endpoint(engine), "m", 443223, 0.5, max_model_len=1048576)
    assert needle["found"] and needle["counted_by"] == "usage"
    assert abs(needle["context_tokens"] - 443223) <= 443223 * 0.002
    # the calibrated prefill (87.1 s scaled) plus the text's handling, which does not scale (well under 1.5 s)
    assert 87.1 * SCALE * 0.97 <= needle["seconds"] <= 87.1 * SCALE + 1.5
    assert time.monotonic() - started < 20


def test_burst_of_four(engine: str) -> None:
    level = client.run_level(client.Endpoint(engine), "m", 4, 4, 128, 256)
    figures = burst_summary({"size": 4, "requests": level["requests"]})
    assert figures["ok"] == 4 and figures["output_tokens"] == 1024
    # at this time scale HTTP outweighs the 0.3 ms ITL: the aggregate's calibration is the sim test's (and
    # sim/engine/README.md's measurement at scale 0.2); here only that it is the tokens over the span
    assert figures["aggregate_tps"] == pytest.approx(1024 / figures["span_s"])


def _prompt_tokens_total(url: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as answer:
        for line in answer.read().decode().splitlines():
            if line.startswith("vllm:prompt_tokens_total"):
                return float(line.split()[-1])
    raise AssertionError("no vllm:prompt_tokens_total")
