# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A value in a host's dgxspark_overrides gets the verdict the same value gets in the profile (issue 25).

Every case below is a seed rule or a security rule. Each is applied twice: as an edit of the profile's shape
(written out here, by the documented merge: mappings key by key, docker_run_args and serve_args appended,
anything else replaced) and as one worker's inventory override. The errors and warnings it brings must be the
same, message for message; the override's are pointed at the host and the variable.
"""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import overrides as _overrides
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, hosts_from_inventory
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

SPARK3 = ROOT / "inventories" / "spark3" / "serving-profile.json"
SPARK8 = ROOT / "inventories" / "spark8" / "serving-profile.json"
WORKER = "spark-w1"
CANARY = "CanaryOverride7d3f9a"  # a secret's value: no verdict of an override may show it

# name: (profile, shape, override, what the profile says of it: "error", "warning" or "" for nothing new)
CASES: dict[str, tuple[pathlib.Path, str, dict[str, Any], str]] = {
    # seed 000 and 002 rules
    "8 sequences at 1M on 3 nodes": (SPARK3, "tp3-triangle", {"sizing": {"max_num_seqs": 8}}, "error"),
    "6 sequences at 1M on 3 nodes": (SPARK3, "tp3-triangle", {"sizing": {"max_num_seqs": 6}}, "error"),
    "batched tokens below sequences": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"max_num_batched_tokens": 2}},
        "error",
    ),
    "gpu_memory_utilization 0.95 against --memory=112g": (
        SPARK8,
        "tp8-300k",
        {"sizing": {"gpu_memory_utilization": 0.95}},
        "error",
    ),
    "a KV cache written in KiB": (SPARK3, "tp3-triangle", {"sizing": {"kv_cache_memory_bytes": 4194304}}, "error"),
    "a KV cache above the container's memory": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"kv_cache_memory_bytes": 130 * 1024**3}},
        "error",
    ),
    "the AutoTuner on at 300K": (SPARK8, "tp8-300k", {"environment": {"VLLM_FLASHINFER_AUTOTUNE": "1"}}, "error"),
    "Engram on disk switched off": (SPARK8, "tp8-1m", {"environment": {"DSV41_ENGRAM_DISK": "0"}}, "error"),
    "NVLS on a GB10": (SPARK3, "tp3-triangle", {"environment": {"NCCL_NVLS_ENABLE": "1"}}, "error"),
    "too many NCCL channels at 8 ranks": (SPARK8, "tp8-300k", {"environment": {"NCCL_MAX_NCHANNELS": "32"}}, "error"),
    "NCCL channels not a number": (SPARK3, "tp3-triangle", {"environment": {"NCCL_MAX_NCHANNELS": "many"}}, "error"),
    "a speculative config without a method": (
        SPARK8,
        "tp8-300k",
        {"speculative_config": {"num_speculative_tokens": 3}},
        "error",
    ),
    "a speculative config with 0 tokens": (
        SPARK8,
        "tp8-300k",
        {"speculative_config": {"method": "dspark", "num_speculative_tokens": 0}},
        "error",
    ),
    "memlock not unlimited": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--ulimit=memlock=65536:65536"]}},
        "error",
    ),
    "nofile below 1M at 8 ranks": (
        SPARK8,
        "tp8-300k",
        {"container": {"docker_run_args": ["--ulimit=nofile=65536:65536"]}},
        "error",
    ),
    "--memory-swap below --memory": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--memory-swap=64g"]}},
        "error",
    ),
    "a bridge network": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--network=bridge"]}}, "error"),
    # security rules
    "--privileged": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--privileged"]}}, "error"),
    "--cap-add=SYS_ADMIN": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--cap-add=SYS_ADMIN"]}},
        "error",
    ),
    "--pid=host": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--pid=host"]}}, "error"),
    "a writable bind of /": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--volume=/:/host"]}},
        "error",
    ),
    "the docker socket": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--volume=/var/run/docker.sock:/var/run/docker.sock"]}},
        "error",
    ),
    "--env-file": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--env-file=/x"]}}, "error"),
    "a published port": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["-p", "80:80"]}}, "error"),
    "a secret in a docker option": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--env=HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz012345"]}},
        "error",
    ),
    "a secret in the environment": (
        SPARK3,
        "tp3-triangle",
        {"environment": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz012345"}},
        "error",
    ),
    "an API key in serve_args": (
        SPARK3,
        "tp3-triangle",
        {"container": {"serve_args": ["--api-key", "sk-abcdefghijklmnop"]}},
        "error",
    ),
    # secrets given inline (issue 26): refused, and never repeated (test_a_secret_in_an_override_is_never_shown)
    "-eNAME=value of an API key": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": [f"-eVLLM_API_KEY=sk-{CANARY}"]}},
        "error",
    ),
    "--env NAME=value of an AUTH name": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--env", f"HF_AUTH={CANARY}"]}},
        "error",
    ),
    "an AUTH name in the environment": (SPARK3, "tp3-triangle", {"environment": {"HF_AUTH": CANARY}}, "error"),
    "a KEY at a name's start": (SPARK3, "tp3-triangle", {"environment": {"KEY_ID": CANARY}}, "error"),
    "a proxy URL with a password": (
        SPARK3,
        "tp3-triangle",
        {"environment": {"HTTPS_PROXY": f"http://proxyuser:{CANARY}@proxy.example:3128"}},
        "error",
    ),
    "a database URL with a password": (
        SPARK3,
        "tp3-triangle",
        {"environment": {"DATABASE_URL": f"postgres://app:{CANARY}@db.example/app"}},
        "error",
    ),
    "a log driver's token": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--log-driver=splunk", f"--log-opt=splunk-token={CANARY}"]}},
        "error",
    ),
    "a bearer token in the health command": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": [f"--health-cmd=curl -H 'Authorization: Bearer {CANARY}' localhost"]}},
        "error",
    ),
    "a flag vLLM does not have": (
        SPARK3,
        "tp3-triangle",
        {"container": {"serve_args": ["--max-num-seq", "4"]}},
        "error",
    ),
    "a flag the collection renders": (
        SPARK3,
        "tp3-triangle",
        {"container": {"serve_args": ["--max-model-len", "4096"]}},
        "error",
    ),
    "remote code": (SPARK3, "tp3-triangle", {"container": {"serve_args": ["--trust-remote-code"]}}, "warning"),
    # and values that are fine: nothing new
    "4 sequences at 1M": (SPARK3, "tp3-triangle", {"sizing": {"max_num_seqs": 4}}, ""),
    "a host's own CPU set": (SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--cpuset-cpus=0-9"]}}, ""),
    "a host's own CPU set and seed 000's CPU rule": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--cpuset-cpus=0-19"]}},
        "",
    ),
    "the seed's NCCL debug level": (SPARK8, "tp8-300k", {"environment": {"NCCL_DEBUG": "WARN"}}, ""),
    "8 sequences at 1M on 8 nodes": (SPARK8, "tp8-1m", {"sizing": {"max_num_seqs": 8}}, ""),
    # issue 27's rules, as a host's overrides
    "8 sequences at 1,000,000 tokens on 3 nodes": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"max_num_seqs": 8, "max_model_len": 1000000}},
        "error",
    ),
    "5 sequences at 1,000,000 tokens on 3 nodes": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"max_num_seqs": 5, "max_model_len": 1000000}},
        "warning",
    ),
    "8 sequences at 999,999 tokens on 3 nodes": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"max_num_seqs": 8, "max_model_len": 999999}},
        "",
    ),
    "9 sequences at 1M on 8 nodes": (SPARK8, "tp8-1m", {"sizing": {"max_num_seqs": 9}}, "warning"),
    "gpu_memory_utilization 0.99 on tp3": (
        SPARK3,
        "tp3-triangle",
        {"sizing": {"gpu_memory_utilization": 0.99}},
        "error",
    ),
    "NCCL over IPv6": (SPARK8, "tp8-300k", {"environment": {"NCCL_IB_ADDR_FAMILY": "AF_INET6"}}, "error"),
    "NCCL over IPv6 on tp3": (SPARK3, "tp3-triangle", {"environment": {"NCCL_IB_ADDR_FAMILY": "AF_INET6"}}, "error"),
    "NCCL rings on one NIC": (SPARK8, "tp8-300k", {"environment": {"NCCL_CROSS_NIC": "0"}}, "warning"),
    "CPU affinity honoured at 8 ranks": (
        SPARK8,
        "tp8-300k",
        {"environment": {"NCCL_IGNORE_CPU_AFFINITY": "0"}},
        "warning",
    ),
    "NCCL async errors off": (SPARK8, "tp8-1m", {"environment": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}}, "warning"),
    "a host's NCCL debug level INFO": (SPARK3, "tp3-triangle", {"environment": {"NCCL_DEBUG": "INFO"}}, "warning"),
    "a host's CPU set with seed 002's CPU rule on tp3": (
        SPARK3,
        "tp3-triangle",
        {"container": {"docker_run_args": ["--cpuset-cpus=0-19"]}, "environment": {"NCCL_IGNORE_CPU_AFFINITY": "1"}},
        "warning",
    ),
}


def edited_profile(path: pathlib.Path, shape: str, override: dict[str, Any]) -> dict[str, Any]:
    """The same change written into the profile's shape, by hand: what an operator would edit."""
    data = json.loads(path.read_text())
    target = data["shapes"][shape]
    for key, value in override.items():
        if key == "container":
            own = target.setdefault("container", {})
            for name, item in value.items():
                own[name] = own.get(name, []) + item if isinstance(item, list) else item
        elif isinstance(value, dict) and key != "speculative_config":
            target.setdefault(key, {}).update(value)
        else:
            target[key] = copy.deepcopy(value)
    return data


def hosts(nodes: int, override: dict[str, Any] | None = None, **extra: Any) -> list[Host]:
    names = ["spark-head"] + [f"spark-w{i}" for i in range(1, nodes)]
    return [
        Host(
            name,
            rank=i,
            head=i == 0,
            fabric_address=f"198.51.100.{10 + i}",
            overrides=override if name == WORKER else None,
            **(extra if name == WORKER else {}),
        )
        for i, name in enumerate(names)
    ]


def profile_verdict(path: pathlib.Path, shape: str, override: dict[str, Any]) -> set[tuple[str, str, str]]:
    """What the edit brings: every error, and every warning the unedited profile does not give."""
    before = {_said(p) for p in validate_profile(json.loads(path.read_text()), "p").warnings}
    try:
        found = validate_profile(edited_profile(path, shape, override), "p").warnings
    except ProfileError as exc:
        found = exc.problems + exc.warnings
    return {_said(p) for p in found} - before


def override_verdict(path: pathlib.Path, shape: str, override: dict[str, Any]) -> tuple[set, list[str]]:
    """What the override brings, as build_plan reports it: the problems at the host's dgxspark_overrides."""
    profile = validate_profile(json.loads(path.read_text()), "p")
    nodes = profile.data["shapes"][shape]["nodes"]
    try:
        build_plan(profile, shape, hosts(nodes, override))
        return set(), []
    except ProfileError as exc:
        found = [p for p in exc.problems + exc.warnings if p.where.startswith(f"host {WORKER}: dgxspark_overrides")]
        return {_said(p) for p in found}, [p.where for p in found]


def plan_warnings(path: pathlib.Path, shape: str, override: dict[str, Any]) -> list[str]:
    profile = validate_profile(json.loads(path.read_text()), "p")
    nodes = profile.data["shapes"][shape]["nodes"]
    return build_plan(profile, shape, hosts(nodes, override))["warnings"]


def _said(problem: Any) -> tuple[str, str, str]:
    return problem.severity, problem.message, json.dumps(problem.found, sort_keys=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_override_gets_the_profiles_verdict(name: str) -> None:
    path, shape, override, severity = CASES[name]
    expected = profile_verdict(path, shape, override)
    # the case is what it says in the profile: refused, warned, or fine
    if severity == "error":
        assert any(s == "error" for s, _m, _f in expected), expected
    elif severity == "warning":
        assert expected and all(s == "warning" for s, _m, _f in expected), expected
    else:
        assert expected == set(), expected
    if severity == "error":
        got, wheres = override_verdict(path, shape, override)
        assert got == expected, (got, expected)
        assert all(w.startswith(f"host {WORKER}: dgxspark_overrides") for w in wheres)
    else:  # the plan succeeds unless the ranks disagree; the warnings are the profile's, at the override
        try:
            warned = plan_warnings(path, shape, override)
        except ProfileError as exc:
            assert all(p.where.startswith("rank agreement") for p in exc.problems), exc
            warned = [p.render() for p in exc.warnings]
        at_override = [w for w in warned if f"host {WORKER}: dgxspark_overrides" in w]
        assert len(at_override) == len(expected), (at_override, expected)
        for _severity, message, _found in expected:
            assert any(message in w for w in at_override), (message, at_override)


SECRET_CASES = [name for name, (_p, _s, override, _v) in CASES.items() if CANARY in json.dumps(override)]


@pytest.mark.parametrize("name", SECRET_CASES)
def test_a_secret_in_an_override_is_never_shown(name: str) -> None:
    """Refused as the profile refuses it (above), and in no problem, message or found, of the plan's verdict."""
    path, shape, override, _severity = CASES[name]
    profile = validate_profile(json.loads(path.read_text()), "p")
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, shape, hosts(profile.data["shapes"][shape]["nodes"], override))
    shown = json.dumps([p.as_dict() for p in caught.value.problems + caught.value.warnings]) + str(caught.value)
    assert "<redacted" in shown and CANARY not in shown
    assert any("container.secrets" in p.hint for p in caught.value.problems)


def test_the_override_is_named_at_its_path() -> None:
    _got, wheres = override_verdict(SPARK3, "tp3-triangle", {"sizing": {"max_num_seqs": 8}})
    assert wheres == ["host spark-w1: dgxspark_overrides.sizing.max_num_seqs"]
    _got, wheres = override_verdict(
        SPARK3, "tp3-triangle", {"container": {"docker_run_args": ["--cpus=4", "--privileged"]}}
    )
    assert wheres == ["host spark-w1: dgxspark_overrides.container.docker_run_args[1]"]
    _got, wheres = override_verdict(SPARK8, "tp8-300k", {"environment": {"VLLM_FLASHINFER_AUTOTUNE": "1"}})
    assert wheres and all(w.startswith("host spark-w1: dgxspark_overrides") for w in wheres), wheres


def test_the_problem_names_the_inventory_file_that_sets_it(tmp_path: pathlib.Path) -> None:
    inventory = tmp_path / "inv"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all: {}\n")
    (inventory / "group_vars" / "dgxspark_workers.yml").write_text("dgxspark_overrides:\n  sizing: {max_num_seqs: 8}\n")
    (inventory / "group_vars" / "all.yml").write_text("dgxspark_shape: tp3-triangle\n")
    common = {"inventory_dir": str(inventory), "inventory_file": str(inventory / "hosts.yml")}
    hostvars = {
        "spark-head": {**common, "dgxspark_rank": 0, "dgxspark_fabric_address": "198.51.100.10"},
        **{
            f"spark-w{i}": {
                **common,
                "dgxspark_rank": i,
                "dgxspark_fabric_address": f"198.51.100.{10 + i}",
                "group_names": ["dgxspark", "dgxspark_workers"],
                "dgxspark_overrides": {"sizing": {"max_num_seqs": 8}},
            }
            for i in (1, 2)
        },
    }
    groups = {"dgxspark_head": ["spark-head"], "dgxspark_workers": ["spark-w1", "spark-w2"]}
    found, _both = hosts_from_inventory(hostvars, groups)
    assert [h.overrides_from for h in found] == [None] + [str(inventory / "group_vars" / "dgxspark_workers.yml")] * 2
    profile = validate_profile(json.loads(SPARK3.read_text()), "p")
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, "tp3-triangle", found)
    texts = [p.render() for p in caught.value.problems]
    for worker in ("spark-w1", "spark-w2"):
        assert any(
            t.startswith(f"{inventory}/group_vars/dgxspark_workers.yml: host {worker}: dgxspark_overrides.sizing")
            for t in texts
        ), texts


def test_host_vars_win_over_group_vars(tmp_path: pathlib.Path) -> None:
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    (tmp_path / "host_vars" / "w1.yaml").write_text("dgxspark_overrides: {}\n")
    (tmp_path / "group_vars" / "all" / "main.yml").write_text("dgxspark_overrides: {}\n")
    variables = {"inventory_dir": str(tmp_path), "group_names": []}
    assert _overrides.origin_of("w1", variables) == str(tmp_path / "host_vars" / "w1.yaml")
    assert _overrides.origin_of("w2", variables) == str(tmp_path / "group_vars" / "all" / "main.yml")
    assert _overrides.origin_of("w2", {}) is None


def test_the_rank_runs_what_was_judged() -> None:
    """The renderer reads the same merged profile: the override's options are in the rank's argv and container."""
    profile = validate_profile(json.loads(SPARK3.read_text()), "p")
    plan = build_plan(
        profile,
        "tp3-triangle",
        hosts(3, {"container": {"docker_run_args": ["--cpuset-cpus=0-9"]}, "environment": {"NCCL_DEBUG": "INFO"}}),
    )
    worker = plan["ranks"][1]
    assert "--cpuset-cpus=0-9" in worker["argv"] and worker["container"]["cpuset_cpus"] == "0-9"
    assert worker["environment"]["NCCL_DEBUG"] == "INFO" and plan["ranks"][2]["environment"]["NCCL_DEBUG"] == "WARN"
    merged = _overrides.effective_data(profile.data, "tp3-triangle", {"sizing": {"max_num_seqs": 2}})
    assert merged["shapes"]["tp3-triangle"]["sizing"]["max_num_seqs"] == 2
    assert profile.data["shapes"]["tp3-triangle"]["sizing"]["max_num_seqs"] == 4  # the profile is left alone


# --- the seed-rule and privilege corpora of their own tests, replayed as overrides --------------------------------
def _seed_rule_cases() -> dict[str, tuple[pathlib.Path, str, dict[str, Any], Any]]:
    """test__seed_rules.RULES whose edits a host's dgxspark_overrides can say (the shape's sizing, environment,
    fabric names, speculative config, image, or a serve/docker list the shape does not have of its own)."""
    from ansible_collections.dgxspark.cluster.tests.unit.conftest import DELETE, SEED000, edited
    from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__seed_rules import RULES

    reachable = (
        "sizing",
        "environment",
        "speculative_config",
        "fabric/hca",
        "fabric/socket_ifname",
        "fabric/gid_index",
    )
    cases = {}
    for name, (base, edits, _severity, _fragments, _check) in RULES.items():
        path = SEED000 if base == "seed000" else SPARK8
        document = json.loads(path.read_text())
        shapes = {key.split("/")[1] for key in edits if key.startswith("shapes/")}
        if not edits or len(shapes) != 1 or any(not key.startswith("shapes/") for key in edits):
            continue
        (shape,) = shapes
        override: dict[str, Any] = {}
        for key, value in edits.items():
            rest = key.split("/")[2:]
            joined = "/".join(rest)
            own = document["shapes"][shape].get("container", {})
            listed = rest[0] == "container" and len(rest) == 2 and rest[1] in ("serve_args", "docker_run_args")
            if value is DELETE or not (
                any(joined == r or joined.startswith(r + "/") for r in reachable)
                or joined == "container/image"
                or (listed and rest[1] not in own)
            ):
                break
            if rest[0] == "speculative_config" and len(rest) > 1:
                break  # an override replaces the whole speculative config
            node = override
            for part in rest[:-1]:
                node = node.setdefault(part, {})
            node[rest[-1]] = value
        else:
            cases[name] = (path, shape, override, edited(document, edits))
    return cases


SEED_RULE_CASES = _seed_rule_cases()


def _privilege_cases() -> dict[str, list[str]]:
    from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__privilege_policy import REFUSED

    return {name: extra for name, (extra, _check, _message) in REFUSED.items()}


PRIVILEGE_CASES = _privilege_cases()


def _verdict_of(document: dict[str, Any], base: pathlib.Path) -> set[tuple[str, str, str]]:
    before = {_said(p) for p in validate_profile(json.loads(base.read_text()), "p").warnings}
    try:
        found = validate_profile(document, "p").warnings
    except ProfileError as exc:
        found = exc.problems + exc.warnings
    return {_said(p) for p in found} - before


def _override_said(path: pathlib.Path, shape: str, override: dict[str, Any]) -> set[tuple[str, str, str]]:
    profile = validate_profile(json.loads(path.read_text()), "p")
    nodes = profile.data["shapes"][shape]["nodes"]
    try:
        planned = build_plan(profile, shape, hosts(nodes, override))
    except ProfileError as exc:
        found = [p for p in exc.problems + exc.warnings if p.where.startswith(f"host {WORKER}: dgxspark_overrides")]
        return {_said(p) for p in found}
    return {("warning", w, "") for w in planned["warnings"] if f"host {WORKER}: dgxspark_overrides" in w}


def test_the_corpora_reach_the_rules() -> None:
    # 18 of test__seed_rules' 49 change what an override can (the rest: memory, Engram placement, the AutoTuner
    # switch, the host section with the guard's settings, model_config, the profile's own lists): those are in CASES
    # above or not a host's to change
    assert len(SEED_RULE_CASES) >= 18, sorted(SEED_RULE_CASES)
    assert len(PRIVILEGE_CASES) >= 30


@pytest.mark.parametrize("name", sorted(SEED_RULE_CASES))
def test_every_seed_rule_case_as_an_override_gets_the_profiles_verdict(name: str) -> None:
    path, shape, override, document = SEED_RULE_CASES[name]
    expected = _verdict_of(document, path)
    got = _override_said(path, shape, override)
    errors = {item for item in expected if item[0] == "error"}
    assert errors == {item for item in got if item[0] == "error"}, (errors, got)
    warned = {message for severity, message, _found in expected if severity == "warning"}
    said = " | ".join(message for severity, message, _found in got if severity == "warning")
    assert all(message in said for message in warned), (warned, said)


@pytest.mark.parametrize("name", sorted(PRIVILEGE_CASES))
def test_every_privilege_case_as_an_override_gets_the_profiles_verdict(name: str) -> None:
    extra = PRIVILEGE_CASES[name]
    document = json.loads(SPARK3.read_text())
    document["container"]["docker_run_args"] += extra
    expected = _verdict_of(document, SPARK3)
    assert any(severity == "error" for severity, _m, _f in expected), expected
    got = _override_said(SPARK3, "tp3-triangle", {"container": {"docker_run_args": extra}})
    assert {item for item in got if item[0] == "error"} == {item for item in expected if item[0] == "error"}


# --- issue 26: the allow-lists judge a host's overrides as they judge the profile ---------------------------------
ALLOW_LIST_OVERRIDES = {
    "a volume driver's writable bind of /": (
        [
            "--mount=type=volume,target=/host,volume-driver=local,volume-opt=type=none,volume-opt=o=bind,"
            "volume-opt=device=/"
        ],
        "volume-drivers",
    ),
    "/etc read-only": (["-v/etc:/x:ro"], "host-mounts"),
    "/proc/1/root": (["--volume", "/proc/1/root:/r"], "host-mounts"),
    "/var/spool/cron writable": (["--volume=/var/spool/cron:/c"], "bind-sources"),
    "/dev/mem by a cgroup rule": (["--device-cgroup-rule=c 1:1 rwm"], "dangerous-devices"),
    "a SCSI generic device": (["--device=/dev/sg0"], "dangerous-devices"),
    "SYS_RESOURCE": (["--cap-add", "sys_resource"], "dangerous-capabilities"),
    "the node's user namespace": (["--userns=host"], "host-namespaces"),
    "OOM-proof": (["--oom-score-adj=-1000"], "oom-protected"),
}


@pytest.mark.parametrize("extra,check", ALLOW_LIST_OVERRIDES.values(), ids=ALLOW_LIST_OVERRIDES.keys())
def test_an_override_gets_the_allow_lists_verdict(extra: list[str], check: str) -> None:
    profile = validate_profile(json.loads(SPARK3.read_text()), "p")
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, "tp3-triangle", hosts(3, {"container": {"docker_run_args": extra}}))
    (problem,) = [p for p in caught.value.problems if p.where.startswith(f"host {WORKER}: dgxspark_overrides")]
    assert problem.where == f"host {WORKER}: dgxspark_overrides.container.docker_run_args[0]", problem.render()
    assert f'"{check}": "<why>"' in problem.hint and f"refused by the rule {check}" in problem.hint
