# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sparkrun recipes in, a serving profile and an inventory out (plugin_utils/sparkrun/, playbooks/import_sparkrun.yml).

Recipes written in sparkrun's format (v1 and v2, several shapes) under tests/unit/fixtures/sparkrun/; the round trip
through the recipe tools/bench_peer.py writes from a plan; the playbook run for real, then plan.yml on its result.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
import yaml

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, hosts_from_inventory
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import parse_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.files import run_import
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.mapping import (
    SEED000_HOST,
    ImportRefused,
    import_recipe,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.recipe import RecipeError, load_recipe, render
from ansible_collections.dgxspark.cluster.tests.unit.conftest import FIXTURES, ROOT, SPARK3

RECIPES = FIXTURES / "sparkrun"
BIN = pathlib.Path(sys.executable).parent
HOSTS3 = ["192.0.2.10", "192.0.2.11", "192.0.2.12"]
FABRIC3 = ["198.51.100.10", "198.51.100.11", "198.51.100.12"]


def recipe_text(name: str) -> str:
    return (RECIPES / f"{name}.yaml").read_text()


def imported(name: str, hosts: list[str], fabric: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    return run_import(recipe_text(name), f"{name}.yaml", hosts, fabric, **kwargs)


def profile_of(result: dict[str, Any]) -> dict[str, Any]:
    return json.loads(result["files"]["serving-profile.json"])


def plan_of_files(files: dict[str, str], tmp_path: pathlib.Path) -> dict[str, Any]:
    """plan.yml's own reading of the written files: the hosts.yml groups and variables, the profile, build_plan."""
    inventory = yaml.safe_load(files["hosts.yml"])["dgxspark"]["children"]
    hostvars = {n: v for g in inventory.values() for n, v in g["hosts"].items()}
    groups = {g: list(inventory[g]["hosts"]) for g in inventory}
    hosts, both = hosts_from_inventory(hostvars, groups)
    profile = parse_profile(files["serving-profile.json"], str(tmp_path / "serving-profile.json"))
    shape = yaml.safe_load(files["group_vars/dgxspark.yml"])["dgxspark_shape"]
    return build_plan(profile, shape, hosts, both_groups=both)


# --------------------------------------------------------------------------- reading, as sparkrun 0.4.2 reads


def test_a_template_is_filled_from_options_over_the_variant_over_defaults() -> None:
    text = (
        "defaults: {a: 1, b: 2, c: 3}\nvariants: {v: {b: 20, c: 30, description: x}}\ncommand: vllm serve m {a} {b} {c}"
    )
    recipe = load_recipe(text, "r.yaml", variant="v", options={"c": 300})
    assert recipe.rendered == "vllm serve m 1 20 300"
    assert recipe.chain_origin == {"a": "defaults", "b": "variants.v", "c": "-o"}


@pytest.mark.parametrize(
    ("template", "chain", "rendered", "unresolved"),
    [
        ("--x {a}", {"a": "{b}", "b": 5}, "--x 5", ()),  # nested references resolve
        ("--j '{\"k\": {a}}'", {"a": 1}, "--j '{\"k\": 1}'", ()),  # a placeholder inside plain JSON
        ("--j '{{\"k\": {a}}}'", {"a": 1}, "--j '{\"k\": 1}'", ()),  # v1's escapes collapse
        ("--j '{\"k\":1}'", {}, "--j '{\"k\":1}'", ()),  # a brace span that names no key stays as written
        ("--x {missing}", {}, "--x {missing}", ("{missing}",)),
        ("--x \\  \n--y", {}, "--x \\\n--y", ()),  # a continuation broken by trailing blanks is repaired
    ],
)
def test_render_as_sparkrun(template: str, chain: dict[str, Any], rendered: str, unresolved: tuple[str, ...]) -> None:
    out, left, _used = render(template, chain)
    assert (out, left) == (rendered, unresolved)


@pytest.mark.parametrize(
    ("text", "runtime"),
    [
        ("command: vllm serve m", "vllm-distributed"),
        ("command: vllm serve m --distributed-executor-backend ray", "vllm-ray"),
        ("defaults: {distributed_executor_backend: ray}\ncommand: vllm serve m", "vllm-ray"),
        ("command: python3 -m sglang.launch_server --model m", "sglang"),
        ("command: llama-server -m m.gguf", "llama-cpp"),
        ("runtime: trtllm\ncommand: trtllm-serve m", "trtllm"),
    ],
)
def test_the_runtime_is_resolved_as_sparkrun_resolves_it(text: str, runtime: str) -> None:
    assert load_recipe(text, "r.yaml").runtime == runtime


@pytest.mark.parametrize(
    ("text", "variant", "says"),
    [
        ("a: [1", None, "not YAML at line"),
        ("- a list", None, "a recipe is a YAML mapping"),
        ("include: base\nmodel: m", None, "include:"),
        ("recipe_version: '3'", None, "recipe_version '3'"),
        ("command: [vllm, serve]", None, "command must be a string"),
        ("variants: {a: {}}", "b", "no variant 'b' in variants (the recipe offers: a)"),
        ("defaults: {tensor_parallel: many}", None, "defaults.tensor_parallel must be an integer"),
    ],
)
def test_a_recipe_that_cannot_be_read_says_why(text: str, variant: str | None, says: str) -> None:
    with pytest.raises(RecipeError, match=None) as caught:
        load_recipe(text, "r.yaml", variant=variant)
    assert any(says in problem for problem in caught.value.problems), caught.value.problems


# --------------------------------------------------------------------------- shapes of recipes


def test_a_v2_recipe_on_three_nodes_with_a_variant() -> None:
    result = imported("tp3-v2", HOSTS3, FABRIC3, variant="long")
    profile = profile_of(result)
    shape = profile["shapes"]["tp3-triangle"]
    assert profile["model"] == "qwen3-32b"
    assert profile["container"]["model_path"] == "Qwen/Qwen3-32B-FP8"
    assert shape["sizing"] == {
        "gpu_memory_utilization": 0.8,
        "max_model_len": 262144,  # the variant's, over the defaults' 131072
        "max_num_seqs": 2,
        "max_num_batched_tokens": 8192,
    }
    assert shape["fabric"]["hca"] == ["rocep1s0f0", "roceP2p1s0f0"]
    assert profile["container"]["serve_args"] == [
        "--kv-cache-dtype",
        "fp8",
        "--enable-prefix-caching",
        "--default-chat-template-kwargs",
        '{"enable_thinking": false}',
    ]
    assert "api" not in profile["container"]  # 0.0.0.0 refused: the head's management address, the default
    notes = "\n".join(result["notes"])
    assert "dropped command --host 0.0.0.0: an API bound to every address" in notes
    assert "dropped command --distributed-executor-backend ray" in notes
    assert "dropped env.NCCL_IB_MERGE_NICS=1: the plan refuses it: contradicts the seeds: seed 002 section 4.3" in notes
    assert "dropped env.HF_TOKEN=<redacted, 39 chars>: the plan refuses it: a secret in the environment" in notes
    assert "hf_abcdefghij" not in json.dumps(result)
    for key in ("metadata", "mods", "benchmark"):
        assert f"dropped {key}: " in notes
    # every mapped value cites the recipe setting it came from
    assert profile["sources"]["$.shapes.tp3-triangle.sizing.max_model_len"].endswith(
        "variant long: command --max-model-len 262144"
    )
    # the recipe leaves the KV cache to gpu_memory_utilization, which seed 000 refuses (kv-cache-explicit): the profile
    # waives it by name, saying where it came from and how to size it; a finding of the import, and the plan's warning
    reason = profile["waivers"]["kv-cache-explicit"]
    assert list(profile["waivers"]) == ["kv-cache-explicit"]
    assert reason.startswith(
        "imported from sparkrun recipe tp3-v2.yaml (variant long), which leaves the KV cache to "
        "--gpu-memory-utilization 0.8: "
    )
    assert "'Available KV cache memory'" in reason and "sizing.kv_cache_memory_bytes" in reason
    assert "memory.kv_cache_gib" in reason and reason.endswith("then remove this waiver")
    assert f"waived kv-cache-explicit -> $.waivers.kv-cache-explicit ({reason})" in result["notes"]
    waived = [w for w in result["warnings"] if "waived kv-cache-explicit" in w]
    assert len(waived) == 1 and f"({reason}): the KV cache is left to gpu_memory_utilization: seed 000" in waived[0]


def test_the_host_settings_added_are_seed_000s_and_no_seed_rule_warns_of_them() -> None:
    spark3_host = json.loads(SPARK3.read_text())["host"]
    assert SEED000_HOST == {key: spark3_host[key] for key in SEED000_HOST}
    for name, hosts, fabric in (
        ("tp3-v2", HOSTS3, FABRIC3),
        ("tp4-v1", [f"10.0.0.{i}" for i in (1, 2, 3, 4)], [f"10.99.4.{i}" for i in (1, 2, 3, 4)]),
        ("tp8-executor", [f"10.0.0.{i}" for i in range(1, 9)], [f"10.99.8.{i}" for i in range(1, 9)]),
    ):
        result = imported(name, hosts, fabric)
        assert profile_of(result)["host"] == SEED000_HOST
        # memguard-grace, memguard-floors, min-mem-available: silent at seed 000's own values
        assert not [w for w in result["warnings"] if "$.host." in w], name


def test_a_recipe_that_sizes_the_kv_cache_in_bytes_waives_nothing() -> None:
    result = imported("tp4-v1", [f"10.0.0.{i}" for i in (1, 2, 3, 4)], [f"10.99.4.{i}" for i in (1, 2, 3, 4)])
    profile = profile_of(result)
    assert "kv_cache_memory_bytes" in profile["shapes"]["tp4-ring"]["sizing"]
    assert "waivers" not in profile
    assert not [n for n in result["notes"] if n.startswith("waived")]
    assert not [w for w in result["warnings"] if "waived" in w or "kv-cache-explicit" in w]


BARE = (
    "model: org/m\ncontainer: img:1\ndefaults: {tensor_parallel: 3, max_model_len: 4096, max_num_seqs: 2,"
    " max_num_batched_tokens: 2048}\n"
)


def test_without_a_gpu_memory_utilization_the_waiver_names_vllms_default() -> None:
    profile = profile_of(run_import(BARE, "bare.yaml", HOSTS3, FABRIC3))
    assert "gpu_memory_utilization" not in profile["shapes"]["tp3-triangle"]["sizing"]
    assert profile["waivers"]["kv-cache-explicit"].startswith(
        "imported from sparkrun recipe bare.yaml, which leaves the KV cache to vLLM's default "
        "--gpu-memory-utilization (0.9): "
    )


def test_a_gpu_memory_utilization_over_the_memory_limit_gives_way_to_vllms_default_stated_or_refuses() -> None:
    # 0.95 x 121 GiB is over seed 000's --memory=112g: dropped, vLLM's default (0.9, 108.9 GiB) in its place, stated
    # so that the plan judges it (a flag dropped alone would leave the default unjudged)
    text = BARE.replace("max_num_batched_tokens: 2048", "max_num_batched_tokens: 2048, gpu_memory_utilization: 0.95")
    result = run_import(text, "gmu.yaml", HOSTS3, FABRIC3)
    assert profile_of(result)["shapes"]["tp3-triangle"]["sizing"]["gpu_memory_utilization"] == 0.9
    notes = "\n".join(result["notes"])
    assert "dropped command --gpu-memory-utilization 0.95: the plan refuses it: vLLM may use 114.95 GiB" in notes
    assert (
        "added vLLM's default --gpu-memory-utilization 0.9 -> $.shapes.tp3-triangle.sizing.gpu_memory_utilization"
        in notes
    )
    assert (
        "which leaves the KV cache to --gpu-memory-utilization 0.9:"
        in profile_of(result)["waivers"]["kv-cache-explicit"]
    )
    # under the recipe's own 16g neither fits: refused, naming both
    text = BARE.replace("max_num_batched_tokens: 2048", "max_num_batched_tokens: 2048, gpu_memory_utilization: 0.8")
    with pytest.raises(ImportRefused) as caught:
        run_import(text + "executor_config: {memory_limit: 16g}\n", "gmu16.yaml", HOSTS3, FABRIC3)
    assert caught.value.reasons == [
        "command --gpu-memory-utilization 0.8: the plan refuses it (vLLM may use 96.80 GiB (gpu_memory_utilization 0.8 "
        "x the 121 GiB of a GB10, seed 002 section 4.2), more than the container's --memory limit of 16 GiB: the rank "
        "is OOM-killed while it allocates its KV cache), and vLLM's default --gpu-memory-utilization 0.9 in its place "
        "too (vLLM may use 108.90 GiB (gpu_memory_utilization 0.9 x the 121 GiB of a GB10, seed 002 section 4.2), more "
        "than the container's --memory limit of 16 GiB: the rank is OOM-killed while it allocates its KV cache): "
        "change the recipe so that the plan takes one of them"
    ]


def test_without_a_variant_the_defaults_serve_and_the_variants_are_named() -> None:
    result = imported("tp3-v2", HOSTS3, FABRIC3)
    assert profile_of(result)["shapes"]["tp3-triangle"]["sizing"]["max_model_len"] == 131072
    assert any("variants (none chosen (offered: long)" in n for n in result["notes"])


def test_a_v1_recipe_on_four_nodes_with_escaped_braces_and_a_fork_flag() -> None:
    result = imported("tp4-v1", [f"10.0.0.{i}" for i in (1, 2, 3, 4)], [f"10.99.4.{i}" for i in (1, 2, 3, 4)])
    profile = profile_of(result)
    shape = profile["shapes"]["tp4-ring"]
    assert profile["upstream"] == "sparkrun-recipe:tp4-v1"  # the file's stem, not the v1 name: key
    assert profile["container"]["image"] == "ghcr.io/example/vllm-node:0.33.0"  # from image:
    assert shape["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert shape["fabric"] == {"transport": "oneshot-ring4", "nccl_net": "IB", "socket_ifname": "enP7s7"}
    assert profile["container"]["serve_args"][:2] == ["--hf-overrides", '{"rope_scaling": null}']
    assert profile["container"]["fork_flags"] == ["--max-parallel-prefills"]
    assert profile["container"]["api"] == {"bind": "loopback"}
    assert "dropped env.VLLM_HOST_IP=10.0.0.1: per rank" in "\n".join(result["notes"])


def test_eight_nodes_with_an_executor_config_one_option_of_which_a_rule_refuses() -> None:
    result = imported("tp8-executor", [f"10.0.0.{i}" for i in range(1, 9)], [f"10.99.8.{i}" for i in range(1, 9)])
    profile = profile_of(result)
    args = profile["container"]["docker_run_args"]
    assert "--privileged" not in args
    assert "--ulimit=nofile=1048576:1048576" in args  # added: NCCL 2.30 at 8 ranks
    assert profile["model_revision"] == "1bae0e10"
    notes = "\n".join(result["notes"])
    assert "dropped executor_config.privileged: --privileged: the plan refuses it" in notes
    assert "dropped env.NCCL_MAX_NCHANNELS=64: the plan refuses it: at 8 ranks" in notes
    assert "added seed 000 (inventories/spark3/serving-profile.json): --memory-swap=112g" in notes


def test_a_recipe_without_a_command_is_served_as_sparkrun_builds_it_from_the_chain() -> None:
    text = (
        "model: org/m\ncontainer: img:1\ndefaults: {tensor_parallel: 3, max_model_len: 4096, max_num_seqs: 2,"
        " max_num_batched_tokens: 2048, trust_remote_code: true, kv_cache_dtype: fp8}\n"
    )
    result = run_import(text, "bare.yaml", HOSTS3, FABRIC3)
    assert profile_of(result)["container"]["serve_args"] == ["--trust-remote-code", "--kv-cache-dtype", "fp8"]


# --------------------------------------------------------------------------- refusals, every reason at once


@pytest.mark.parametrize(
    ("text", "hosts", "options", "says"),
    [
        ("defaults: {tensor_parallel: 2}\ncommand: vllm serve m -tp {tensor_parallel}", HOSTS3[:2], None,
         "2 hosts given: the collection serves 3, 4 or 8 nodes"),
        ("min_nodes: 2\nmax_nodes: 2\ndefaults: {tensor_parallel: 2}\ncommand: vllm serve m -tp {tensor_parallel}",
         HOSTS3, None, "min_nodes/max_nodes: the recipe runs on 2..2 nodes, not 3"),
        ("defaults: {tensor_parallel: 2}\ncommand: vllm serve m -tp {tensor_parallel}", HOSTS3, None,
         "tensor_parallel 2: the recipe runs on 2 node(s), and 3 hosts are given"),
        ("defaults: {tensor_parallel: 3, pipeline_parallel: 2}\ncommand: vllm serve m -tp 3 -pp 2", HOSTS3, None,
         "pipeline_parallel 2: pipeline parallelism is not served"),
        ("defaults: {tensor_parallel: 3, data_parallel: 2}\ncommand: vllm serve m -tp 3", HOSTS3, None,
         "data_parallel 2: data parallelism (replicas) is not served"),
        ("command: python3 -m sglang.launch_server --model m --tp 3", HOSTS3, None,
         "runtime sglang: the collection serves vLLM only"),
        ("runtime: llama-cpp\ncommand: llama-server -m m.gguf", HOSTS3, None, "runtime llama-cpp"),
        ("solo_only: true\ncommand: vllm serve m", HOSTS3, None, "solo: the recipe runs on one node"),
        ("defaults: {tensor_parallel: 3}\ncommand: vllm serve m -tp 3 --seed {seed}", HOSTS3, None,
         "placeholders with no value in defaults, the variant or the options: {seed}"),
        ("defaults: {tensor_parallel: 3}\ncommand: cd /x && vllm serve m -tp 3", HOSTS3, None,
         "command: shell syntax ['&&']"),
        ("defaults: {tensor_parallel: 3}\ncommand: vllm serve m -tp 3 --max-model-len 4096", HOSTS3, None,
         "max_num_seqs: the recipe leaves it to vLLM's default"),
    ],
)  # fmt: skip
def test_what_the_collection_does_not_serve_is_refused_with_the_reason(
    text: str, hosts: list[str], options: dict[str, Any] | None, says: str
) -> None:
    with pytest.raises(ImportRefused) as caught:
        run_import("container: img:1\n" + text, "r.yaml", hosts, None, options=options)
    assert any(says in reason for reason in caught.value.reasons), caught.value.reasons


def test_sparkruns_options_carry_a_tp2_recipe_to_three_nodes() -> None:
    text = (RECIPES / "tp3-v2.yaml").read_text().replace("tensor_parallel: 3", "tensor_parallel: 2")
    with pytest.raises(ImportRefused, match="tensor_parallel 2"):
        run_import(text, "tp2.yaml", HOSTS3, FABRIC3)
    result = run_import(text, "tp2.yaml", HOSTS3, FABRIC3, options={"tensor_parallel": 3})
    assert profile_of(result)["shapes"]["tp3-triangle"]["nodes"] == 3


# --------------------------------------------------------------------------- the inventory, fabric missing or given


def test_without_fabric_addresses_the_inventory_marks_them_missing_and_the_plan_refuses_it(
    tmp_path: pathlib.Path,
) -> None:
    result = imported("tp3-v2", HOSTS3)
    assert result["fabric_missing"]
    assert result["files"]["hosts.yml"].count("dgxspark_fabric_address: null  # MISSING") == 3
    with pytest.raises(ProfileError) as caught:
        plan_of_files(result["files"], tmp_path)
    assert [p.where for p in caught.value.problems] == [
        f"host {h}: dgxspark_fabric_address" for h in ("spark-head", "spark-w1", "spark-w2")
    ]
    assert all(p.message == "no fabric address" for p in caught.value.problems)


def test_with_fabric_addresses_ranks_follow_the_hosts_order(tmp_path: pathlib.Path) -> None:
    hosts = ["sparkc", "sparka", "sparkb"]
    plan = plan_of_files(imported("tp3-v2", hosts, FABRIC3)["files"], tmp_path)
    assert [(r["host"], r["rank"], r["fabric_address"]) for r in plan["ranks"]] == list(
        zip(hosts, range(3), FABRIC3, strict=True)
    )


# --------------------------------------------------------------------------- the round trip through bench_peer's recipe


def bench_peer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_peer", ROOT / "tools" / "bench_peer.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_peer"] = module
    spec.loader.exec_module(module)
    return module


# What a recipe cannot carry: it has no waivers and no host section. The sim inventories waive the seed rules their
# containers break, each with its reason; what the import writes in their place, per inventory, is stated here.
# Every sim inventory scales the guard's floors and the pre-boot floor to containers of a few GiB (memguard-floors,
# min-mem-available); the import writes seed 000's host settings, which need no waiver. The host section is not part of
# a rank's spec, so the ranks are the same.
SIM_HOST_DIFFERENCES = {  # key: (the sim's, the import's = seed 000's)
    "memguard_gib": (1, 3),
    "startup_memguard_gib": (1.5, 5),
    "min_mem_available_gib": (4, 100),
    "helper_services": (["dgxspark-sim-helper.service"], None),
}
SIM_GUARD_WAIVERS = ["memguard-floors", "min-mem-available"]
# sim8 also waives what its stand-in engine and this machine cannot give (nofile-at-8-ranks, gmu-within-memory-limit,
# kv-cache-explicit, nccl-in-budget).
SIM8_WAIVERS = [
    "nofile-at-8-ranks",
    *SIM_GUARD_WAIVERS,
    "kv-cache-explicit",
    "gmu-within-memory-limit",
    "nccl-in-budget",
]


def round_trip(
    cluster: str, edit: Callable[[dict[str, Any]], None] | None = None
) -> tuple[Any, list[dict[str, Any]], Any, dict[str, Any]]:
    """Our profile and its plan's ranks, the recipe tools/bench_peer.py writes from them (``edit``ed), the import of it
    on the same hosts, and the plan of the import with the hosts named as the inventory names them."""
    inventory = yaml.safe_load((ROOT / "inventories" / cluster / "hosts.yml").read_text())["dgxspark"]["children"]
    ours = [(n, v) for g in ("dgxspark_head", "dgxspark_workers") for n, v in inventory[g]["hosts"].items()]
    hosts = [
        Host(n, rank=v["dgxspark_rank"], fabric_address=v["dgxspark_fabric_address"], head=v["dgxspark_rank"] == 0,
             management_address=v["ansible_host"])
        for n, v in ours
    ]  # fmt: skip
    profile = parse_profile((ROOT / "inventories" / cluster / "serving-profile.json").read_text(), cluster)
    plan = build_plan(profile, None, hosts)
    ranks = sorted(plan["ranks"], key=lambda r: r["rank"])
    peer = bench_peer()
    head = ranks[0]
    peer_plan = peer.Plan(
        image=head["image"],
        entrypoint=head["entrypoint"],
        commands=[r["command"] for r in ranks],
        environment=head["environment"],
        docker_run_args=head["docker_run_args"],
        api_port=head["api_port"],
        master_port=plan["master_port"],
        nodes=plan["nodes"],
    )
    recipe, _left = peer.recipe_for(peer_plan, head["image"])
    if edit is not None:
        edit(recipe)
    by_rank = sorted(hosts, key=lambda h: h.rank)
    back = import_recipe(
        load_recipe(json.dumps(recipe), f"recipe-{cluster}.yaml"),
        [str(h.management_address) for h in by_rank],
        [str(h.fabric_address) for h in by_rank],
    )
    names = {f["name"]: h.name for f, h in zip(back.hosts, by_rank, strict=True)}  # the import's names -> ours
    again = build_plan(
        parse_profile(json.dumps(back.profile), "imported"),
        back.shape,
        [
            Host(
                names[h["name"]],
                rank=i,
                fabric_address=h["fabric_address"],
                head=i == 0,
                management_address=h["ansible_host"],
            )
            for i, h in enumerate(back.hosts)
        ],  # fmt: skip
    )
    return profile, ranks, back, again


def host_differences(ours: dict[str, Any], back: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {k: (ours.get(k), back.get(k)) for k in sorted(set(ours) | set(back)) if ours.get(k) != back.get(k)}


# what our profile renders that a sparkrun recipe has no setting for (tools/bench_peer.py leaves it out of the
# recipe's executor_config): sim3 pins its ranks' CPUs, as seed 000 does
NOT_IN_A_RECIPE = {"sim3": ["--cpuset-cpus=0-1"], "sim4": []}


def commands(argv: list[str]) -> list[str]:
    """A rank's docker run command without the labels that carry hashes of the profile and the spec."""
    return [a for a in argv if not a.startswith(("dgxspark.cluster.profile_sha256=", "dgxspark.cluster.spec_sha256="))]


@pytest.mark.parametrize("cluster", ["sim3", "sim4"])
def test_round_trip_our_profile_to_bench_peers_recipe_and_back_gives_the_same_ranks(cluster: str) -> None:
    """Our profile, the recipe tools/bench_peer.py writes from its plan, the import: the same spec hash per rank once
    the hosts are named as the inventory names them; only the host section differs, as stated above."""
    profile, ranks, back, again = round_trip(cluster)
    dropped = NOT_IN_A_RECIPE[cluster]
    if not dropped:
        assert [(r["host"], r["spec_sha256"]) for r in again["ranks"]] == [(r["host"], r["spec_sha256"]) for r in ranks]
    else:  # the same commands but for what a recipe cannot say, so another spec hash
        assert [(r["host"], commands(r["argv"])) for r in again["ranks"]] == [
            (r["host"], commands([a for a in r["argv"] if a not in dropped])) for r in ranks
        ]
        assert all(set(dropped) <= set(r["argv"]) for r in ranks)
        assert not any(set(dropped) & set(r["argv"]) for r in again["ranks"])
    assert list(profile.data["waivers"]) == SIM_GUARD_WAIVERS
    assert "waivers" not in back.profile  # the recipe sizes the KV cache in bytes (--kv-cache-memory-bytes)
    assert host_differences(profile.data["host"], back.profile["host"]) == SIM_HOST_DIFFERENCES
    assert back.profile["host"] == SEED000_HOST
    assert not [w for w in again["warnings"] if "$.host." in w or "waived" in w]


def test_round_trip_of_sim8_refuses_what_only_its_waivers_allow_and_keeps_its_commands_on_a_gb10() -> None:
    """sim8's recipe runs gpu_memory_utilization 0.8 (96.8 GiB) under --memory=16g, which sim8 waives
    (gmu-within-memory-limit): on a GB10 the rank would be OOM-killed. Without the waiver the plan refuses the 0.8, and
    vLLM's default 0.9 in its place, so the import refuses the recipe, naming both. The same recipe without its 16g
    (a GB10's, where the import adds seed 000's 112g) gives the same commands and environment; the options differ
    exactly where sim8's waivers and the memory limit do."""
    profile = parse_profile((ROOT / "inventories" / "sim8" / "serving-profile.json").read_text(), "sim8")
    assert list(profile.data["waivers"]) == SIM8_WAIVERS
    with pytest.raises(ImportRefused) as caught:
        round_trip("sim8")
    assert [r.split(" (vLLM may use ")[0] for r in caught.value.reasons] == [
        "command --gpu-memory-utilization 0.8: the plan refuses it"
    ]
    assert "vLLM's default --gpu-memory-utilization 0.9 in its place too" in caught.value.reasons[0]
    assert "more than the container's --memory limit of 16 GiB" in caught.value.reasons[0]

    def on_a_gb10(recipe: dict[str, Any]) -> None:
        del recipe["executor_config"]["memory_limit"]

    profile, ranks, back, again = round_trip("sim8", on_a_gb10)
    notes = "\n".join(n.render() for n in back.notes)
    # nofile-at-8-ranks: the recipe's 20000 is refused and seed 002's 1048576 takes its place
    assert "dropped executor_config.ulimit: --ulimit=nofile=20000:20000: the plan refuses it" in notes
    swap = {
        "--ulimit=nofile=20000:20000": "--ulimit=nofile=1048576:1048576",
        "--memory=16g": "--memory=112g",  # seed 000's, added: the recipe no longer says
        "--memory-swap=16g": "--memory-swap=112g",
    }
    for before, after in zip(ranks, again["ranks"], strict=True):
        assert (after["host"], after["command"], after["environment"]) == (
            before["host"], before["command"], before["environment"],
        )  # fmt: skip
        assert after["docker_run_args"] == [swap.get(a, a) for a in before["docker_run_args"]]
    # kv-cache-explicit: the shape leaves the KV cache to gpu_memory_utilization 0.8; the import waives it with its own
    # reason, and the plan warns every run (sim8's reason was its stand-in engine)
    assert list(back.profile["waivers"]) == ["kv-cache-explicit"]
    assert back.profile["waivers"]["kv-cache-explicit"].startswith(
        "imported from sparkrun recipe recipe-sim8.yaml, which leaves the KV cache to --gpu-memory-utilization 0.8: "
    )
    # nccl-in-budget: a recipe has no memory budget, so seed 002's warning is given, unwaived
    waived = [w for w in again["warnings"] if "waived" in w]
    assert len(waived) == 1 and "waived kv-cache-explicit (imported from sparkrun recipe recipe-sim8.yaml" in waived[0]
    assert len([w for w in again["warnings"] if "$.shapes.tp8-switch.memory: no memory budget at 8 ranks" in w]) == 1
    # memguard-floors, min-mem-available: seed 000's host settings, no waiver, no warning
    assert host_differences(profile.data["host"], back.profile["host"]) == SIM_HOST_DIFFERENCES
    assert not [w for w in again["warnings"] if "$.host." in w]


# --------------------------------------------------------------------------- the playbook, for real


def playbook(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    command = [str(BIN / "ansible-playbook"), *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


def test_the_playbook_imports_never_overwrites_without_force_and_plan_yml_takes_the_result(
    tmp_path: pathlib.Path,
) -> None:
    dest = tmp_path / "imported"
    # loopback management addresses: plan.yml contacts no node, and if it tried, nothing else would be reached
    common = [
        "-e", f"sparkrun_recipe={RECIPES / 'tp3-v2.yaml'}", "-e", "sparkrun_hosts=127.0.0.1,127.0.0.2,127.0.0.3",
        "-e", "import_fabric=10.99.3.1,10.99.3.2,10.99.3.3", "-e", f"import_dest={dest}",
    ]  # fmt: skip
    run = playbook("playbooks/import_sparkrun.yml", *common)
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "group_vars/dgxspark.yml",
        "hosts.yml",
        "serving-profile.json",
    ]
    assert "next: ansible-playbook playbooks/plan.yml -i" in run.stdout
    # the waiver is a finding of the import's report, and plan.yml warns of it on every run until the KV cache is sized
    report = " ".join(run.stdout.split())  # the callback wraps long lines
    assert "waived kv-cache-explicit -> $.waivers.kv-cache-explicit (imported from sparkrun recipe" in report
    assert "before serving: the profile waives kv-cache-explicit" in report
    planned = playbook("playbooks/plan.yml", "-i", str(dest))
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert "waived kv-cache-explicit (imported from sparkrun recipe" in " ".join(
        (planned.stdout + planned.stderr).split()
    )
    assert "rank 2 (worker) on spark-w2, fabric 10.99.3.3" in planned.stdout
    assert "--node-rank 2" in planned.stdout

    written = (dest / "serving-profile.json").read_text()
    again = playbook("playbooks/import_sparkrun.yml", *common, "-e", "sparkrun_variant=long")
    assert again.returncode != 0
    assert "already exist: nothing was written" in again.stdout + again.stderr
    assert (dest / "serving-profile.json").read_text() == written
    forced = playbook(
        "playbooks/import_sparkrun.yml", *common, "-e", "sparkrun_variant=long", "-e", "import_force=true"
    )
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert (
        json.loads((dest / "serving-profile.json").read_text())["shapes"]["tp3-triangle"]["sizing"]["max_num_seqs"] == 2
    )


def test_the_playbook_refuses_a_recipe_it_cannot_serve_and_writes_nothing(tmp_path: pathlib.Path) -> None:
    recipe = tmp_path / "sglang.yaml"
    recipe.write_text("container: img:1\ncommand: python3 -m sglang.launch_server --model m --tp 3\n")
    dest = tmp_path / "out"
    run = playbook(
        "playbooks/import_sparkrun.yml", "-e", f"sparkrun_recipe={recipe}", "-e", "sparkrun_hosts=a1,a2,a3",
        "-e", f"import_dest={dest}",
    )  # fmt: skip
    assert run.returncode != 0
    assert "runtime sglang: the collection serves vLLM only" in run.stdout + run.stderr
    assert not dest.exists()
