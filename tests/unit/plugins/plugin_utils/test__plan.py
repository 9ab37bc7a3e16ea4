# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import fabric_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host, hosts_from_inventory
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import HostSpec, build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import vllm as _vllm
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile, validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import check_serve_args, parse_serve_args
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm_serve_args import SERVE_OPTIONS
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, edited


def cluster(n: int, **per_host: dict[str, Any]) -> list[Host]:
    hosts = []
    for i in range(n):
        name = "spark-head" if i == 0 else f"spark-w{i}"
        fields: dict[str, Any] = {"rank": i, "head": i == 0, "fabric_address": f"198.51.100.{10 + i}"}
        fields.update(per_host.get(name, {}))
        hosts.append(Host(name, **fields))
    return hosts


def problems(profile: Any, shape: str, hosts: list[Host]) -> list[str]:
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, shape, hosts)
    return [p.render() for p in caught.value.problems]


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.parametrize(
    "path,shape,nodes",
    [(SPARK3, "tp3-triangle", 3), (SPARK3, "tp4-ring", 4), (SPARK8, "tp8-300k", 8), (SPARK8, "tp8-1m", 8)],
)
def test_every_rank_is_rendered(path: Any, shape: str, nodes: int) -> None:
    plan = build_plan(load_profile(str(path)), shape, cluster(nodes))
    assert plan["nodes"] == nodes and len(plan["ranks"]) == nodes
    assert plan["head"] == "spark-head" and plan["master_addr"] == "198.51.100.10"
    for rank in plan["ranks"]:
        argv = rank["argv"]
        assert argv[:5] == ["docker", "run", "--detach", "--name", "vllm_dsv41"]
        image_at = argv.index(rank["image"])
        assert argv[image_at - 2 : image_at] == ["--entrypoint", "vllm"] and argv[image_at + 1] == "serve"
        assert flag(argv, "--tensor-parallel-size") == str(nodes)
        assert flag(argv, "--nnodes") == str(nodes)
        assert flag(argv, "--node-rank") == str(rank["rank"])
        assert flag(argv, "--master-addr") == "198.51.100.10"
        assert flag(argv, "--distributed-executor-backend") == "mp"
        if rank["rank"] == 0:
            assert rank["role"] == "head" and flag(argv, "--port") == "8000" and "--headless" not in argv
        else:
            assert rank["role"] == "worker" and "--headless" in argv and "--port" not in argv
        assert all("\n" not in a for a in argv)


def test_tp3_renders_seed000_sizing() -> None:
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", cluster(3))
    argv = plan["ranks"][1]["argv"]
    assert flag(argv, "--max-model-len") == "1048576"
    assert flag(argv, "--max-num-seqs") == "4"
    assert flag(argv, "--max-num-batched-tokens") == "6144"
    assert flag(argv, "--kv-cache-memory-bytes") == "2362232012"
    assert flag(argv, "--prefix-cache-retention-interval") == "512"
    assert "--ulimit=memlock=-1:-1" in argv and "--cap-add=IPC_LOCK" in argv
    assert plan["ranks"][1]["ulimits"]["memlock"] == {"soft": -1, "hard": -1}


def test_tp8_renders_seed002() -> None:
    plan = build_plan(load_profile(str(SPARK8)), "tp8-300k", cluster(8))
    rank = plan["ranks"][3]
    assert rank["image"] == "vllm-dsv41:engram-mem"
    assert flag(rank["argv"], "--gpu-memory-utilization") == "0.8"
    assert flag(rank["argv"], "--block-size") == "128"
    assert json.loads(flag(rank["argv"], "--speculative-config"))["num_speculative_tokens"] == 5
    assert rank["environment"]["NCCL_MAX_NCHANNELS"] == "8"
    assert rank["environment"]["VLLM_FLASHINFER_AUTOTUNE"] == "0"
    assert rank["ulimits"]["nofile"] == {"soft": 1048576, "hard": 1048576}


def test_engram_on_disk_alone_sets_dsv41_engram_disk_on_every_rank() -> None:
    """Seed 002 section 5.2: Engram-on-disk is DSV41_ENGRAM_DISK=1; engram.placement disk sets it without the
    shape's environment naming it, and placement host-memory leaves it out."""
    profile = json.loads(SPARK8.read_text())
    del profile["shapes"]["tp8-1m"]["environment"]["DSV41_ENGRAM_DISK"]
    plan = build_plan(validate_profile(profile), "tp8-1m", cluster(8))
    assert {rank["environment"]["DSV41_ENGRAM_DISK"] for rank in plan["ranks"]} == {"1"}
    plan = build_plan(validate_profile(profile), "tp8-300k", cluster(8))
    assert not [rank for rank in plan["ranks"] if "DSV41_ENGRAM_DISK" in rank["environment"]]


# Seed 002 section 1: "Beide configuraties gebruiken speculatieve decodering (speculative decoding) met DSpark k=5,
# CUDA graphs (modus FULL_AND_PIECEWISE), en hebben vision en tool calling ingeschakeld." The seed names the mode,
# not the flags: spark8 takes them from the boot10 recipe the seed says it adapts (the profile's sources cite it).
# vLLM's CUDAGraphMode members (vllm/config/compilation.py); the serve logs in ../shared/hardware-samples print
# the one used here as <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>.
CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


@pytest.mark.parametrize("shape", ["tp8-300k", "tp8-1m"])
def test_spark8_renders_seed002s_serving_options_as_vllm_0_33_flags(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = build_plan(load_profile(str(SPARK8)), shape, cluster(8))
    # Lift the guard against serve_args that set what the collection renders: here every option of the rendered
    # command, the collection's own included, is judged against vLLM 0.33.0's parser table, value and all.
    monkeypatch.setattr(_vllm, "RENDERED_FLAGS", {})
    monkeypatch.setattr(_vllm, "RENDERED_DESTS", {})
    speculative = load_profile(str(SPARK8)).data["shapes"][shape]["speculative_config"]
    k, seqs = speculative["num_speculative_tokens"], plan["ranks"][0]["agreement"]["--max-num-seqs"]
    for rank in plan["ranks"]:
        command = rank["command"]
        assert command[:2] == ["serve", "/models/DeepSeek-V4.1-Flash"]
        out = Collector("spark8")
        check_serve_args(command[2:], (), f"{shape} rank {rank['rank']}", out)
        assert [p.render() for p in out.items] == []
        options = {arg.flag: arg.value for arg in parse_serve_args(command[2:])}
        assert set(options) <= set(SERVE_OPTIONS)
        graphs = json.loads(options["--compilation-config"])
        assert graphs["cudagraph_mode"] == "FULL_AND_PIECEWISE" and graphs["cudagraph_mode"] in CUDAGRAPH_MODES
        # an exact graph for every DSpark decode batch: multiples of k (drafts) and of k + 1 (verified tokens)
        assert graphs["cudagraph_capture_sizes"] == sorted(
            set(range(k, k * int(seqs) + 1, k)) | set(range(k + 1, (k + 1) * int(seqs) + 1, k + 1))
        )
        assert rank["environment"]["VLLM_USE_BREAKABLE_CUDAGRAPH"] == "1"
        assert "--enforce-eager" not in options
        # vision on: images accepted, the language model not served alone
        assert json.loads(options["--limit-mm-per-prompt"]) == {"image": 4} and "--language-model-only" not in options
        # tool calling on
        assert "--enable-auto-tool-choice" in options and options["--tool-call-parser"] == "deepseek_v41"
        assert json.loads(options["--speculative-config"]) == speculative


HOST_CASES = {
    "too few hosts": (lambda: cluster(2), ["runs on 3 nodes but the inventory has 2"]),
    "two heads": (lambda: cluster(3, **{"spark-w1": {"head": True}}), ["exactly one head", "the head must be rank 0"]),
    "head not rank 0": (
        lambda: cluster(3, **{"spark-head": {"rank": 2}}),
        ["host spark-head: dgxspark_rank: the head must be rank 0", "the same rank on several hosts"],
    ),
    "duplicate ranks": (lambda: cluster(3, **{"spark-w2": {"rank": 1}}), ["dgxspark_rank 1: the same rank"]),
    "ranks with a gap": (lambda: cluster(3, **{"spark-w2": {"rank": 5}}), ["ranks must be 0..N-1", "missing [2]"]),
    "no rank": (lambda: cluster(3, **{"spark-w1": {"rank": None}}), ["host spark-w1: dgxspark_rank: no rank given"]),
    "rank not a number": (lambda: cluster(3, **{"spark-w1": {"rank": "one"}}), ["not a rank", 'found "one"']),
    "no fabric address": (
        lambda: cluster(3, **{"spark-w2": {"fabric_address": None}}),
        ["host spark-w2: dgxspark_fabric_address: no fabric address"],
    ),
    "bad fabric address": (
        lambda: cluster(3, **{"spark-w2": {"fabric_address": "198.51.100.300"}}),
        ['host spark-w2: dgxspark_fabric_address: not an IPv4 address (found "198.51.100.300"'],
    ),
    "IPv6 fabric address": (
        lambda: cluster(3, **{"spark-w2": {"fabric_address": "fd00::12"}}),
        ['host spark-w2: dgxspark_fabric_address: not an IPv4 address (found "fd00::12"', "the fabric is IPv4"],
    ),
    "worker at rank 0": (
        lambda: cluster(3, **{"spark-w1": {"rank": 0}}),
        ["host spark-w1: dgxspark_rank: rank 0 is the head's; this host is a worker"],
    ),
    "refused docker option in an override": (
        lambda: cluster(3, **{"spark-w1": {"overrides": {"container": {"docker_run_args": ["--env-file=/x"]}}}}),
        ["host spark-w1: dgxspark_overrides.container.docker_run_args[0]: --env-file is not allowed here"],
    ),
    "shared fabric address": (
        lambda: cluster(3, **{"spark-w2": {"fabric_address": "198.51.100.11"}}),
        ["the same fabric address on several hosts"],
    ),
    "misspelt override": (
        lambda: cluster(3, **{"spark-w1": {"overrides": {"sizing": {"max_num_seq": 6}}}}),
        ["host spark-w1: dgxspark_overrides.sizing.max_num_seq", "did you mean 'max_num_seqs'"],
    ),
}


@pytest.mark.parametrize("make_hosts,fragments", HOST_CASES.values(), ids=HOST_CASES.keys())
def test_inventory_problems(make_hosts: Any, fragments: list[str]) -> None:
    rendered = problems(load_profile(str(SPARK3)), "tp3-triangle", make_hosts())
    for fragment in fragments:
        assert any(fragment in p for p in rendered), (fragment, rendered)
    assert len(set(rendered)) == len(rendered), rendered


def test_a_refused_option_in_an_override_is_one_problem_at_its_path() -> None:
    hosts = cluster(3, **{"spark-w1": {"overrides": {"container": {"docker_run_args": ["--cpus=4", "-p", "80:80"]}}}})
    rendered = problems(load_profile(str(SPARK3)), "tp3-triangle", hosts)
    assert rendered == [
        "inventory: host spark-w1: dgxspark_overrides.container.docker_run_args[1]: --publish is not allowed here "
        '(found "-p 80:80"). ranks run on the host\'s network (--network=host): there is no container network to '
        "give addresses, aliases, links or published ports on; the head serves on container.api_port of the host"
    ]


@pytest.mark.parametrize(
    "override,key",
    [
        ({"sizing": {"max_num_seqs": 6}}, "--max-num-seqs"),
        ({"sizing": {"max_num_batched_tokens": 8192}}, "--max-num-batched-tokens"),
        ({"sizing": {"max_model_len": 524288}}, "--max-model-len"),
        ({"sizing": {"gpu_memory_utilization": 0.7}}, "--gpu-memory-utilization"),
        ({"sizing": {"kv_cache_memory_bytes": 2000000000}}, "--kv-cache-memory-bytes"),
        ({"container": {"image": "spark-ds41f:1031"}}, "image"),
        ({"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}, "--speculative-config"),
        ({"environment": {"NCCL_ALGO": "Tree"}}, "env NCCL_ALGO"),
    ],
)
def test_override_that_breaks_agreement_is_caught(override: dict[str, Any], key: str) -> None:
    rendered = problems(load_profile(str(SPARK3)), "tp3-triangle", cluster(3, **{"spark-w2": {"overrides": override}}))
    matching = [p for p in rendered if p.startswith(f"inventory: rank agreement: {key}:")]
    assert matching, rendered
    # Side by side: every host and its value.
    assert all(f"{h} (rank {i})" in matching[0] for i, h in enumerate(["spark-head", "spark-w1", "spark-w2"]))
    assert "PR #44718" in matching[0]


def test_model_revision_must_agree() -> None:
    profile = load_profile(str(SPARK3))
    plan = build_plan(profile, "tp3-triangle", cluster(3))
    assert all(r["agreement"]["model_revision"] == "1bae0e10" for r in plan["ranks"])
    assert all(r["labels"]["dgxspark.cluster.model_revision"] == "1bae0e10" for r in plan["ranks"])


def test_per_host_settings_that_may_differ() -> None:
    hosts = cluster(
        3,
        **{
            "spark-w1": {
                "overrides": {
                    "container": {"docker_run_args": ["--cpuset-cpus=0-9"]},
                    "fabric": {"hca": ["rocep1s0f1", "roceP2p1s0f1"], "gid_index": 3},
                    "environment": {"NCCL_DEBUG": "INFO"},
                }
            },
        },
    )
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", hosts)
    w1 = plan["ranks"][1]
    assert w1["argv"].count("--cpuset-cpus=0-9") == 1
    assert w1["environment"]["NCCL_IB_HCA"] == "=rocep1s0f1,roceP2p1s0f1"
    assert w1["environment"]["NCCL_IB_GID_INDEX"] == "3"
    assert w1["spec_sha256"] != plan["ranks"][2]["spec_sha256"]


def test_override_with_a_known_bad_setting_is_caught() -> None:
    hosts = cluster(3, **{"spark-w1": {"overrides": {"environment": {"NCCL_NVLS_ENABLE": "1"}}}})
    rendered = problems(load_profile(str(SPARK3)), "tp3-triangle", hosts)
    assert any("host spark-w1: dgxspark_overrides.environment.NCCL_NVLS_ENABLE" in p for p in rendered), rendered


def test_hosts_from_inventory() -> None:
    hostvars = {
        "a": {"dgxspark_rank": 0, "dgxspark_fabric_address": "198.51.100.1"},
        "b": {"dgxspark_rank": 1, "dgxspark_fabric_address": "198.51.100.2"},
        "c": {
            "dgxspark_rank": 2,
            "dgxspark_fabric_address": "198.51.100.3",
            "dgxspark_overrides": {"sizing": {"max_num_seqs": 4}},
        },
    }
    hosts, both = hosts_from_inventory(hostvars, {"dgxspark_head": ["a"], "dgxspark_workers": ["b", "c", "a"]})
    assert [h.name for h in hosts] == ["a", "b", "c"] and both == ["a"]
    assert hosts[0].head and not hosts[1].head
    assert hosts[2].overrides == {"sizing": {"max_num_seqs": 4}}
    with pytest.raises(ProfileError, match="in both dgxspark_head and dgxspark_workers"):
        build_plan(load_profile(str(SPARK3)), "tp3-triangle", hosts, both_groups=both)


def test_entrypoint_is_explicit_for_any_image(spark3: dict[str, Any]) -> None:
    document = edited(spark3, {"container/entrypoint": ["/opt/venv/bin/vllm", "serve"]})
    plan = build_plan(validate_profile(document), "tp3-triangle", cluster(3))
    argv = plan["ranks"][0]["argv"]
    at = argv.index("--entrypoint")
    assert argv[at : at + 4] == ["--entrypoint", "/opt/venv/bin/vllm", "spark-ds41f:1030", "serve"]


def test_container_name_can_be_set(spark3: dict[str, Any]) -> None:
    plan = build_plan(validate_profile(edited(spark3, {"container/name": "dsv41_canary"})), None, cluster(3))
    assert plan["container_name"] == "dsv41_canary"
    assert all(r["argv"][4] == "dsv41_canary" for r in plan["ranks"])


def test_the_fabric_roles_discoveries_fill_what_the_profile_leaves_open() -> None:
    found = {"hca": ["rocep1s0f0", "rocep1s0f1"], "socket_ifname": "=enp1s0f0np0,enp1s0f1np1", "gid_index": 3}
    hosts, _both = hosts_from_inventory(
        {
            "spark-head": {"dgxspark_rank": 0, "dgxspark_fabric_address": "198.51.100.10", "fabric_nccl": found},
            "spark-w1": {"dgxspark_rank": 1, "dgxspark_fabric_address": "198.51.100.11"},
            "spark-w2": {"dgxspark_rank": 2, "dgxspark_fabric_address": "198.51.100.12", "fabric_nccl": "bogus"},
        },
        {"dgxspark_head": ["spark-head"], "dgxspark_workers": ["spark-w1", "spark-w2"]},
    )
    data = json.loads(SPARK3.read_text())
    data["shapes"]["tp3-triangle"]["fabric"].pop("hca", None)
    data["shapes"]["tp3-triangle"]["fabric"].pop("gid_index", None)
    data["shapes"]["tp3-triangle"]["fabric"]["socket_ifname"] = "=enp1s0f1np1"
    ranks = build_plan(validate_profile(data), "tp3-triangle", hosts)["ranks"]
    head = ranks[0]["environment"]
    assert head["NCCL_IB_HCA"] == "=rocep1s0f0,rocep1s0f1" and head["NCCL_IB_GID_INDEX"] == "3"
    # the profile names the socket interface: it wins over what was found
    assert head["NCCL_SOCKET_IFNAME"] == "=enp1s0f1np1"
    # a host the fabric role did not reach (or with a value that is not its result) gets the profile's own
    assert "NCCL_IB_HCA" not in ranks[1]["environment"] and "NCCL_IB_HCA" not in ranks[2]["environment"]


@pytest.mark.parametrize(
    "address",
    ["fd00::12", "::ffff:198.51.100.12", "127.0.0.1", "0.0.0.0", "0.0.0.7", "224.0.0.1", "240.0.0.1", "nope", ""],
)
def test_an_address_the_fabric_cannot_use_fails_the_serving_plan_as_it_fails_the_fabric_plan(address: str) -> None:
    hosts = cluster(3, **{"spark-w2": {"fabric_address": address}})
    with pytest.raises(ProfileError) as serving:
        build_plan(load_profile(str(SPARK3)), "tp3-triangle", hosts)
    with pytest.raises(ProfileError) as fabric:
        fabric_plan("triangle", hosts)
    assert [p.as_dict() for p in serving.value.problems] == [p.as_dict() for p in fabric.value.problems]
    (problem,) = serving.value.problems
    assert problem.where == "host spark-w2: dgxspark_fabric_address" and problem.source == "inventory"


def test_the_plan_reads_hosts_as_the_fabric_plan_does() -> None:
    hosts = cluster(3, **{"spark-w1": {"rank": "1", "fabric_address": " 198.51.100.11 "}})
    plan = build_plan(load_profile(str(SPARK3)), "tp3-triangle", hosts)
    fabric = fabric_plan("triangle", hosts)
    assert [(r["host"], r["rank"], r["fabric_address"]) for r in plan["ranks"]] == [
        (h.host, h.rank, h.address) for h in sorted(fabric.values(), key=lambda h: h.rank)
    ]
    assert plan["ranks"][1]["environment"]["VLLM_HOST_IP"] == "198.51.100.11"


def test_every_rank_carries_what_starts_it() -> None:
    plan = build_plan(load_profile(str(SPARK8)), "tp8-300k", cluster(8))
    for rank in plan["ranks"]:
        container = rank["container"]
        assert (container["name"], container["image"], container["command"]) == (
            plan["container_name"],
            rank["image"],
            rank["command"],
        )
        assert container["env"] == rank["environment"] and container["labels"] == rank["labels"]
        assert container["network_mode"] == "host" and container["restart_policy"] == "no"


def test_hostspec_keeps_its_argument_order() -> None:
    host = HostSpec("a", 0, True, "198.51.100.1", {"sizing": {"max_num_seqs": 4}}, {"gid_index": 3})
    assert (host.name, host.rank, host.head, host.fabric_address) == ("a", 0, True, "198.51.100.1")
    assert (host.overrides, host.discovered, host.cabling) == ({"sizing": {"max_num_seqs": 4}}, {"gid_index": 3}, None)
    assert isinstance(host, Host)


def test_agreement_reads_each_setting_once_however_it_is_written() -> None:
    """Rank agreement keys a setting by what it sets (its argparse destination), with the value vLLM keeps: the
    same value in two spellings agrees, --x then --no-x is off, and a real difference is named once."""
    profile = load_profile(str(SPARK3))

    def on(host: str, args: list[str]) -> dict[str, Any]:
        return {host: {"overrides": {"container": {"serve_args": args}}}}

    same = cluster(
        3,
        **on("spark-head", ["--enable-prefix-caching"]),
        **on("spark-w1", ["--enable_prefix_caching"]),
        **on("spark-w2", ["--no-enable-prefix-caching", "--enable-prefix-caching"]),
    )
    plan = build_plan(profile, "tp3-triangle", same)
    assert {r["agreement"]["--enable-prefix-caching"] for r in plan["ranks"]} == {True}
    differ = cluster(
        3,
        **on("spark-head", ["--enable-prefix-caching"]),
        **on("spark-w1", ["--enable-prefix-caching"]),
        **on("spark-w2", ["--enable-prefix-caching", "--disable-prefix-caching"]),
    )
    rendered = problems(profile, "tp3-triangle", differ)
    assert rendered == [
        "inventory: rank agreement: --enable-prefix-caching: ranks disagree: spark-head (rank 0) = True; "
        "spark-w1 (rank 1) = True; spark-w2 (rank 2) = False. ranks that disagree hang NCCL silently until a "
        "watchdog fires (vLLM PR #44718); set it once in the profile, not in per-host dgxspark_overrides"
    ], rendered
