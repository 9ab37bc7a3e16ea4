# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`vllm serve` argument handling: vLLM 0.33.0's options accepted, anything else refused with exit 2."""

from __future__ import annotations

import subprocess

import pytest
from engine_helpers import LAUNCHER, PYTHON
from vllm_sim import args as A

HEAD = (
    "MODEL --served-model-name NAME --tensor-parallel-size 3 --distributed-executor-backend mp --nnodes 3 "
    "--node-rank 0 --master-addr 198.51.100.10 --master-port 29501 --max-model-len 1048576 --max-num-seqs 4 "
    "--max-num-batched-tokens 6144 --kv-cache-memory-bytes 2362232012 --prefix-cache-retention-interval 512 "
    "--port 8000"
).split()
WORKER = [a for a in HEAD if a not in ("--port", "8000")] + ["--headless"]
WORKER[WORKER.index("--node-rank") + 1] = "1"


def run_vllm(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, str(LAUNCHER), *argv], capture_output=True, text=True, timeout=30, check=False)


def test_rendered_commands_parse_as_vllm_reads_them():
    head = A.parse_serve_args(HEAD)
    assert head.model_tag == "MODEL"
    assert head.served_model_name == ["NAME"]
    assert (head.tensor_parallel_size, head.nnodes, head.node_rank) == (3, 3, 0)
    assert (head.master_addr, head.master_port, head.port) == ("198.51.100.10", 29501, 8000)
    assert (head.max_model_len, head.max_num_seqs, head.max_num_batched_tokens) == (1048576, 4, 6144)
    assert head.kv_cache_memory_bytes == 2362232012 and head.prefix_cache_retention_interval == 512
    assert head.headless is False
    worker = A.parse_serve_args(WORKER)
    assert worker.headless is True and worker.node_rank == 1


def test_vllm_spellings_are_rewritten_as_flexibleargumentparser_does():
    ns = A.parse_serve_args(
        [
            "M",
            "--max_model_len",
            "8k",
            "--speculative-config.method",
            "dspark",
            "--speculative-config.num_speculative_tokens",
            "5",
            "-O3",
            "-tp=8",
            "--kv-cache-memory-bytes",
            "2G",
            "--no-enable-prefix-caching",
        ]
    )
    assert ns.max_model_len == 8000  # lowercase k is decimal, as vLLM's human_readable_int
    assert ns.speculative_config == {"method": "dspark", "num_speculative_tokens": 5}
    assert ns.optimization_level == "3"
    assert ns.tensor_parallel_size == 8
    assert ns.kv_cache_memory_bytes == 2 * 1024**3
    assert ns.enable_prefix_caching is False


def _value_for(spec: dict) -> list[str]:
    if not spec["takes_value"]:
        return []
    choices = [c for c in (spec.get("choices") or []) if c is not None]
    if choices:
        return [str(choices[0])]
    return [
        {
            "int": "1",
            "float": "0.5",
            "json": "{}",
            "json_or_str": "{}",
            "human_int": "1k",
            "human_int_or_auto": "auto",
            "csv": "a,b",
        }.get(spec["type"], "x")
    ]


def test_every_vllm_option_is_accepted(tmp_path):
    table = A.load_table()
    assert len(table.SERVE_OPTIONS) == table.SERVE_OPTION_COUNT
    config = tmp_path / "serve.yaml"
    config.write_text("max_num_seqs: 4\n")
    for opt, spec in table.SERVE_OPTIONS.items():
        if spec["action"] == "help":
            continue
        if opt == "--model":  # vLLM moves it to the positional (and refuses both, as here)
            assert A.parse_serve_args(["--model", "M"]).model_tag == "M"
            continue
        value = [str(config)] if opt == "--config" else _value_for(spec)
        ns = A.parse_serve_args(["M", opt, *value])
        assert ns.model_tag == "M", opt


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--foo"], "vllm serve: error: unrecognized arguments: --foo"),
        (["--max-parallel-prefills", "2"], "vllm serve: error: unrecognized arguments: --max-parallel-prefills 2"),
        (["--max-model-len", "abc"], "vllm serve: error: argument --max-model-len: invalid human_readable_int_or_auto"),
        (["--max-num-seqs", "four"], "vllm serve: error: argument --max-num-seqs: invalid int value: 'four'"),
        (["--dtype", "fp7"], "vllm serve: error: argument --dtype: invalid choice: 'fp7'"),
        (["--max-num-seqs"], "vllm serve: error: argument --max-num-seqs: expected one argument"),
        (["--headless=yes"], "vllm serve: error: argument --headless: ignored explicit argument 'yes'"),
        (["--speculative-config", "{not json"], "vllm serve: error: argument --speculative-config/-sc: Value"),
    ],
)
def test_bad_command_line_exits_2_like_argparse(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        A.parse_serve_args(["M", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: vllm serve [model_tag] [options]\n")
    assert message in err


def test_a_forks_flag_is_accepted_only_when_declared(monkeypatch, capsys):
    with pytest.raises(SystemExit) as exc:
        A.parse_serve_args(["M", "--max-parallel-prefills", "2"])  # spark-ds41f's fork flag: not upstream
    assert exc.value.code == 2
    assert "unrecognized arguments: --max-parallel-prefills 2" in capsys.readouterr().err
    monkeypatch.setenv("SIM_ENGINE_FORK_FLAGS", "--max-parallel-prefills")
    monkeypatch.setattr(A, "_PARSER", None)  # rebuilt with the fork's flag, dropped again after the test
    assert A.parse_serve_args(["M", "--max-parallel-prefills", "2"]).fork_max_parallel_prefills == "2"


def test_launcher_refuses_an_unknown_flag_with_exit_2():
    r = run_vllm("serve", *WORKER, "--foo")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == "vllm serve: error: unrecognized arguments: --foo"
    r = run_vllm("frobnicate")
    assert r.returncode == 2 and "invalid choice: 'frobnicate'" in r.stderr
    r = run_vllm("--version")
    assert r.returncode == 0 and r.stdout.strip() == "0.33.0" and "not vLLM" in r.stderr
