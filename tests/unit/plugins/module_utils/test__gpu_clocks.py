# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU clock-latch check on real nvidia-smi output (tests/unit/fixtures/gpu_clocks/README.md)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._gpu_clocks import (
    LATCHED,
    NOT_JUDGED,
    PASS,
    judge_clock_latch,
    judge_gpu,
)
from ansible_collections.dgxspark.cluster.plugins.module_utils._nvidia_smi import parse_header, parse_query_csv
from ansible_collections.dgxspark.cluster.plugins.module_utils._procfs import parse_modules
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import sample_body

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "gpu_clocks"
IDLE = FIXTURES / "h200-idle.csv"
LOAD = FIXTURES / "h200-load-noheader.csv"


def h200_load_samples() -> list[list[dict[str, Any]]]:
    """The six samples under load, each one query (one device), with the idle query's header."""
    fields = parse_header(IDLE.read_text().splitlines()[0])
    return [parse_query_csv(line, fields)[0] for line in LOAD.read_text().splitlines() if line.strip()]


def h200_idle() -> list[dict[str, Any]]:
    return parse_query_csv(IDLE.read_text())[0]


def gb10(sm: int, utilization: int | None) -> dict[str, Any]:
    """A GB10 device as node_facts reads it: max 3003 MHz (colonel-otto's sample), SM and utilization given."""
    return {
        "index": 0,
        "name": "NVIDIA GB10",
        "clocks_sm_mhz": sm,
        "clocks_max_sm_mhz": 3003,
        "utilization_gpu_pct": utilization,
    }


def test_real_h200_under_load_passes() -> None:
    samples = h200_load_samples()
    assert [s[0]["clocks_sm_mhz"] for s in samples] == [1455, 1425, 1425, 1425, 1425, 1410]
    assert {s[0]["utilization_gpu_pct"] for s in samples} == {100}
    verdict = judge_clock_latch(samples)
    assert verdict["verdict"] == PASS
    (gpu,) = verdict["gpus"]
    assert gpu["loaded_samples"] == 6 and gpu["sm_mhz"] == 1425 and gpu["max_sm_mhz"] == 1980
    assert gpu["ratio"] == pytest.approx(1425 / 1980, abs=1e-4)
    assert "SM clock 1425 MHz of 1980 MHz (72%) over 6 loaded sample(s)" in gpu["message"]
    assert "not visible to nvidia-smi" in gpu["message"]


def test_real_h200_idle_is_not_judged() -> None:
    (device,) = h200_idle()
    assert (device["clocks_sm_mhz"], device["clocks_max_sm_mhz"], device["utilization_gpu_pct"]) == (345, 1980, 0)
    verdict = judge_clock_latch([[device]])
    assert verdict["verdict"] == NOT_JUDGED
    assert "not under load (utilization.gpu 0 %" in verdict["summary"]


def test_idle_sample_then_load_judges_only_the_loaded_ones() -> None:
    verdict = judge_clock_latch([h200_idle(), *h200_load_samples()])
    assert (
        verdict["verdict"] == PASS and verdict["gpus"][0]["samples"] == 7 and verdict["gpus"][0]["loaded_samples"] == 6
    )


@pytest.mark.parametrize(
    ("why", "samples", "expected", "sm"),
    [
        # tonyd2wild issue 1: a serving GB10 holds 2164-2190 MHz of 3003
        ("gb10 serving, healthy", [gb10(2164, 98), gb10(2190, 97), gb10(2177, 99)], PASS, 2177),
        # a GB10 that did not boost under load (Trap 124's description; the MHz are ours)
        ("gb10 latched under load", [gb10(1100, 99), gb10(1110, 100), gb10(1105, 98)], LATCHED, 1105),
        ("one transition sample does not decide", [gb10(1100, 99), gb10(2170, 99), gb10(2180, 99)], PASS, 2170),
        # colonel-otto's idle GB10: 2522 of 3003 at no load; judged only under load
        ("gb10 idle high clock", [gb10(2522, 0)], NOT_JUDGED, None),
        ("no utilization reported", [gb10(2522, None)], NOT_JUDGED, None),
        ("at the threshold", [gb10(1802, 90)], PASS, 1802),
        ("just under it", [gb10(1801, 90)], LATCHED, 1801),
    ],
)
def test_gb10_table(why: str, samples: list[dict[str, Any]], expected: str, sm: int | None) -> None:
    gpu = judge_gpu(samples)
    assert gpu["verdict"] == expected, why
    assert gpu["sm_mhz"] == sm


def test_latched_message_says_what_to_do() -> None:
    verdict = judge_clock_latch([[gb10(1100, 99)]])
    assert verdict["verdict"] == LATCHED
    assert "SM clock 1100 MHz of 3003 MHz (37%)" in verdict["summary"]
    assert "full power cycle (AC off)" in verdict["summary"]


def test_no_maximum_cannot_be_judged_and_no_sample_is_said() -> None:
    fields = ["name", "clocks.current.graphics", "clocks.max.graphics", "temperature.gpu", "power.draw"]
    body = sample_body("nvidia-smi-query-gpu.gb10.colonel-otto-gpu_clocks-max-3003MHz.csv.txt")
    devices, _rest = parse_query_csv(body)
    assert parse_header(body.splitlines()[0]) == fields
    assert judge_gpu(devices)["message"].startswith("nvidia-smi gives no clocks.max.sm")
    assert judge_clock_latch([])["summary"] == "no GPU sample: the clock-latch check did not run"
    with pytest.raises(ValueError, match="no sample"):
        judge_gpu([])


def test_real_h200_node_facts_and_the_modules_line_it_broke() -> None:
    facts = json.loads((FIXTURES / "h200-node-facts.json").read_text())
    (device,) = facts["gpu"]["devices"]
    assert device["name"] == "NVIDIA H200" and device["clocks_max_sm_mhz"] == 1980
    assert facts["problems"][0]["message"].startswith("not a /proc/modules line: 'nvidia_uvm 1875968 - - Live")
    (module,) = parse_modules("nvidia_uvm 1875968 - - Live 0xffffffffc080c000 (O)\n")
    assert (module.name, module.size, module.refcount, module.used_by, module.state) == (
        "nvidia_uvm",
        1875968,
        None,
        (),
        "Live",
    )
