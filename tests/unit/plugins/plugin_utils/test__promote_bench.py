# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""promote.yml's benchmark parameters: the promoted release's run's, read from its results; given values that
differ refused, naming each, unless overridden."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.release import promote_bench_parameters
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import DEFAULT_SLOS, parse_slos
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.promote_bench import (
    OVERRIDE_VAR,
    PARAMETERS,
    parameters,
    stored,
)
from ansible_collections.dgxspark.cluster.tests.unit.plugins.test_bench import document as bench_document
from ansible_collections.dgxspark.cluster.tests.unit.plugins.test_bench import request as bench_request

WORKLOAD = {
    "prompt_tokens": 128,
    "max_tokens": 128,
    "requests_per_level": 40,
    "levels": [1, 2, 4],
    "stream": True,
    "api": "chat",
    "warmup_requests": 4,
    "ramp_s": 0,
    "bursts": [4, 6],
    "burst_max_tokens": 512,
    "progress_every": 25,
}
STORED = {
    "dgxspark_bench_levels": [1, 2, 4],
    "dgxspark_bench_requests": 40,
    "dgxspark_bench_prompt_tokens": 128,
    "dgxspark_bench_max_tokens": 128,
    "dgxspark_bench_warmup": 4,
    "dgxspark_bench_ramp": 0,
    "dgxspark_bench_bursts": [4, 6],
    "dgxspark_bench_burst_max_tokens": 512,
    "dgxspark_bench_api": "chat",
    "dgxspark_bench_needle_tokens": 8192,
    "dgxspark_bench_needle_depth": 0.5,
    "dgxspark_bench_slos": parse_slos(DEFAULT_SLOS),
}


def results(needle: dict[str, Any] | None = None, **workload: Any) -> dict[str, Any]:
    return {
        "identity": {"started_at": "2026-12-01T10:00:00Z", "workload": {**WORKLOAD, **workload}},
        "needle": {"requested_tokens": 8192, "depth": 0.5, "found": True} if needle is None else needle,
        "slos": parse_slos(DEFAULT_SLOS),
    }


def test_every_parameter_is_read_from_the_stored_run() -> None:
    assert stored(results()) == STORED
    assert set(STORED) == set(PARAMETERS)


def test_nothing_given_runs_the_stored_run_silently() -> None:
    out = parameters(results(), dict.fromkeys(PARAMETERS))
    assert out["vars"] == STORED and out["differ"] == [] and out["refused"] is False and out["refusal"] == ""
    assert out["line"].startswith("the candidate's benchmark takes the promoted release's run's parameters")
    assert "requests 40" in out["line"] and "levels [1, 2, 4]" in out["line"]


@pytest.mark.parametrize(
    "given",
    [
        {"dgxspark_bench_requests": "40", "dgxspark_bench_levels": "[1, 2, 4]"},  # -e key=value gives text
        {"dgxspark_bench_requests": 40.0, "dgxspark_bench_ramp": "0", "dgxspark_bench_needle_depth": 0.5},
        {
            "dgxspark_bench_slos": [{"metric": "ttft_ms", "op": "<=", "threshold": 1000.0, "percentile": 90}]
            + [{"metric": "tps_user", "op": ">=", "threshold": 20, "percentile": 10}]
        },
        {"dgxspark_bench_api": "chat", "dgxspark_bench_bursts": [4, 6]},
    ],
    ids=["text", "numbers", "slos", "lists"],
)
def test_the_same_values_given_are_no_difference(given: dict[str, Any]) -> None:
    out = parameters(results(), given)
    assert out["differ"] == [] and not out["refused"] and out["vars"] == STORED


@pytest.mark.parametrize(
    "given,named",
    [
        ({"dgxspark_bench_requests": 39}, ["dgxspark_bench_requests: given 39, the promoted run's 40"]),
        ({"dgxspark_bench_requests": "41"}, ["dgxspark_bench_requests: given 41, the promoted run's 40"]),
        ({"dgxspark_bench_levels": [1, 2]}, ["dgxspark_bench_levels: given [1, 2], the promoted run's [1, 2, 4]"]),
        (
            {"dgxspark_bench_max_tokens": 256, "dgxspark_bench_warmup": 8},
            [
                "dgxspark_bench_max_tokens: given 256, the promoted run's 128",
                "dgxspark_bench_warmup: given 8, the promoted run's 4",
            ],
        ),
        ({"dgxspark_bench_needle_tokens": 0}, ["dgxspark_bench_needle_tokens: given 0, the promoted run's 8192"]),
        ({"dgxspark_bench_needle_depth": 0.25}, ["dgxspark_bench_needle_depth: given 0.25, the promoted run's 0.5"]),
    ],
    ids=["one fewer", "one more as text", "levels", "two", "needle off", "needle depth"],
)
def test_a_value_given_that_differs_is_refused_naming_each(given: dict[str, Any], named: list[str]) -> None:
    out = parameters(results(), given)
    assert out["differ"] == named and out["refused"] is True
    assert out["vars"] == STORED  # never run: the stored values stand
    for line in named:
        assert line in out["refusal"]
    assert f"-e {OVERRIDE_VAR}=true" in out["refusal"] and "nothing was touched" in out["refusal"]


def test_override_runs_the_given_values_and_says_so() -> None:
    out = parameters(results(), {"dgxspark_bench_requests": "200", "dgxspark_bench_levels": None}, override=True)
    assert out["refused"] is False and out["refusal"] == ""
    assert out["vars"] == {**STORED, "dgxspark_bench_requests": 200}
    assert out["differ"] == ["dgxspark_bench_requests: given 200, the promoted run's 40"]
    assert OVERRIDE_VAR in out["line"]


def test_a_run_without_the_needle_or_some_parameters_leaves_them_out() -> None:
    older = results(needle={})
    older["needle"] = None
    del older["identity"]["workload"]["bursts"]
    del older["slos"]
    found = stored(older)
    assert found["dgxspark_bench_needle_tokens"] == 0 and "dgxspark_bench_needle_depth" not in found
    assert "dgxspark_bench_bursts" not in found and "dgxspark_bench_slos" not in found


def test_the_filter_reads_the_results_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    document = bench_document({1: [bench_request(0)]})
    path.write_text(json.dumps(document))
    out = promote_bench_parameters({"dgxspark_bench_requests": None}, str(path), "false")
    assert out["vars"]["dgxspark_bench_requests"] == document["identity"]["workload"]["requests_per_level"]
    with pytest.raises(AnsibleFilterError, match="promote_bench_parameters"):
        promote_bench_parameters("not a dict", str(path))
