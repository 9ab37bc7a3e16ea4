# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model of ``vllm serve`` arguments (issue 25): every flag the collection reads, in every spelling vLLM
0.33.0 accepts, reads the same through every reader.

The readers: the model itself (``_vllm.serve_argv``), the profile's check (``check_serve_args``), the plan's
rank agreement (``_plan._agreement_view``), kv-fit (``_kv_fit.engine_argv``, ``planned_kv_cache``, ``kv_fit``),
the preflight's drift (``_preflight._argv_items``), the shape's KV dtype (``_profile.check_shape``), the
AutoTuner check (``_seed_rules.check_autotune``) and the redaction of secrets (``_secrets.redact_text``). Each
spelling is also parsed by the simulated engine's real ``argparse`` parser built from the same option table
(``sim/engine/vllm_sim/args.py``), which reads it as vLLM does: the model must agree with it.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import types
from collections.abc import Callable
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import PER_RANK_FLAGS, _agreement_view
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import SWITCH, _argv_items
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import (
    engine_argv,
    kv_fit,
    planned_kv_cache,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import profile as _profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.seed_rules import check_autotune
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import (
    ServeArgv,
    check_serve_args,
    human_int,
    resolve,
    serve_argv,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm_serve_args import SERVE_OPTIONS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, edited
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__kv_fit import spark3, weights

# Every value flag the collection reads or renders, with a value and another one (for "the last one wins").
VALUES: dict[str, tuple[str, str]] = {
    "--kv-cache-dtype": ("fp8", "auto"),
    "--kv-cache-memory-bytes": ("2362232012", "1024"),
    "--max-model-len": ("16384", "4096"),
    "--max-num-seqs": ("4", "8"),
    "--max-num-batched-tokens": ("6144", "2048"),
    "--gpu-memory-utilization": ("0.8", "0.5"),
    "--tensor-parallel-size": ("3", "1"),
    "--block-size": ("64", "16"),
    "--port": ("8000", "9000"),
    "--host": ("0.0.0.0", "127.0.0.1"),
    "--api-key": ("sk-test-key", "sk-other"),
    "--hf-token": ("hf_" + "a" * 34, "hf_" + "b" * 34),
    "--served-model-name": ("dsv41", "other"),
    "--revision": ("2c0ffee0", "1bae0e10"),
    "--master-addr": ("198.51.100.10", "198.51.100.11"),
    "--master-port": ("29501", "29502"),
    "--nnodes": ("3", "2"),
    "--node-rank": ("1", "2"),
    "--ssl-certfile": ("/run/secrets/c", "/c"),
    "--speculative-config": ('{"method":"mtp"}', "{}"),
    "--seed": ("3", "4"),
}
# Every switch the collection reads or renders, and the option strings that turn it off.
SWITCHES: dict[str, tuple[str, ...]] = {
    "--trust-remote-code": ("--no-trust-remote-code",),
    "--enable-flashinfer-autotune": ("--disable-flashinfer-autotune", "--no-enable-flashinfer-autotune"),
    "--headless": (),
    "--enforce-eager": ("--no-enforce-eager",),
}
FLAG_VALUES = [(flag, *values) for flag, values in VALUES.items()]


def underscored(flag: str) -> str:
    return "--" + flag[2:].replace("-", "_")


def unique_prefix(flag: str) -> str | None:
    """The shortest prefix of ``flag`` no other option string of vLLM 0.33.0 starts with, or None."""
    for end in range(3, len(flag)):
        if [option for option in SERVE_OPTIONS if option.startswith(flag[:end])] == [flag]:
            return flag[:end]
    return None


def spellings(flag: str, value: str, other: str) -> dict[str, list[str]]:
    """Every way vLLM accepts ``flag value``, by name."""
    forms = {
        "--flag value": [flag, value],
        "--flag_name value": [underscored(flag), value],
        "--flag=value": [f"{flag}={value}"],
        "--flag_name=value": [f"{underscored(flag)}={value}"],
        "repeated, the last wins": [flag, other, f"{underscored(flag)}={value}"],
    }
    prefix = unique_prefix(flag)
    if prefix:
        forms["a unique prefix"] = [prefix, value]
        forms["a unique prefix with _ and ="] = [f"{underscored(prefix)}={value}"]
        forms["repeated, a prefix last"] = [f"{flag}={other}", prefix, value]
    return forms


def switch_spellings(flag: str, off: tuple[str, ...]) -> dict[str, list[str]]:
    """Every way vLLM accepts a switch turned on."""
    forms = {"--flag": [flag], "--flag_name": [underscored(flag)]}
    prefix = unique_prefix(flag)
    if prefix:
        forms["a unique prefix"] = [prefix]
    for negation in off:
        forms[f"{negation}, then --flag"] = [underscored(negation), flag]
    return forms


def cases() -> list[Any]:
    return [
        pytest.param(flag, value, argv, id=f"{flag} as {name}")
        for flag, value, other in FLAG_VALUES
        for name, argv in spellings(flag, value, other).items()
    ]


# ---------------------------------------------------------------- the oracle: argparse, as vLLM parses


def _oracle_module() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_sim_args_oracle", ROOT / "sim/engine/vllm_sim/args.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ORACLE = _oracle_module()


def argparse_reads(argv: list[str]) -> Any:
    """What vLLM's parser (the simulated engine's, from the same table) makes of ``vllm serve MODEL argv``."""
    return ORACLE.parse_serve_args(["MODEL", *argv])


def typed(model: ServeArgv, flag: str) -> Any:
    """The model's reading of ``flag`` converted as vLLM's parser converts it."""
    spec = SERVE_OPTIONS[flag]
    if not spec["takes_value"]:
        return model.switch(flag)
    if spec["nargs"] == "+":
        return list(model.values(flag))
    kind = spec["type"]
    if kind in ("int", "human_int", "human_int_or_auto"):
        return model.integer(flag)
    if kind == "float":
        return float(str(model.value(flag)))
    if kind == "json":
        return json.loads(str(model.value(flag)))
    if spec["nargs"] == "?" and model.value(flag) is None:
        return spec["const"]
    return model.value(flag)


# ---------------------------------------------------------------- every reader of a value flag


def check_messages(argv: list[str]) -> tuple[set[str], set[str]]:
    """check_serve_args' verdict on ``argv``: its messages (each occurrence repeats them), less the one that
    wants a prefix written in full."""
    out = Collector()
    check_serve_args(argv, [], "$.container.serve_args", out)
    return (
        {p.message for p in out.errors if not p.message.startswith("an abbreviation")},
        {p.message for p in out.warnings},
    )


def agreement(argv: list[str]) -> dict[str, Any]:
    rank: Any = {"image": "image", "labels": {}, "environment": {}}  # the keys it reads
    view = _agreement_view(rank, ["serve", "/m", *argv], {"entrypoint": ["vllm", "serve"], "fork_flags": []})
    return {key: value for key, value in view.items() if key.startswith("-")}


@pytest.mark.parametrize("flag,value,argv", cases())
def test_every_reader_reads_a_value_flag_the_same_in_every_spelling(flag: str, value: str, argv: list[str]) -> None:
    model = serve_argv(argv)
    # the model, asked by any spelling
    assert model.value(flag) == value
    assert model.value(underscored(flag)) == value
    assert model.has(flag) and model.last(flag) is not None and model.last(flag).flag == flag
    # vLLM's parser reads the same
    assert getattr(argparse_reads(argv), SERVE_OPTIONS[flag]["dest"]) == typed(model, flag)
    # the profile's check: the same verdict as for "--flag value" (a prefix alone adds "write the full flag")
    assert check_messages(argv) == check_messages([flag, value])
    # the plan's rank agreement
    assert agreement(argv) == ({} if flag in PER_RANK_FLAGS else {flag: value})
    # the preflight's drift
    items = _argv_items(["vllm", "serve", "/m", *argv])
    assert items[flag] == value and {k for k in items if k.startswith("-")} == {flag}
    # kv-fit
    head = {"entrypoint": "vllm", "command": ["serve", "/m", *argv]}
    assert engine_argv(head).value(flag) == value
    if flag == "--kv-cache-memory-bytes":
        assert planned_kv_cache(head, {}) == (
            float(value),
            f"--kv-cache-memory-bytes {int(value):,} " + "(sizing.kv_cache_memory_bytes)",
        )
    # the redaction of secrets: the value never shows
    if flag in _secrets.SECRET_FLAGS:
        assert value not in _secrets.redact_text(" ".join(argv))


@pytest.mark.parametrize(
    "flag,off,argv",
    [
        pytest.param(flag, off, argv, id=f"{flag} as {name}")
        for flag, off in SWITCHES.items()
        for name, argv in switch_spellings(flag, off).items()
    ],
)
def test_every_reader_reads_a_switch_the_same_in_every_spelling(
    flag: str, off: tuple[str, ...], argv: list[str]
) -> None:
    model = serve_argv(argv)
    assert model.switch(flag) is True and model.has(flag)
    for negation in off:
        assert model.switch(negation) is True  # the destination's setting, whichever option string asks
    assert getattr(argparse_reads(argv), SERVE_OPTIONS[flag]["dest"]) is True
    assert check_messages(argv) == check_messages([flag])
    if not off:
        assert agreement(argv) == ({} if flag in PER_RANK_FLAGS else {flag: True})
        assert _argv_items(["vllm", "serve", "/m", *argv])[flag] == SWITCH


@pytest.mark.parametrize("flag,off", [(flag, off) for flag, off in SWITCHES.items() if off])
def test_a_switch_turned_off_reads_false_in_every_spelling(flag: str, off: tuple[str, ...]) -> None:
    for negation in off:
        for argv in ([negation], [underscored(negation)], [flag, negation], [unique_prefix(negation) or negation]):
            model = serve_argv(argv)
            assert model.switch(flag) is False and model.switch(negation) is False, argv
            assert getattr(argparse_reads(argv), SERVE_OPTIONS[flag]["dest"]) is False, argv
    assert serve_argv([]).switch(flag) is None


def test_there_is_no_unique_prefix_of_kv_cache_dtype() -> None:
    # --kv-cache-dtype-skip-layers begins with every prefix of it: the issue's --kv-cache-dt is ambiguous
    assert unique_prefix("--kv-cache-dtype") is None
    assert resolve("--kv-cache-dt") == ("--kv-cache-dt", ("--kv-cache-dtype", "--kv-cache-dtype-skip-layers"))
    assert resolve("--kv_cache_mem") == ("--kv-cache-memory-bytes", ())


# ---------------------------------------------------------------- an ambiguous prefix is refused


@pytest.mark.parametrize(
    "argv,written,matches",
    [
        (["--kv-cache-dt", "fp8"], "--kv-cache-dt", "--kv-cache-dtype, --kv-cache-dtype-skip-layers"),
        (["--kv_cache_dt=fp8"], "--kv_cache_dt", "--kv-cache-dtype, --kv-cache-dtype-skip-layers"),
        (
            ["--max-num", "4"],
            "--max-num",
            "--max-num-active-seqs, --max-num-batched-tokens, --max-num-queued-reqs, --max-num-queued-tokens, "
            "--max-num-scheduled-tokens, --max-num-seqs",
        ),
        (["--api", "sk-secret"], "--api", "--api-key, --api-server-count"),
    ],
)
def test_an_ambiguous_prefix_is_refused_with_vllms_reason(
    argv: list[str], written: str, matches: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = Collector()
    check_serve_args(argv, [], "$.container.serve_args", out)
    assert [p.render() for p in out.warnings] == []
    assert [p.render() for p in out.errors] == [
        f"$.container.serve_args[0]: an ambiguous abbreviation: vLLM 0.33.0 would exit 2 (ambiguous option: "
        f"{written} could match {matches}) (found {json.dumps(written)}). write the full flag"
    ]
    with pytest.raises(SystemExit) as refused:
        argparse_reads(argv)
    assert refused.value.code == 2 and "ambiguous option" in capsys.readouterr().err
    # no reader takes it for one of them
    model = serve_argv(argv)
    assert not any(model.has(flag) for flag in matches.split(", "))


def test_a_unique_prefix_is_read_but_refused_by_the_check() -> None:
    out = Collector()
    check_serve_args(["--kv_cache_mem", "80G"], [], "$.container.serve_args", out)
    assert [(p.message, p.found, p.hint) for p in out.errors] == [
        (
            "an abbreviation: vLLM would accept it, but one more upstream flag could change its meaning",
            "--kv_cache_mem",
            "write the full flag --kv-cache-memory-bytes",
        ),
        (
            "--kv-cache-memory-bytes is rendered by the collection",
            "--kv_cache_mem",
            "set shapes.<shape>.sizing.kv_cache_memory_bytes instead",
        ),
    ]
    assert serve_argv(["--kv_cache_mem", "80G"]).integer("--kv-cache-memory-bytes") == 80 << 30


# ---------------------------------------------------------------- the model's other forms


def test_short_aliases_optimization_level_and_positionals() -> None:
    model = serve_argv(["/m", "-tp", "2", "--tensor-parallel-size=4", "-n3", "-O3", "--", "--port"])
    assert model.positionals == ("/m", "--port")
    assert model.integer("--tensor-parallel-size") == 4 and model.integer("-tp") == 4
    assert [a.written for a in model.occurrences("--tensor-parallel-size")] == ["-tp", "--tensor-parallel-size"]
    assert model.integer("--nnodes") == 3 and model.value("--optimization-level") == "3"
    assert not model.has("--port")
    oracle = argparse_reads(["-tp", "2", "--tensor-parallel-size=4", "-n3", "-O3"])
    assert (oracle.tensor_parallel_size, oracle.nnodes, str(oracle.optimization_level)) == (4, 3, "3")


def test_a_value_option_followed_by_an_option_has_no_value() -> None:
    model = serve_argv(["--max-model-len", "--port", "8000", "--gpu-memory-utilization", "-1", "--max-num-seqs", "-5"])
    assert model.value("--max-model-len") is None and model.integer("--port") == 8000
    assert model.value("--gpu-memory-utilization") == "-1" and model.integer("--max-num-seqs") == -5
    out = Collector()
    check_serve_args(["--seed", "--enforce-eager"], [], "$", out)
    assert [p.message for p in out.errors] == ["--seed needs a value"]


def test_values_of_an_appending_option_and_of_nargs_plus() -> None:
    model = serve_argv(["--middleware", "a", "--middleware=b", "--served-model-name", "x", "y", "--api-key", "k"])
    assert model.values("--middleware") == ("a", "b") and model.value("--middleware") == "b"
    assert model.values("--served-model-name") == ("x", "y") and model.value("--served-model-name") == "x y"
    oracle = argparse_reads(["--middleware", "a", "--middleware=b", "--served-model-name", "x", "y"])
    assert (oracle.middleware, oracle.served_model_name) == (["a", "b"], ["x", "y"])


def test_fork_flags_and_unknown_flags_take_a_following_value() -> None:
    model = serve_argv(["--max_parallel_prefills", "2", "--enforce-eager"], ["--max-parallel-prefills"])
    assert model.value("--max-parallel-prefills") == "2" and model.switch("--enforce-eager") is True
    assert serve_argv(["--my-switch"], ["--my-switch"]).switch("--my-switch") is True
    unknown = serve_argv(["--bogus", "1", "/m"])
    assert unknown.value("--bogus") == "1" and unknown.positionals == ("/m",)
    with pytest.raises(ValueError, match="ambiguous"):
        unknown.value("--max-num")


@pytest.mark.parametrize(
    "text,auto,expected",
    [("8192", False, 8192), ("128k", False, 128000), ("25.6k", False, 25600), ("1K", False, 1024)]
    + [("80G", False, 80 << 30), ("-1", True, -1), ("auto", True, -1), ("AUTO", True, -1), (" 4 ", False, 4)],
)
def test_human_readable_sizes_as_vllm_reads_them(text: str, auto: bool, expected: int) -> None:
    assert human_int(text, auto=auto) == expected


@pytest.mark.parametrize("text", ["1.5K", "auto", "12x", ""])
def test_human_readable_sizes_vllm_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        human_int(text)
    out = Collector()
    check_serve_args(["--max-num-batched-tokens", text], [], "$", out)  # rendered, and a bad size either way
    assert [p.message for p in out.errors] == ["--max-num-batched-tokens is rendered by the collection"]
    out = Collector()
    check_serve_args(["--max-cudagraph-capture-size", text], [], "$", out)
    assert [p.message for p in out.errors] == ["--max-cudagraph-capture-size takes an integer; vLLM would exit 2"]


def test_the_secret_flags_prefixes_are_the_tables() -> None:
    # _secrets does not load the table (redaction runs everywhere): its prefixes are checked here
    assert {flag: unique_prefix(flag) for flag in _secrets.SECRET_FLAGS} == _secrets.SECRET_FLAG_PREFIXES


# ---------------------------------------------------------------- end to end: the profile, the plan, kv-fit

KV_DTYPE = {
    "--kv-cache-dtype fp8": ["--kv-cache-dtype", "fp8"],
    "--kv_cache_dtype fp8": ["--kv_cache_dtype", "fp8"],
    "--kv-cache-dtype=fp8": ["--kv-cache-dtype=fp8"],
    "--kv_cache_dtype=fp8": ["--kv_cache_dtype=fp8"],
    "auto, then --kv_cache_dtype fp8": ["--kv-cache-dtype", "auto", "--kv_cache_dtype", "fp8"],
}


def kv_fit_line(tmp_path: pathlib.Path, serve_args: list[str]) -> dict[str, str]:
    plan, profile = spark3({"container/serve_args": serve_args, "shapes/tp3-triangle/sizing/max_model_len": 16384})
    return kv_fit("spark-head", weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "qwen3-8b"}), plan)


def per_token(line: dict[str, str]) -> str:
    message = line["message"]
    return message[message.index(": ") + 2 : message.index(" bytes per token")]


def test_kv_fit_costs_fp8_written_with_underscores_as_fp8(tmp_path: pathlib.Path) -> None:
    # Qwen3-8B at TP=3: 2 KV heads on a rank x 36 layers x 2 (K and V) x 128 x 1 byte (fp8), 2 bytes with auto
    auto = kv_fit_line(tmp_path / "auto", [])
    assert per_token(auto) == "36,864"
    lines = {name: kv_fit_line(tmp_path / str(n), argv) for n, (name, argv) in enumerate(KV_DTYPE.items())}
    assert {name: per_token(line) for name, line in lines.items()} == dict.fromkeys(KV_DTYPE, "18,432")
    assert len({json.dumps(line, sort_keys=True) for line in lines.values()}) == 1


def test_kv_fit_reads_the_head_command_in_every_spelling(tmp_path: pathlib.Path) -> None:
    plan, profile = spark3({"shapes/tp3-triangle/sizing/max_model_len": 16384})
    node = weights(tmp_path, {"DeepSeek-V4.1-Flash-1017": "qwen3-8b"})
    head = plan["ranks"][0]
    rendered = list(head["command"])
    at = rendered.index("--max-model-len")
    expected = None
    for spelling in (
        ["--max-model-len", "16384"],
        ["--max_model_len=16384"],
        ["--max-m", "16384"],
        ["--max-model-len", "1k", "--max_m=16384"],
        ["--max-model-len", "16.384k"],
    ):
        for kv_dtype in KV_DTYPE.values():
            head["command"] = [*rendered[:at], *spelling, *rendered[at + 2 :], *kv_dtype]
            line = kv_fit("spark-head", node, plan)
            assert "16,384 tokens" in line["message"] and per_token(line) == "18,432", (spelling, kv_dtype)
            expected = expected or line
            assert line == expected


def test_the_shapes_kv_dtype_is_read_by_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real: Callable[..., Any] = _profile.model_kv_cost

    def recording(data: Any, nodes: int, kv_cache_dtype: str, where: str, out: Collector) -> Any:
        seen.append(kv_cache_dtype)
        return real(data, nodes, kv_cache_dtype, where, out)

    monkeypatch.setattr(_profile, "model_kv_cost", recording)
    for name, argv in KV_DTYPE.items():
        seen.clear()
        validate_profile(edited(json.loads(SPARK3.read_text()), {"container/serve_args": argv}))
        assert set(seen) == {"fp8"}, name


def test_the_autotuner_check_reads_the_switch_as_vllm_does() -> None:
    for argv, setting in (
        (["--enable_flashinfer_autotune"], True),
        (["--disable-flashinfer-autotune", "--enable-flashi"], True),
        (["--enable-flashinfer-autotune", "--no_enable_flashinfer_autotune"], False),
        (["--disable-flashi"], False),
    ):
        for autotuner in (True, False):
            for given in (argv, serve_argv(argv), [a.flag for a in serve_argv(argv).args]):
                out = Collector()
                check_autotune({"autotuner": autotuner}, given, {}, "$.shapes.s", out)
                assert bool(out.errors) == (setting != autotuner), (argv, autotuner)
    with pytest.raises(ProfileError, match="--enable-flashinfer-autotune contradicts autotuner: false"):
        validate_profile(
            edited(
                json.loads(SPARK3.read_text()),
                {"shapes/tp3-triangle/autotuner": False, "container/serve_args": ["--enable_flashinfer_autotune"]},
            )
        )
