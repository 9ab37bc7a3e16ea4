# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load a serving profile and check all of it, every shape, before anything is touched.

Structure comes from ``_schema_v2``; the checks here are the ones types cannot express: shapes that
exist, cabling that fits the node count, NCCL and container settings known to break a GB10 cluster,
a memory budget that adds up, guard floors that make sense, citations that point somewhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._unit_names import refused_helper
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._jsonfile import parse_json, path_lines, read_text
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import (
    Collector,
    Problem,
    ProfileError,
    did_you_mean,
    unique,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memory import GIB, check_memory, memory_budget
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import (
    MANY_RANKS,
    check_nccl_environment,
    nccl_environment,
    topology_of,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import api_access as _api_access
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import docker_args as docker
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import policy as _policy
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import check_image_reference
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import PROFILE, TRANSPORTS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.seed_rules import (
    ENGRAM_DISK_ENV,
    USABLE_GIB,
    check_autotune,
    check_concurrency_at_1m,
    check_container_limits,
    check_cpu_rules,
    check_engram,
    check_guard_against_seed000,
    check_kv_left_to_gmu,
    check_kv_plausible,
    check_model_sources,
    check_nccl_in_budget,
    check_usable_memory,
    model_kv_cost,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import validate
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import check_serve_args, serve_argv

GB10_MEMORY_GIB = 128  # unified LPDDR5X per DGX Spark (REFERENCE.md; seed 002 section 2)
NOFILE_AT_8 = 1048576  # seed 002 section 4.2 and lesson 3: NCCL 2.30 at 8 ranks
UNLIMITED = -1
ENGRAM_COMPONENT = "engram"


@dataclass(frozen=True)
class Profile:
    """A validated profile: defaults filled, with the warnings found on the way."""

    data: dict[str, Any]
    source: str
    sha256: str
    warnings: list[Problem] = field(default_factory=list)

    @property
    def shape_names(self) -> list[str]:
        return sorted(self.data["shapes"])


@dataclass(frozen=True)
class DockerArgs:
    """A shape's effective `docker run` options, with the JSON path each element came from."""

    args: list[str]
    paths: list[str]


def profile_digest(data: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def load_profile(path: str) -> Profile:
    """Read, parse and validate a profile file; raise :class:`ProfileError` with every problem."""
    return parse_profile(read_text(path), path)


def parse_profile(text: str, source: str = "<profile>") -> Profile:
    return validate_profile(parse_json(text, source), source, path_lines(text))


def validate_profile(raw: Any, source: str = "<profile>", lines: Mapping[str, int] | None = None) -> Profile:
    out = Collector(source, lines=dict(lines or {}))
    data = validate(PROFILE, raw, out)
    if not isinstance(data, dict):
        raise ProfileError(out.errors, out.warnings)
    # Parts with structural problems are not checked further (that would only repeat them); every
    # other part is, so one run reports everything.
    broken = [p.where for p in out.errors]

    def clean(*paths: str) -> bool:
        return not any(w == p or w.startswith((p + ".", p + "[")) for w in broken for p in paths)

    out.waivers = dict(data.get("waivers", {})) if clean("$.waivers") else {}
    shapes = data.get("shapes") if isinstance(data.get("shapes"), dict) else {}
    if clean("$.default_shape", "$.shapes") and "default_shape" in data and data["default_shape"] not in shapes:
        out.error(
            "$.default_shape",
            "no such shape",
            found=data["default_shape"],
            expected="one of: " + ", ".join(sorted(shapes)),
            hint=did_you_mean(data["default_shape"], shapes),
        )
    if "shapes" in data and clean("$.shapes") and not shapes:
        out.error("$.shapes", "the profile defines no shape", expected="at least one shape")
    if "host" in data and clean("$.host"):
        _check_host(data["host"], out)
    secrets = secrets_of(data) if clean("$.container.secrets", "$.container.api") else {}
    if clean("$.container.secrets"):
        _api_access.check_profile(data, out)
    if clean("$.container.secrets", "$.container.api", "$.host"):
        _check_secret_paths(data, out)
    for name, shape in sorted(shapes.items()):
        if isinstance(shape, Mapping) and isinstance(shape.get("environment"), Mapping):
            if clean(f"$.shapes.{name}.environment"):
                _secrets.check_environment(shape["environment"], f"$.shapes.{name}.environment", out, secrets)
    if isinstance(data.get("container"), Mapping) and clean("$.container.entrypoint", "$.container.model_path"):
        _secrets.check_command(data["container"], out)
    for where, image in _images_named(data, shapes):
        if clean(where):
            check_image_reference(image, where, out)
    if clean("$.sources"):
        _check_sources(raw, data.get("sources", {}), out)
    if clean("$.sources", "$.model_config"):
        check_model_sources(data, out)
    if "container" in data and "model" in data and clean("$.container", "$.model", "$.model_config"):
        for name in sorted(shapes):
            if clean(f"$.shapes.{name}"):
                check_shape(data, name, out)
    out.raise_if_errors()
    return Profile(data, source, profile_digest(data), unique(out.warnings))


def _images_named(data: Mapping[str, Any], shapes: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every image the profile names, with its JSON path: the container's and each shape's override."""
    named = []
    if isinstance(data.get("container"), Mapping) and "image" in data["container"]:
        named.append(("$.container.image", data["container"]["image"]))
    for name, shape in sorted(shapes.items()):
        override = shape.get("container") if isinstance(shape, Mapping) else None
        if isinstance(override, Mapping) and "image" in override:
            named.append((f"$.shapes.{name}.container.image", override["image"]))
    return named


def effective_container(data: Mapping[str, Any], shape_name: str) -> dict[str, Any]:
    """The container a shape runs: top-level settings with the shape's overrides applied."""
    top = data["container"]
    over = data["shapes"][shape_name].get("container", {})
    merged = dict(top)
    merged["image"] = over.get("image", top["image"])
    merged["docker_run_args"] = effective_docker_args(data, shape_name).args
    merged["serve_args"] = list(top["serve_args"]) + list(over.get("serve_args", []))
    merged.setdefault("model_path", data["model"])
    return merged


def effective_docker_args(data: Mapping[str, Any], shape_name: str) -> DockerArgs:
    """The shape's ``docker run`` options: the container's, the shape's, then a read-only bind of each of
    ``container.secrets`` (``_secrets.mount_args``), so every check and the renderer read the binds too."""
    top = data["container"]["docker_run_args"]
    over = data["shapes"][shape_name].get("container", {}).get("docker_run_args", [])
    paths = [f"$.container.docker_run_args[{i}]" for i in range(len(top))]
    paths += [f"$.shapes.{shape_name}.container.docker_run_args[{i}]" for i in range(len(over))]
    secrets = secrets_of(data)
    paths += [_api_access.SECRET_PATHS.get(p.rsplit(".", 1)[-1], p) for p in _secrets.mount_paths(secrets)]
    return DockerArgs(list(top) + list(over) + _secrets.mount_args(secrets), paths)


def secrets_of(data: Mapping[str, Any]) -> dict[str, str]:
    """The profile's ``container.secrets`` (name to the file's path on every node), when it is sound."""
    container = data.get("container")
    secrets = container.get("secrets") if isinstance(container, Mapping) else None
    found = {str(k): v for k, v in secrets.items() if isinstance(v, str)} if isinstance(secrets, Mapping) else {}
    # the API's key and TLS files are bound and checked as secrets too, under names of their own
    found.update({k: v for k, v in _api_access.api_secrets(data).items() if k not in found})
    return found


def derived_environment(shape: Mapping[str, Any]) -> dict[str, str]:
    """Variables that follow from structured settings (seed 002 sections 5.1 and 5.2)."""
    env: dict[str, str] = {}
    if shape.get("autotuner") is False:
        env["VLLM_FLASHINFER_AUTOTUNE"] = "0"
    if shape.get("engram", {}).get("placement") == "disk":
        env[ENGRAM_DISK_ENV] = "1"
    return env


def shape_environment(shape: Mapping[str, Any], **fabric_facts: Any) -> dict[str, str]:
    """Computed NCCL environment, then derived variables, then the shape's own environment."""
    env = nccl_environment(shape["nodes"], shape["fabric"], **fabric_facts)
    env.update(derived_environment(shape))
    env.update(shape.get("environment", {}))
    return env


def check_shape(data: Mapping[str, Any], name: str, out: Collector) -> None:
    shape = data["shapes"][name]
    where = f"$.shapes.{name}"
    nodes = shape["nodes"]
    fabric = shape["fabric"]
    _check_topology(fabric, nodes, where, out)
    sizing = shape["sizing"]
    if sizing["max_num_batched_tokens"] < sizing["max_num_seqs"]:
        out.error(
            f"{where}.sizing.max_num_batched_tokens",
            "vLLM needs max_num_batched_tokens >= max_num_seqs",
            found=sizing["max_num_batched_tokens"],
            expected=f">= {sizing['max_num_seqs']}",
        )
    if "kv_cache_memory_bytes" in sizing and "gpu_memory_utilization" in sizing:
        out.warn(
            f"{where}.sizing",
            "kv_cache_memory_bytes fixes the KV cache, so vLLM does not use gpu_memory_utilization to size it",
        )
    check_kv_left_to_gmu(sizing, shape.get("memory"), where, out)
    net = fabric["nccl_net"]
    env = shape_environment(shape)
    check_nccl_environment(env, nodes, net, f"{where}.environment", out)
    container = effective_container(data, name)
    memory = shape.get("memory")
    check_usable_memory(memory, where, out)
    limit = check_docker_args(
        effective_docker_args(data, name),
        nodes,
        net,
        out,
        (memory or {}).get("usable_gib"),
        weights_path_of(data),
        _policy.host_roots(data.get("host") if isinstance(data.get("host"), Mapping) else None),
    )
    check_serve_args(container["serve_args"], container["fork_flags"], _serve_args_path(data, name), out)
    _check_remote_code_outside_serve_args(container, out)
    check_engram(shape, env, container["image"], where, out)
    check_cpu_rules(nodes, env, container["docker_run_args"], where, out)
    _check_speculative(shape.get("speculative_config"), f"{where}.speculative_config", out)
    serve = serve_argv(container["serve_args"], container["fork_flags"])  # the one reader of serve arguments
    kv_dtype = serve.value("--kv-cache-dtype") or "auto"
    cost = model_kv_cost(data, nodes, kv_dtype, where, out)
    budget = memory_budget(sizing, memory, cost)
    check_concurrency_at_1m(nodes, sizing, where, out, budget["kv_cache_bytes_per_token"])
    check_memory(budget, limit, where, out)
    check_gmu_against_memory_limit(sizing, budget, limit, where, out)
    if budget["kv_cache_bytes_per_token"] is None:
        check_kv_plausible(budget, sizing, where, out)
    check_autotune(shape, serve, budget, where, out)
    check_nccl_in_budget(nodes, memory, where, out)
    kv_bytes = sizing.get("kv_cache_memory_bytes")
    ceiling = limit if limit is not None else GB10_MEMORY_GIB
    if kv_bytes is not None and kv_bytes / GIB >= ceiling:
        out.error(
            f"{where}.sizing.kv_cache_memory_bytes",
            f"a KV cache of {kv_bytes / GIB:.1f} GiB per rank does not fit in the "
            + (f"container's --memory limit of {limit:g} GiB" if limit is not None else f"{ceiling:g} GiB of a GB10"),
            found=kv_bytes,
            expected=f"well below {int(ceiling * GIB)} bytes, leaving room for the weights",
        )
    components = (memory or {}).get("components_gib", {})
    if memory and shape.get("engram", {}).get("placement") == "host-memory" and ENGRAM_COMPONENT not in components:
        out.error(
            f"{where}.memory.components_gib",
            "Engram tables in host memory are missing from the budget",
            expected=f"a '{ENGRAM_COMPONENT}' component (seed 002 section 6.1: 23.60 GB per rank)",
        )


# What vLLM's engine takes of the GPU's memory when --gpu-memory-utilization is not given (its CacheConfig default).
VLLM_DEFAULT_GMU = 0.9


def check_gmu_against_memory_limit(
    sizing: Mapping[str, Any], budget: Mapping[str, Any], limit: float | None, where: str, out: Collector
) -> None:
    """gpu_memory_utilization x usable memory against --memory when the shape has no memory.usable_gib (the budget's
    own check covers it when it has): a GB10's usable memory is seed 002 section 4.2's 121 GiB. A shape that states
    no gpu_memory_utilization and no KV cache in bytes runs at vLLM's default (:data:`VLLM_DEFAULT_GMU`), which is
    held to the limit the same way; with the KV cache in bytes, vLLM sizes it by those bytes, not by the share."""
    gmu = sizing.get("gpu_memory_utilization")
    stated = gmu is not None
    if not stated and sizing.get("kv_cache_memory_bytes") is None:
        gmu = VLLM_DEFAULT_GMU
    if gmu is None or limit is None or budget.get("budget_gib") is not None:
        return
    total = gmu * USABLE_GIB
    if total > limit:
        share = f"gpu_memory_utilization {gmu:g}" if stated else f"vLLM's default gpu_memory_utilization {gmu:g}"
        out.error(
            f"{where}.sizing" + (".gpu_memory_utilization" if stated else ""),
            f"vLLM may use {total:.2f} GiB ({share} x the {USABLE_GIB} GiB of a GB10, seed 002 "
            f"section 4.2), more than the container's --memory limit of {limit:g} GiB: the rank is OOM-killed while "
            "it allocates its KV cache",
            found=gmu,
            expected=f"<= {limit / USABLE_GIB:.3f} (seed 002: 0.80 and 0.75 under 112g)",
            check="gmu-within-memory-limit",
        )


def _check_remote_code_outside_serve_args(container: Mapping[str, Any], out: Collector) -> None:
    """--trust-remote-code where the engine's argv has it besides serve_args (check_serve_args warns there): the
    entrypoint's words after the first and the model argument, as vLLM's parser reads the rendered command. The
    schema refuses those words when they start with '-'; this says what such a word would have done."""
    places = [(f"$.container.entrypoint[{i}]", word) for i, word in enumerate(container["entrypoint"]) if i]
    places.append(("$.container.model_path", container.get("model_path")))
    for where, word in places:
        if isinstance(word, str) and serve_argv([word], container["fork_flags"]).switch("--trust-remote-code"):
            out.warn(
                where,
                "--trust-remote-code runs the Python code the model's repository ships, as the rank, on every node",
                found=word,
                hint="keep it only for a model whose code you have read and pinned (a revision, an image by digest)",
            )


def weights_path_of(data: Mapping[str, Any]) -> str | None:
    """The profile's host.weights_path, when the host section is sound enough to have one."""
    host = data.get("host")
    path = host.get("weights_path") if isinstance(host, Mapping) else None
    return path if isinstance(path, str) else None


def _serve_args_path(data: Mapping[str, Any], name: str) -> str:
    if data["shapes"][name].get("container", {}).get("serve_args"):
        return f"$.shapes.{name}.container.serve_args (after $.container.serve_args)"
    return "$.container.serve_args"


def _check_topology(fabric: Mapping[str, Any], nodes: int, where: str, out: Collector) -> None:
    transport = fabric["transport"]
    implied = TRANSPORTS.get(transport)
    if implied is None and not fabric.get("topology"):
        out.error(
            f"{where}.fabric.transport",
            "unknown transport, so the cabling is unknown",
            found=transport,
            expected="one of: " + ", ".join(TRANSPORTS) + "; or name the cabling in fabric.topology",
            hint=did_you_mean(transport, TRANSPORTS),
        )
        return
    topology = topology_of(fabric)
    if implied and fabric.get("topology") and fabric["topology"] != implied:
        out.error(
            f"{where}.fabric.topology",
            f"transport {transport} is cabled as a {implied}",
            found=fabric["topology"],
            expected=repr(implied),
        )
    if topology == "triangle" and nodes != 3:
        out.error(
            f"{where}.nodes",
            "a triangle (each pair on its own direct link, two ports per node) has exactly 3 nodes",
            found=nodes,
            expected="3, or a ring or switch transport",
        )
    if topology == "ring" and nodes < 3:
        out.error(f"{where}.nodes", "a ring needs at least 3 nodes", found=nodes, expected=">= 3")
    if transport == "oneshot-ring4" and nodes != 4:
        out.error(f"{where}.nodes", "transport oneshot-ring4 is a ring of 4", found=nodes, expected="4")


def check_docker_args(
    docker_args: DockerArgs,
    nodes: int,
    net: str,
    out: Collector,
    usable_gib: float | None = None,
    weights_path: str | None = None,
    roots: Mapping[str, str] | None = None,
) -> float | None:
    """Check `docker run` options; return the --memory limit in GiB when one is set.

    Every option is read through the table the renderer uses (``_docker_args.render_docker_args``), so
    what passes here is what the plan hands to community.docker.docker_container; then the privilege
    policy (the table's ``policy`` column: waivable by check name) and the settings a GB10 cluster needs
    are checked on what was read.
    """
    args, paths = docker_args.args, docker_args.paths
    secret = _secrets.check_docker_args(args, paths, out)  # refused without repeating the secret
    rendered = docker.render_docker_args(args)
    for problem in rendered.problems:
        if problem.index in secret:
            continue
        out.error(paths[problem.index], problem.message, problem.found, problem.expected, problem.hint)
    for risk in docker.privilege_policy(args, weights_path, roots):
        if risk.index in secret or "docker_run_args" not in paths[risk.index]:
            continue  # a secret's own bind is judged by its path (_check_secret_paths)
        if risk.warning:
            out.warn(paths[risk.index], risk.message, risk.found, risk.expected)
        else:
            out.error(
                paths[risk.index],
                risk.message,
                risk.found,
                risk.expected,
                f"{risk.option} is refused by the rule {risk.check} ({_policy.CHECKS.get(risk.check, '')}); a profile "
                f'that needs it names it in waivers with the reason: "{risk.check}": "<why>"',
                check=risk.check,
            )
    refused = {problem.index for problem in rendered.problems} | secret
    memory_limit: float | None = None
    swap: float | None = None
    where_of: dict[str, str] = {}
    for option in docker.parse_docker_args(args):
        path = paths[option.index]
        where_of.setdefault(option.name, path)
        if option.index in refused:
            continue
        value = option.value or ""
        if option.name == "--memory":
            memory_limit = docker.parse_size(value) / GIB
        elif option.name == "--memory-swap":
            swap = docker.parse_size(value) / GIB if value.strip() != "-1" else float("inf")
        elif option.name == "--network" and value != "host":
            out.error(
                path,
                "ranks need the host's network: NCCL and the head's rendezvous use the fabric interfaces directly",
                found=value,
                expected='"host" (seed 000: --network=host)',
                check="network-host",
            )
    first = next((p for p in paths if "docker_run_args[" in p), "$.container.docker_run_args")
    base = first.split("[")[0]
    if "--network" not in where_of:
        out.error(
            base,
            "no --network=host: ranks would sit behind Docker's bridge and never reach each other",
            expected='"--network=host" (seed 000)',
            check="network-host",
        )
    if memory_limit is not None and swap is not None and swap < memory_limit:
        out.error(
            where_of["--memory-swap"],
            "--memory-swap below --memory: Docker refuses to start the container (it counts memory plus swap)",
            found=f"{swap:g} GiB",
            expected=f">= {memory_limit:g} GiB, equal for no swap (seed 000)",
        )
    check_container_limits(args, where_of, base, memory_limit, swap, out, usable_gib, nodes)
    _check_limits(args, where_of, base, nodes, net, out)
    return memory_limit


def _check_limits(
    args: list[str], where_of: Mapping[str, str], base: str, nodes: int, net: str, out: Collector
) -> None:
    ulimits = docker.container_ulimits(args)
    ulimit_where = where_of.get("--ulimit", base)
    caps = {
        c.strip().upper().removeprefix("CAP_") for v in docker.option_values(args, "--cap-add") for c in v.split(",")
    }
    # --privileged does not stand in for these: the privilege policy refuses it, and a waived one still names
    # what a rank needs.
    if net == "IB":
        memlock = ulimits.get("memlock")
        if memlock is None or memlock.soft != UNLIMITED or memlock.hard != UNLIMITED:
            out.error(
                ulimit_where,
                "memlock must be unlimited for RDMA memory registration; without it NCCL fails "
                "with 'ibv_reg_mr ... Cannot allocate memory'",
                found=None if memlock is None else f"memlock={memlock.soft}:{memlock.hard}",
                expected='"--ulimit=memlock=-1:-1" (seed 000, seed 002 section 4.2)',
                check="memlock-unlimited",
            )
        if not caps & {"IPC_LOCK", "ALL"}:
            out.error(
                where_of.get("--cap-add", base),
                "the IPC_LOCK capability is missing: RDMA cannot pin memory",
                expected='"--cap-add=IPC_LOCK" (seed 000, seed 002 section 4.2)',
                check="ipc-lock",
            )
        devices = docker.option_values(args, "--device")
        if not any(d.split(":")[0].startswith("/dev/infiniband") for d in devices):
            out.error(
                where_of.get("--device", base),
                "the RDMA devices are not passed in",
                expected='"--device=/dev/infiniband:/dev/infiniband:rwm" (seed 000)',
                hint="or set the shape's fabric.nccl_net to Socket for a fabric without RoCE",
                check="rdma-devices",
            )
        if "--gpus" not in where_of:
            out.error(
                base, "no --gpus: the engine would not see the GPU", expected='"--gpus=all" (seed 000)', check="gpus"
            )
    if nodes >= MANY_RANKS:
        nofile = ulimits.get("nofile")
        if nofile is None or min(_lim(nofile.soft), _lim(nofile.hard)) < NOFILE_AT_8:
            out.error(
                ulimit_where,
                f"at {nodes} ranks NCCL 2.30 runs out of file handles below nofile {NOFILE_AT_8}",
                found=None if nofile is None else f"nofile={nofile.soft}:{nofile.hard}",
                expected=f'"--ulimit=nofile={NOFILE_AT_8}:{NOFILE_AT_8}" (seed 002 section 4.2, lesson 3)',
                check="nofile-at-8-ranks",
            )


def _lim(value: int) -> float:
    return float("inf") if value == UNLIMITED else value


def _check_speculative(config: Mapping[str, Any] | None, where: str, out: Collector) -> None:
    if config is None:
        return
    if "method" not in config and "model" not in config:
        out.error(
            where,
            "a speculative config names its method or draft model",
            found=config,
            expected='"method" (seed 002 section 5.3: "dspark") or "model"',
        )
    tokens = config.get("num_speculative_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        out.error(f"{where}.num_speculative_tokens", "must be a positive integer", found=tokens, expected=">= 1")


def _check_host(host: Mapping[str, Any], out: Collector) -> None:
    if host["startup_memguard_gib"] <= host["memguard_gib"]:
        out.error(
            "$.host.startup_memguard_gib",
            "the startup floor must be above the steady floor (a cold load "
            "dips, so the guard starts wider and tightens once serving)",
            found=host["startup_memguard_gib"],
            expected=f"> memguard_gib ({host['memguard_gib']:g}); seed 000: 5 and 3",
        )
    check_guard_against_seed000(host, out)
    if host["startup_memguard_wait_seconds"] <= host["startup_memguard_grace_seconds"]:
        out.error(
            "$.host.startup_memguard_wait_seconds",
            "the startup phase must last longer than its grace period",
            found=host["startup_memguard_wait_seconds"],
            expected=f"> startup_memguard_grace_seconds ({host['startup_memguard_grace_seconds']:g})",
        )
    if host["min_mem_available_gib"] <= host["startup_memguard_gib"]:
        out.error(
            "$.host.min_mem_available_gib",
            "the pre-boot floor must be above the guard's startup floor",
            found=host["min_mem_available_gib"],
            expected=f"> {host['startup_memguard_gib']:g}",
        )
    kernel = host.get("kernel", {})
    release = kernel.get("release", "")
    if re.match(r"7\.", release) and "kho=off" not in kernel.get("cmdline_required", []):
        out.warn(
            "$.host.kernel.cmdline_required",
            f"kernel {release} needs kho=off for RoCE memory registration",
            expected='["kho=off"]',
        )
    if kernel.get("page_size") == 65536 and release and "64k" not in release:
        out.warn(
            "$.host.kernel.release",
            "a 64 KiB page size is expected but the release is not a -64k kernel",
            found=release,
        )
    for index, word in enumerate(kernel.get("cmdline_required", [])):
        if not _policy.known_kernel_word(word):
            out.error(
                f"$.host.kernel.cmdline_required[{index}]",
                "not a kernel command-line word the collection knows: the kernel role would write it into GRUB's "
                "configuration, and what it does to every node (init=, apparmor=0, mitigations=off) is not checked",
                found=word,
                expected="one of the known words: " + _policy.KERNEL_WORDS_KNOWN,
                hint=f'a profile that needs it names it in waivers with the reason: "{_policy.KERNEL_WORDS}": "<why>"',
                check=_policy.KERNEL_WORDS,
            )
    for index, unit in enumerate(host.get("helper_services", [])):
        why = refused_helper(unit)
        if why:
            out.error(
                f"$.host.helper_services[{index}]",
                f"a boot never pauses {unit}: {why}",
                found=unit,
                expected="a helper that frees memory (ollama.service, comfyui.service), not a service the node runs on",
            )
    directory = host.get("secrets_dir")
    if directory is not None and _policy.secrets_dir_problem(directory):
        out.error(
            "$.host.secrets_dir",
            "not a directory the collection keeps secrets in: playbooks/secrets.yml writes every secret there as root",
            found=directory,
            expected=_policy.secrets_dir_problem(directory),
        )


def secrets_dir_of(data: Mapping[str, Any]) -> str:
    """The profile's host.secrets_dir (its default when unset): the one directory of the secrets' files."""
    host = data.get("host")
    directory = host.get("secrets_dir") if isinstance(host, Mapping) else None
    return directory if isinstance(directory, str) else _policy.DEFAULT_SECRETS_DIR


def _check_secret_paths(data: Mapping[str, Any], out: Collector) -> None:
    """Every secret's file (container.secrets, container.api's key and TLS files) directly in host.secrets_dir."""
    directory = secrets_dir_of(data)
    container = data.get("container") if isinstance(data.get("container"), Mapping) else {}
    named = [(f"$.container.secrets.{name}", path) for name, path in sorted((container.get("secrets") or {}).items())]
    api = container.get("api") if isinstance(container.get("api"), Mapping) else {}
    tls = api.get("tls") if isinstance(api.get("tls"), Mapping) else {}
    named += [("$.container.api.api_key_file", api.get("api_key_file"))]
    named += [(f"$.container.api.tls.{key}", tls.get(key)) for key in ("certfile", "keyfile", "ca_file")]
    for where, path in named:
        if isinstance(path, str) and not _policy.in_secrets_dir(path, directory):
            out.error(
                where,
                f"a secret's file outside the secrets directory (host.secrets_dir {directory}): playbooks/secrets.yml "
                "would write it there as root (an SSH host key, the guard's configuration)",
                found=path,
                expected=f"a file directly in {directory}, such as {directory}/{where.rsplit('.', 1)[-1]}",
                hint="put the file in the secrets directory, or set host.secrets_dir to the directory it is in",
            )


def _check_sources(raw: Mapping[str, Any], sources: Mapping[str, str], out: Collector) -> None:
    for pointer in sources:
        if resolve_path(raw, pointer) is _NOTHING:
            out.error(
                f'$.sources["{pointer}"]',
                "cites a value the profile does not have",
                found=pointer,
                expected="the JSON path of a value in this profile",
            )


_NOTHING = object()


def resolve_path(data: Any, path: str) -> Any:
    """Resolve ``$.a.b[0]`` in ``data``; return a sentinel when it points at nothing."""
    node = data
    for key, index in re.findall(r"\.([A-Za-z0-9_-]+)|\[([0-9]+)\]", path[1:]):
        if key:
            if not isinstance(node, dict) or key not in node:
                return _NOTHING
            node = node[key]
        else:
            if not isinstance(node, list) or int(index) >= len(node):
                return _NOTHING
            node = node[int(index)]
    return node


def select_shape(profile: Profile, name: str | None) -> str:
    chosen = name or profile.data["default_shape"]
    if chosen not in profile.data["shapes"]:
        raise ProfileError(
            [
                Problem(
                    "shape",
                    "no such shape in the profile",
                    found=chosen,
                    expected="one of: " + ", ".join(profile.shape_names),
                    hint=did_you_mean(chosen, profile.data["shapes"]),
                    source=profile.source,
                )
            ]
        )
    return chosen
