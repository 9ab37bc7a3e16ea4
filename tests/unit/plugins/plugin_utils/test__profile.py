# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import (
    load_profile,
    parse_profile,
    validate_profile,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import DELETE, SEED000, SPARK3, SPARK8, edited, read


def problems_of(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(document, "profile.json")
    return [p.render() for p in caught.value.problems]


# The warnings each shipped profile gives, and why they are right: what the seeds advise against that the
# seeds themselves do (seed 000 defines tp4-ring with 16 sequences at 1M, untested), what the seeds do not
# publish (seed 000's CPU set; the KV cost per token of seed 000's engine, in its exact profile), and what the
# privilege policy warns about (seed 000 runs with seccomp=unconfined). None is a warning that the profile's
# own seed contradicts (issue 27).
SHIPPED_WARNINGS = {
    "seed000-exact": [
        "kernel 7.0.0-1019-nvidia-64k needs kho=off",
        "docker_run_args[8]: seccomp=unconfined lifts Docker's system-call filter",
        "no --cpuset-cpus",
        "tp3-triangle.sizing.kv_cache_memory_bytes: the KV cache is checked only against a floor",
        "tp4-ring.sizing.max_num_seqs: 16 concurrent sequences at 1M context on 4 nodes is not measured",
        "tp4-ring.sizing.kv_cache_memory_bytes: the KV cache is checked only against a floor",
    ],
    # with seed 000's measured 2,252 bytes per token, its KV caches are judged against the model, not the floor
    "spark3": [
        "docker_run_args[8]: seccomp=unconfined lifts Docker's system-call filter",
        "no --cpuset-cpus",
        "tp4-ring.sizing.max_num_seqs: 16 concurrent sequences at 1M context on 4 nodes is not measured",
    ],
    # seed 002's own configurations: nothing its seed contradicts (issue 27)
    "spark8": [],
}


@pytest.mark.parametrize("path", [SEED000, SPARK3, SPARK8], ids=["seed000-exact", "spark3", "spark8"])
def test_shipped_and_seed_profiles_validate(path: Any, request: pytest.FixtureRequest) -> None:
    profile = load_profile(str(path))
    assert profile.data["schema_version"] == 2
    expected = SHIPPED_WARNINGS[request.node.callspec.id]
    rendered = [w.render() for w in profile.warnings]
    assert len(rendered) == len(expected), rendered
    for fragment in expected:
        assert any(fragment in w for w in rendered), (fragment, rendered)


def test_seed000_format_gets_the_seed_defaults() -> None:
    profile = load_profile(str(SEED000))
    host = profile.data["host"]
    assert (host["startup_memguard_grace_seconds"], host["memguard_grace_seconds"]) == (45, 30)
    assert host["min_mem_available_gib"] == 100
    assert profile.data["container"]["name"] == "vllm_dsv41"
    assert profile.data["container"]["entrypoint"] == ["vllm", "serve"]


# Each case: edits to seed 000's own profile, then (where, what) fragments every problem list must contain.
BROKEN_SEED000 = {
    "unknown shape as default": (
        {"default_shape": "tp3-triangel"},
        [("$.default_shape", "no such shape"), ("", "did you mean 'tp3-triangle'")],
    ),
    "misspelt sizing key": (
        {"shapes/tp3-triangle/sizing/max_num_seq": 4},
        [("$.shapes.tp3-triangle.sizing.max_num_seq", "unknown key"), ("", "did you mean 'max_num_seqs'")],
    ),
    "misspelt top-level key": ({"contianer": {}}, [("$.contianer", "did you mean 'container'")]),
    "string where a number goes": (
        {"shapes/tp3-triangle/sizing/max_num_seqs": "4"},
        [("$.shapes.tp3-triangle.sizing.max_num_seqs", "must be an integer")],
    ),
    "missing required key": (
        {"shapes/tp4-ring/sizing/max_model_len": DELETE},
        [("$.shapes.tp4-ring.sizing.max_model_len", "required key is missing")],
    ),
    "schema version 1": ({"schema_version": 1}, [("$.schema_version", "not an allowed value")]),
    "unknown transport": (
        {"shapes/tp3-triangle/fabric/transport": "oneshot-drect"},
        [("$.shapes.tp3-triangle.fabric.transport", "did you mean 'oneshot-direct'")],
    ),
    "triangle of four": ({"shapes/tp3-triangle/nodes": 4}, [("$.shapes.tp3-triangle.nodes", "exactly 3 nodes")]),
    "startup floor below steady floor": (
        {"host/startup_memguard_gib": 2},
        [("$.host.startup_memguard_gib", "startup floor must be above")],
    ),
    "zero interval": ({"host/memguard_interval_seconds": 0}, [("$.host.memguard_interval_seconds", "too small")]),
    "negative interval": (
        {"host/startup_memguard_interval_seconds": -1},
        [("$.host.startup_memguard_interval_seconds", "too small")],
    ),
    "grace shorter than an interval": (
        {"host/memguard_grace_seconds": 1},
        [("$.host.memguard_grace_seconds", "shorter than one sampling interval")],
    ),
    "startup wait shorter than its grace": (
        {"host/startup_memguard_wait_seconds": 30},
        [("$.host.startup_memguard_wait_seconds", "longer than its grace")],
    ),
    "pre-boot floor under the guard floor": (
        {"host/min_mem_available_gib": 4},
        [("$.host.min_mem_available_gib", "above the guard's startup floor")],
    ),
    "NVLS on": ({"shapes/tp3-triangle/environment/NCCL_NVLS_ENABLE": "1"}, [("NCCL_NVLS_ENABLE", "no NVLink")]),
    "memlock not unlimited": (
        {"container/docker_run_args/5": "--ulimit=memlock=8388608:8388608"},
        [("$.container.docker_run_args", "memlock must be unlimited")],
    ),
    "IPC_LOCK missing": (
        {"container/docker_run_args/4": "--cap-add=SYS_NICE"},
        [("$.container.docker_run_args", "IPC_LOCK capability is missing")],
    ),
    "misspelt docker option": (
        {"container/docker_run_args/1": "--ipcc=host"},
        [("$.container.docker_run_args[1]", "not a `docker run` option"), ("", "did you mean '--ipc'")],
    ),
    "bridge network": (
        {"container/docker_run_args/0": "--network=bridge"},
        [("$.container.docker_run_args[0]", "host's network")],
    ),
    "restart policy": (
        {"container/docker_run_args/11": "--restart=always"},
        [("$.container.docker_run_args[11]", "automatic restarts")],
    ),
    "bad ulimit": (
        {"container/docker_run_args/7": "--ulimit=core"},
        [("$.container.docker_run_args[7]", "bad --ulimit")],
    ),
    "newline in a value": (
        {"container/image": "spark-ds41f:1030\n--privileged"},
        [("$.container.image", "control character or newline")],
    ),
    "control character in env": (
        {"shapes/tp3-triangle/environment/FOO": "a\x07b"},
        [("$.shapes.tp3-triangle.environment.FOO", "control character")],
    ),
    "bad env name": ({"shapes/tp3-triangle/environment/1BAD": "x"}, [("1BAD", "invalid key")]),
    "batched tokens below seqs": (
        {"shapes/tp3-triangle/sizing/max_num_batched_tokens": 2},
        [("$.shapes.tp3-triangle.sizing.max_num_batched_tokens", "max_num_seqs")],
    ),
    "not an object": ({"host": [1, 2]}, [("$.host", "must be an object")]),
}


@pytest.mark.parametrize("edits,expected", BROKEN_SEED000.values(), ids=BROKEN_SEED000.keys())
def test_broken_profiles_name_the_problem(edits: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    rendered = problems_of(edited(read(SEED000), edits))
    for where, what in expected:
        assert any(where in p and what in p for p in rendered), (where, what, rendered)
    assert all(p.startswith("profile.json: ") for p in rendered)


def test_eight_rank_shape_checks(spark8: dict[str, Any]) -> None:
    document = edited(
        spark8,
        {
            "shapes/tp8-300k/environment/NCCL_MAX_NCHANNELS": "64",
            "container/docker_run_args/6": "--ulimit=nofile=65536:65536",
        },
    )
    rendered = problems_of(document)
    assert any("NCCL_MAX_NCHANNELS" in p and "capped" in p and 'found "64"' in p for p in rendered), rendered
    assert any("nofile" in p and "1048576" in p for p in rendered), rendered


def test_eight_ranks_without_any_nofile_limit(spark8: dict[str, Any]) -> None:
    document = edited(spark8, {"container/docker_run_args/6": "--ulimit=core=0"})
    assert any("runs out of file handles" in p for p in problems_of(document))


def test_every_problem_is_reported_at_once(seed000: dict[str, Any]) -> None:
    document = edited(
        seed000,
        {
            "host/startup_memguard_gib": 1,
            "shapes/tp4-ring/environment/NCCL_NVLS_ENABLE": "1",
            "container/docker_run_args/4": "--cap-add=SYS_NICE",
        },
    )
    rendered = problems_of(document)
    assert any("startup_memguard_gib" in p for p in rendered)
    assert any("NCCL_NVLS_ENABLE" in p for p in rendered)
    # checked for each shape, but the same problem at the same place of the shared container: reported once
    assert sum("IPC_LOCK" in p for p in rendered) == 1


def test_malformed_json_gives_line_and_column() -> None:
    text = SEED000.read_text().replace('"nodes": 3,', '"nodes": 3', 1)
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, "broken.json")
    message = str(caught.value)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if '"nodes": 3' in row) + 1
    assert f"broken.json: line {line}, column" in message
    assert "malformed JSON" in message


def test_duplicate_keys_are_reported(seed000: dict[str, Any]) -> None:
    text = json.dumps(seed000, indent=2).replace('"max_num_seqs": 4,', '"max_num_seqs": 4, "max_num_seqs": 8,')
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, "dup.json")
    assert "$.shapes.tp3-triangle.sizing.max_num_seqs: duplicate key" in str(caught.value)


def test_unreadable_file(tmp_path: Any) -> None:
    with pytest.raises(ProfileError, match="cannot read the profile"):
        load_profile(str(tmp_path / "missing.json"))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile(str(binary))


def test_sources_must_point_at_something(spark3: dict[str, Any]) -> None:
    document = edited(spark3, {"sources/$.shapes.tp3-triangle.sizing.max_num_seqz": "seed 000"})
    assert any("cites a value the profile does not have" in p for p in problems_of(document))


def test_fork_flags_and_unknown_vllm_flags(seed000: dict[str, Any]) -> None:
    unknown = edited(seed000, {"container/serve_args": ["--max-parallel-prefills", "2"]})
    rendered = problems_of(unknown)
    assert any(
        "--max-parallel-prefills" in p and "unrecognized arguments" in p and "fork_flags" in p for p in rendered
    ), rendered
    declared = edited(unknown, {"container/fork_flags": ["--max-parallel-prefills"]})
    validate_profile(declared)


def test_flags_the_collection_renders_are_refused(seed000: dict[str, Any]) -> None:
    document = edited(seed000, {"container/serve_args": ["--max-num-seqs", "8", "--max-modle-len=4"]})
    rendered = problems_of(document)
    assert any("--max-num-seqs is rendered by the collection" in p and "sizing.max_num_seqs" in p for p in rendered)
    assert any("--max-modle-len" in p and "did you mean '--max-model-len'" in p for p in rendered), rendered


def test_vllm_value_checks(seed000: dict[str, Any]) -> None:
    document = edited(seed000, {"container/serve_args": ["--seed", "lots", "--enforce-eager"]})
    rendered = problems_of(document)
    assert any("--seed takes" in p for p in rendered), rendered


def test_control_characters_in_serve_args(seed000: dict[str, Any]) -> None:
    document = edited(seed000, {"container/serve_args": ["--enforce-eager", "x\ny"]})
    assert any("control character" in p for p in problems_of(document))


def test_a_waived_check_becomes_a_warning_with_its_reason(spark8: dict[str, Any]) -> None:
    document = edited(spark8, {"container/docker_run_args/6": "--ulimit=nofile=20000:20000"})
    assert any("runs out of file handles" in p for p in problems_of(document))
    waived = edited(document, {"waivers": {"nofile-at-8-ranks": "simulated cluster, no NCCL here"}})
    profile = validate_profile(waived)
    nofile = [w.render() for w in profile.warnings if "nofile" in w.render()]
    assert len(nofile) == 1
    assert "waived nofile-at-8-ranks (simulated cluster, no NCCL here)" in nofile[0]


def test_unknown_waiver_is_an_error(spark8: dict[str, Any]) -> None:
    rendered = problems_of(edited(spark8, {"waivers": {"nofile-at-8-rank": "because reasons"}}))
    assert any(
        "$.waivers.nofile-at-8-rank: unknown key" in p and "did you mean 'nofile-at-8-ranks'" in p for p in rendered
    ), rendered


@pytest.mark.parametrize("name", ["sim3", "sim4", "sim8"])
def test_simulated_cluster_profiles_validate(name: str) -> None:
    profile = load_profile(str(SPARK3.parents[1] / name / "serving-profile.json"))
    assert all(s["fabric"]["nccl_net"] == "Socket" for s in profile.data["shapes"].values())


MORE_BROKEN_SEED000 = {
    "swap below memory": (
        {"container/docker_run_args/11": "--memory-swap=64g"},
        [("$.container.docker_run_args[11]", "--memory-swap below --memory")],
    ),
    "memory above a GB10": (
        {"container/docker_run_args/10": "--memory=200g", "container/docker_run_args/11": "--memory-swap=200g"},
        [("$.container.docker_run_args[10]", "leaves 0 GiB of the 121 GiB for the OS, less than the 9 GiB")],
    ),
    "KV cache larger than the container": (
        {"shapes/tp3-triangle/sizing/kv_cache_memory_bytes": 150 * 1024**3},
        [
            (
                "$.shapes.tp3-triangle.sizing.kv_cache_memory_bytes",
                "does not fit in the container's --memory limit of 112 GiB",
            )
        ],
    ),
    "transport nobody knows": (
        {"shapes/tp4-ring/fabric/transport": "oneshot-rign4"},
        [("$.shapes.tp4-ring.fabric.transport", "did you mean 'oneshot-ring4'")],
    ),
    "an option community.docker cannot start": (
        {"container/docker_run_args/9": "--blkio-weight-device=/dev/nvme0n1:200"},
        [("$.container.docker_run_args[9]", "--blkio-weight-device is not allowed here")],
    ),
    "an option meaningless on the host's network": (
        {"container/docker_run_args/9": "--publish=8000:8000"},
        [("$.container.docker_run_args[9]", "ranks run on the host's network")],
    ),
    "a net sysctl on the host's network": (
        {"container/docker_run_args/9": "--sysctl=net.core.somaxconn=1024"},
        [("$.container.docker_run_args[9]", "--sysctl net.core.somaxconn cannot be set in a rank")],
    ),
    "swap without memory": (
        {"container/docker_run_args/10": "--shm-size=8g"},
        [("$.container.docker_run_args[11]", "--memory-swap without --memory")],
    ),
    "a mount without a target": (
        {"container/docker_run_args/9": "--mount=type=bind,source=/models"},
        [("$.container.docker_run_args[9]", "bad --mount")],
    ),
    "a bad value for a renderable option": (
        {"container/docker_run_args/9": "--pids-limit=lots"},
        [("$.container.docker_run_args[9]", "bad --pids-limit: 'lots' is not an integer")],
    ),
}


@pytest.mark.parametrize("edits,expected", MORE_BROKEN_SEED000.values(), ids=MORE_BROKEN_SEED000.keys())
def test_more_broken_profiles(edits: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    rendered = problems_of(edited(read(SEED000), edits))
    for where, what in expected:
        assert any(where in p and what in p for p in rendered), (where, what, rendered)


def test_structural_and_semantic_problems_in_different_places_are_reported_together(
    seed000: dict[str, Any],
) -> None:
    document = edited(
        seed000,
        {
            "shapes/tp3-triangle/sizing/max_num_seq": 4,  # structural, in one shape
            "shapes/tp4-ring/environment/NCCL_NVLS_ENABLE": "1",  # semantic, in the other
            "host/startup_memguard_gib": 1,  # semantic, in host
        },
    )
    rendered = problems_of(document)
    assert any("max_num_seq: unknown key" in p for p in rendered)
    assert any("tp4-ring.environment.NCCL_NVLS_ENABLE" in p for p in rendered)
    assert any("startup_memguard_gib" in p for p in rendered)
    assert not any("tp3-triangle" in p and "max_num_seq:" not in p for p in rendered)


def test_unknown_transport_with_explicit_topology_is_accepted(seed000: dict[str, Any]) -> None:
    document = edited(
        seed000, {"shapes/tp4-ring/fabric/transport": "fork-ring", "shapes/tp4-ring/fabric/topology": "ring"}
    )
    assert validate_profile(document).data["shapes"]["tp4-ring"]["fabric"]["topology"] == "ring"


def test_problems_point_at_the_line(tmp_path: Any) -> None:
    text = (
        SEED000.read_text()
        .replace('"max_num_seqs": 4,', '"max_num_seq": 4,')
        .replace('"--cap-add=IPC_LOCK"', '"--cap-add=SYS_NICE"')
    )
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profile(str(path))
    rendered = [p.render() for p in caught.value.problems]
    typo_line = next(i for i, row in enumerate(text.splitlines(), 1) if '"max_num_seq"' in row)
    assert f"{path}:{typo_line}: $.shapes.tp3-triangle.sizing.max_num_seq: unknown key" in rendered[0]
    cap_line = next(i for i, row in enumerate(text.splitlines(), 1) if "SYS_NICE" in row)
    assert any(p.startswith(f"{path}:{cap_line}: ") and "IPC_LOCK" in p for p in rendered), rendered


def test_the_restart_hint_names_what_renders(seed000: dict[str, Any]) -> None:
    rendered = problems_of(edited(seed000, {"container/docker_run_args/11": "--restart=always"}))
    assert any('expected "no", or no --restart' in p for p in rendered), rendered
    document = edited(seed000, {"container/docker_run_args/9": "--restart=no"})
    document["container"]["docker_run_args"].append("--shm-size=16g")
    validate_profile(document)


def test_a_misspelt_option_is_only_offered_an_option_that_renders(seed000: dict[str, Any]) -> None:
    rendered = problems_of(edited(seed000, {"container/docker_run_args/9": "--pids-limt=4096"}))
    assert any("not a `docker run` option" in p and "did you mean '--pids-limit'?" in p for p in rendered), rendered
    rendered = problems_of(edited(seed000, {"container/docker_run_args/9": "--publsh=8000"}))
    assert not any("did you mean '--publish'" in p for p in rendered), rendered
