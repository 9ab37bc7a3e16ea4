# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Token timing follows the calibration table: measured TTFT and ITL within 10 % of seed 002's TP8-300K
figures at concurrency 1 and 4, and the model itself (interpolation, shape choice) in-process.

Noise: the engine schedules every token at an absolute deadline on its monotonic clock, so the only
noise is delivery (HTTP, the client's threads, the 2-core machine). TTFT is the median over the
requests of a level and ITL is each request's TPOT = (end - TTFT) / (N - 1) averaged, which absorbs
single late chunks. A level that misses is measured once more (a busy machine can stall a whole
request); both attempts are reported when it still fails. The margin is the issue's 10 %.
"""

from __future__ import annotations

import statistics
import threading
import time

import openai
import pytest
from engine_helpers import free_port, http_get, wait_healthy
from vllm_sim import calibration

TOKENS = 32  # short, but 31 inter-token gaps per request


def measure(client: openai.OpenAI, concurrency: int, rounds: int) -> tuple[float, float]:
    """(median TTFT, mean TPOT) in ms over ``rounds`` bursts of ``concurrency`` streaming requests."""
    ttfts: list[float] = []
    tpots: list[float] = []

    def one(barrier: threading.Barrier):
        barrier.wait()
        t0 = time.perf_counter()
        first = last = None
        n = None
        stream = client.completions.create(
            model="sim",
            prompt="Benchmark prompt.",
            max_tokens=TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            now = time.perf_counter()
            if chunk.choices and chunk.choices[0].text:
                first = first or now
                last = now
            if chunk.usage:
                n = chunk.usage.completion_tokens
        ttfts.append((first - t0) * 1000)
        tpots.append((last - first) / (n - 1) * 1000)

    for _round in range(rounds):
        barrier = threading.Barrier(concurrency)
        threads = [threading.Thread(target=one, args=(barrier,)) for _i in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(ttfts) == concurrency * rounds
    return statistics.median(ttfts), statistics.fmean(tpots)


def test_tp8_300k_timing_within_10_percent_at_concurrency_1_and_4(engines):
    port = free_port()
    e = engines(
        [
            "/models/deepseek-v4.1-flash",
            "--served-model-name",
            "sim",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tensor-parallel-size",
            "8",
            "--max-model-len",
            "300000",
            "--max-num-seqs",
            "8",
        ],
        {},
        "tp8",
    )
    wait_healthy(port, e)
    assert 'shape="tp8-300k"' in http_get(port, "/metrics")  # derived from tp 8 and max-model-len 300000
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=30)
    table = calibration.SHAPES["tp8-300k"]["levels"]
    report = []
    for c, rounds in ((1, 3), (4, 2)):
        want_ttft, want_itl = table[c]
        attempts = []
        for _attempt in range(2):
            ttft, itl = measure(client, c, rounds)
            attempts.append((round(ttft, 1), round(itl, 2)))
            ok = abs(ttft / want_ttft - 1) <= 0.10 and abs(itl / want_itl - 1) <= 0.10
            if ok:
                break
        report.append(f"c={c}: table TTFT {want_ttft} ms ITL {want_itl} ms; measured (TTFT, ITL) {attempts}")
        assert ok, "\n".join(report)
    print("\n".join(report))


def test_interpolation_extrapolation_and_shape_choice():
    t = calibration.Timing("tp8-300k", calibration.SHAPES["tp8-300k"]["levels"], 5100.0, 1.0)
    assert t.itl(1) == pytest.approx(0.02667)
    assert t.itl(3) == pytest.approx((0.03387 + 0.04816) / 2)  # between levels 2 and 4
    assert t.ttft(16) > t.ttft(8) and t.itl(16) == pytest.approx(0.07112 + (0.07112 - 0.04816) * 2)
    assert t.prefill_extra(512) == 0 and t.prefill_extra(5612) == pytest.approx(1.0)
    assert calibration.shape_for(3, 1048576) == "tp3"
    assert calibration.shape_for(4, 1048576) == "tp4"
    assert calibration.shape_for(8, 300000) == "tp8-300k"
    assert calibration.shape_for(8, 1048576) == "tp8-1m"
    tp3 = calibration.SHAPES["tp3"]["levels"]
    assert 1000 / tp3[1][1] == pytest.approx(53.9, rel=1e-3)  # seed 000: single stream
    assert 4 * 1000 / tp3[4][1] == pytest.approx(137.6, rel=1e-3)  # seed 000: aggregate at 4
