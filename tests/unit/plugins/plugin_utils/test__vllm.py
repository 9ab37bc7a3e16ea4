# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""serve_args are read the way vLLM 0.33.0's parser reads them (facts checked by tools/vllm_args/generate.py)."""

from __future__ import annotations

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import (
    canonical,
    check_serve_args,
    parse_serve_args,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm_serve_args import (
    SERVE_OPTIONS,
    VLLM_VERSION,
)


def test_table_is_vllm_0_33() -> None:
    assert VLLM_VERSION == "0.33.0"
    assert len(SERVE_OPTIONS) == 485
    for flag in (
        "--tensor-parallel-size",
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--master-port",
        "--headless",
        "--kv-cache-memory-bytes",
        "--prefix-cache-retention-interval",
        "--speculative-config",
    ):
        assert flag in SERVE_OPTIONS
    assert "--max-parallel-prefills" not in SERVE_OPTIONS


@pytest.mark.parametrize(
    "flag,expected",
    [
        ("--max_model_len", "--max-model-len"),
        ("-tp", "-tp"),
        ("--speculative_config.num_speculative_tokens", "--speculative-config.num_speculative_tokens"),
    ],
)
def test_canonical(flag: str, expected: str) -> None:
    assert canonical(flag) == expected


def test_parse_forms() -> None:
    parsed = parse_serve_args(
        [
            "--enforce-eager",
            "--seed=3",
            "--api-key",
            "a",
            "b",
            "--speculative-config.method",
            "mtp",
            "--hf-token",
            "--trust-remote-code",
        ]
    )
    assert [(a.flag, a.value, a.index, a.key) for a in parsed] == [
        ("--enforce-eager", None, 0, ""),
        ("--seed", "3", 1, ""),
        ("--api-key", "a b", 2, ""),
        ("--speculative-config", "mtp", 5, "method"),
        ("--hf-token", None, 7, ""),
        ("--trust-remote-code", None, 8, ""),
    ]
    assert parsed[2].values == ("a", "b")


def check(args: list[str], forks: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    out = Collector()
    check_serve_args(args, list(forks), "$.serve_args", out)
    return [p.render() for p in out.errors], [p.render() for p in out.warnings]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--max-parallel-prefills", "2"], "has no such flag"),
        (["--enforce-eagr"], "did you mean '--enforce-eager'"),
        (["-tp", "2"], "-tp is rendered by the collection"),
        (["--max_num_seqs", "8"], "--max-num-seqs is rendered"),
        (["--enforce-eager=true"], "is a switch and takes no value"),
        (["--seed"], "needs a value"),
        (["--seed", "x"], "takes an integer"),
        (["--compilation-config", "FULL"], "takes a JSON object"),
        (["--tensor-parallel", "2"], "rendered by the collection"),
        (["--enable-chunked", "x"], ""),
        (["--max-cudagraph-capture-size", "lots"], "takes an integer"),
        (["stray"], "a value without a flag"),
        (["--enforce-eag"], "write the full flag --enforce-eager"),
    ],
)
def test_errors(args: list[str], fragment: str) -> None:
    errors = check(args)[0]
    assert errors and any(fragment in e for e in errors), errors


def test_valid_args_pass() -> None:
    errors, warnings = check(
        [
            "--enforce-eager",
            "--seed=3",
            "--compilation-config",
            '{"cudagraph_mode":"FULL"}',
            "--allowed-media-domains",
            "a",
            "b",
            "--max-parallel-prefills",
            "2",
        ],
        ("--max-parallel-prefills",),
    )
    assert errors == [] and warnings == []


def test_fork_flag_that_upstream_has_warns() -> None:
    warnings = check([], ("--enforce-eager",))[1]
    assert any("upstream vLLM 0.33.0 has it" in w for w in warnings)
