# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan: what every rank will run, rendered completely and compared before anything is touched.

Ranks that disagree on scheduler settings hang NCCL silently until a watchdog fires, up to 30
minutes later (vLLM PR #44718). So every rank is rendered first (argv, environment, limits), the
settings that must be equal are read back from what was rendered, and any disagreement aborts the
plan with the hosts and their values side by side.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ansible_collections.dgxspark.cluster.plugins.module_utils._labels import (
    LABEL_PREFIX,
    PROFILE_LABEL,
    RANK_LABEL,
    SPEC_LABEL,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, Problem, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.container import docker_container_params
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.engram_disk import disk_paths, engram_storage
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.fabric import plan_shares
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import (
    HEAD_GROUP,
    OVERRIDES_VAR,
    WORKERS_GROUP,
    Host,
    check_hosts,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import HOST_FIELDS as GUARD_FIELDS
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memory import memory_budget
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import nccl_environment, topology_of
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.overrides import effective_data, judge
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import bound as kv_bound
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.kv_fit import inputs as kv_inputs
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import api_access as _api_access
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import docker_args as docker
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import images as _images
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import (
    Profile,
    effective_container,
    effective_docker_args,
    secrets_dir_of,
    secrets_of,
    select_shape,
    shape_environment,
    weights_path_of,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import HOST_OVERRIDES
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import validate
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import (
    SIZING_FLAGS,
    has_flag,
    serve_argv,
)

# Settings each rank may have of its own; everything else that was rendered must agree.
PER_RANK_FLAGS = frozenset({"--node-rank", "--headless", "--port", "--host", "--ssl-certfile", "--ssl-keyfile"})
PER_RANK_ENV = frozenset(
    {
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "GLOO_SOCKET_IFNAME",
        "NCCL_IB_GID_INDEX",
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "CUDA_VISIBLE_DEVICES",
        "VLLM_HOST_IP",
    }
)
AGREEING_ENV_PREFIXES = ("NCCL_", "VLLM_", "TORCH_NCCL_", "DSV41_")


class HostSpec(Host):
    """The serving plan's former host type, with its argument order (name, rank, head, fabric_address,
    overrides, discovered), kept for callers that build hosts by position; new code builds :class:`Host`."""

    def __init__(
        self,
        name: str,
        rank: Any = None,
        head: bool = False,
        fabric_address: Any = None,
        overrides: Any = None,
        discovered: Any = None,
    ) -> None:
        super().__init__(name, rank, fabric_address, None, head, overrides, discovered)


class Rank(TypedDict):
    """One rank of the plan: what its host runs, rendered completely. Its keys are the project's names for these."""

    host: str
    rank: int
    role: str
    """``head`` (rank 0, serves the API) or ``worker``."""
    fabric_address: str
    image: str
    argv: list[str]
    """The whole ``docker run`` command: labels, the options, the environment, the entrypoint, image and command."""
    environment: dict[str, str]
    ulimits: dict[str, dict[str, int]]
    labels: dict[str, str]
    spec_sha256: str
    """The hash of what the rank runs (image, entrypoint, command, options, environment): its container's label,
    what releases record and what the preflight compares with what runs."""
    agreement: dict[str, Any]
    """Every setting the ranks must share, read back from what was rendered (one key per setting)."""
    docker_run_args: list[str]
    """The profile's ``docker run`` options for this rank (what ``argv`` holds between the labels and the env)."""
    entrypoint: str
    command: list[str]
    """The engine's argv after the entrypoint (``vllm serve ...``)."""
    api_port: int | None
    """The port the head serves the OpenAI API on (``--port``); None on a worker (``--headless``)."""
    container: dict[str, Any]
    """The ``community.docker.docker_container`` parameters that start this rank: what the role runs (its ``name``
    is the plan's ``container_name``, as rendered)."""
    fabric: dict[str, Any]
    """The shape's fabric settings with the host's overrides: what :func:`bind` reads the nodes' names against."""
    environment_pinned: list[str]
    """The environment the profile sets itself (the shape's, the host's overrides, the secrets' paths): a fabric
    name the node reports does not replace these."""


class Preflight(TypedDict):
    """What one host's preflight gathers (node_facts' inputs) and expects, beyond its rank."""

    ports: list[int]
    """The ports the ranks take: the head's API port and the master port (node_facts' ``ports``)."""
    fabric_interfaces: list[str]
    """The fabric ports this host's share names (node_facts' ``fabric_interfaces``)."""
    weights_path: str | None
    disk_paths: list[str]
    """What node_facts reports the mount of beyond the weights path (the preflight's engram-nvme)."""
    helper_services: list[str]
    """The helper services the start phase pauses when they run (the profile's ``host.helper_services``)."""
    secret_files: list[str]
    """The secrets' files, checked by stat alone (never read)."""
    min_mem_available_gib: float | None
    """The MemAvailable a node must have before its rank starts (the profile's ``host.min_mem_available_gib``)."""


class KV(TypedDict):
    """What the preflight's kv-fit reads beside the head's rank, its memory budget and the weights' config.json
    (``preflight/kv_fit.py``), and its verdict once :func:`bind` had the head's node facts."""

    weights_path: str | None
    model_directory: str | None
    """The model's directory under the weights path (``''``: the weights path itself), through the head's binds;
    None when the model is not bound from under it."""
    model_directory_from: str
    """How the model's directory was found, or why not."""
    max_model_len: int
    fork_flags: list[str]
    model_config: dict[str, Any]
    """The profile's ``model_config`` (compared with the weights' config.json), or empty."""
    measured_bytes_per_token: float | None
    """A measured KV cost per token (the shape's memory section, else ``model_config``), for attention the formula
    does not model."""
    measured_from: str
    fit: dict[str, str] | None
    """The ``kv-fit`` line (check, host, status, message) judged on the head's node facts; None before binding."""


class Plan(TypedDict):
    """The plan: built once per run (:func:`build_plan`) from the profile, the inventory and every host's overrides,
    never changed afterwards (:func:`bind` gives a new one with the nodes' fabric names). Every step reads its
    slice of it."""

    profile_sha256: str
    source: str
    shape: str
    nodes: int
    topology: str
    head: str
    workers: list[str]
    master_addr: str
    master_port: int
    api_url: str
    api: dict[str, Any]
    """Where the head serves the API and how it is reached (``_api_access.summary``)."""
    secrets: dict[str, str]
    """The secrets' names and their files on every node (bound read-only into each rank)."""
    secrets_dir: str
    """The one directory on every node that holds the secrets' files (host.secrets_dir): secrets.yml writes there."""
    container_name: str
    """Every rank's container name (the profile's ``container.name``: the same on every node, never overridden)."""
    memory_budget: dict[str, Any]
    ranks: list[Rank]
    fabric: dict[str, dict[str, Any]]
    """Host to its share of the fabric plan (``plan_shares``): its ports, addresses, the files the fabric role
    writes and the settings it was planned with."""
    kernel: dict[str, dict[str, Any]]
    """Host to what the profile requires of its kernel and limits: the host section's ``kernel`` and its rank's
    ulimits (the kernel role adds its own ``kernel_expect`` and ``kho_on_7x``)."""
    guard: dict[str, Any]
    """The memory guard's fields of the profile's host section (floors, intervals, graces, the startup wait): what
    every node's guard is configured from, with the guard role's settings (ports, paths, key) beside it."""
    preflight: dict[str, Preflight]
    """Host to what its preflight gathers and expects (:class:`Preflight`)."""
    kv: KV
    warnings: list[str]
    waived: list[dict[str, str]]


def build_plan(
    profile: Profile,
    shape_name: str | None,
    hosts: Sequence[Host],
    groups: tuple[str, str] = (HEAD_GROUP, WORKERS_GROUP),
    both_groups: Sequence[str] = (),
) -> Plan:
    """Render every rank of ``shape_name`` for ``hosts`` and check that they agree.

    Each rank carries its ``container``: the docker_container parameters that start it, so what was
    checked here is what starts, and a rank that cannot be rendered fails the plan, not the boot.
    """
    name = select_shape(profile, shape_name)
    _trace(name, hosts)
    shape = profile.data["shapes"][name]
    out = Collector("inventory", waivers=dict(profile.data.get("waivers", {})))
    ranked, _ranks_ok = check_hosts(
        hosts, out, nodes=shape["nodes"], shape=name, groups=groups, both_groups=both_groups
    )
    judged = _judge_overrides(profile, name, ranked, out)
    out.raise_if_errors()
    head = next(h for h in ranked if h.rank == 0)
    api = _api_access.api_of(profile.data)
    listen = _api_access.resolve(api, head, out)
    out.raise_if_errors()
    ranks = [
        _render_rank(profile, name, h, str(head.fabric_address), out, api, listen, bool(judged.errors_of(h.name)))
        for h in ranked
    ]
    if not out.errors:  # ranks that rendered: do they agree? (a rank that breaks a rule may still disagree)
        _check_agreement(ranks, out)
    if not any(h.image_by_tag for h in ranked):  # an image by tag: a warning, unless the inventory says why
        for image in sorted({r["image"] for r in ranks}):
            if _images.pin_warning(image):
                out.warn("$.container.image", _images.pin_warning(image), found=image)
    out.items.extend(judged.items)
    out.raise_if_errors()
    container = effective_container(profile.data, name)
    weights = weights_path_of(profile.data)
    placement = (shape.get("engram") or {}).get("placement")
    host_section = profile.data.get("host") or {}
    fabric = plan_shares(shape, name, ranked)  # every host's share: raises on a fabric the hosts cannot make
    return {
        "profile_sha256": profile.sha256,
        "source": profile.source,
        "shape": name,
        "nodes": shape["nodes"],
        "topology": topology_of(shape["fabric"]),
        "head": head.name,
        "workers": [r["host"] for r in ranks if r["role"] == "worker"],
        "master_addr": str(head.fabric_address),
        "master_port": container["master_port"],
        "api_url": _api_access.summary(api, listen, container["api_port"])["api_url"],
        "api": _api_access.summary(api, listen, container["api_port"]),
        "secrets": secrets_of(profile.data),
        "secrets_dir": secrets_dir_of(profile.data),
        "container_name": container["name"],
        "memory_budget": memory_budget(shape["sizing"], shape.get("memory")),
        "ranks": ranks,
        "fabric": fabric,
        "kernel": {r["host"]: {**dict(host_section.get("kernel") or {}), "ulimits": r["ulimits"]} for r in ranks},
        "guard": {field: host_section[field] for field in GUARD_FIELDS if field in host_section},
        "preflight": {
            r["host"]: {
                "ports": [int(container["api_port"]), int(container["master_port"])],
                "fabric_interfaces": list(fabric[r["host"]]["interfaces"]),
                "weights_path": weights,
                # what node_facts reports the mount of beyond the weights path (the preflight's engram-nvme)
                "disk_paths": disk_paths(
                    engram_storage(placement, r["environment"], r["docker_run_args"], container["model_path"], weights),
                    weights,
                ),
                "helper_services": list(host_section.get("helper_services") or []),
                "secret_files": list(secrets_of(profile.data).values()),
                "min_mem_available_gib": host_section.get("min_mem_available_gib"),
            }
            for r in ranks
        },
        "kv": kv_inputs(profile.data, name, ranks[0]),  # type: ignore[typeddict-item]  # a KV's keys
        "warnings": [w.render() for w in _unique(profile.warnings + out.warnings)],
        # the findings of the rules the profile waives, each with its reason (a part of warnings): said on one line
        # by every run that plans, listed whole by plan.yml, and not warned about one by one
        "waived": [
            {"check": w.waived, "text": w.render()} for w in _unique(profile.warnings + out.warnings) if w.waived
        ],
    }


class _Judged(Collector):
    def errors_of(self, host: str) -> list[Problem]:
        return [p for p in self.errors if p.where.startswith(f"host {host}: ")]


TRACE_VAR = "DGXSPARK_PLAN_TRACE"


def _trace(shape_name: str, hosts: Sequence[Host]) -> None:
    """With ``DGXSPARK_PLAN_TRACE`` set to a file, a line per plan built (its time, process, shape and hosts): how the
    tests count that a run plans once, whatever process of Ansible's does it."""
    path = os.environ.get(TRACE_VAR)
    if path:
        line = {"at": time.time(), "pid": os.getpid(), "shape": shape_name, "hosts": [h.name for h in hosts]}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")


def _judge_overrides(profile: Profile, shape_name: str, hosts: Sequence[Host], out: Collector) -> _Judged:
    """Each host's ``dgxspark_overrides``: their form (the schema's HOST_OVERRIDES) into ``out``, then every rule of
    the profile on the profile as that host runs it (``_overrides.judge``), returned."""
    judged = _Judged("inventory")
    verdicts: dict[str, tuple[list[Problem], list[Problem]]] = {}  # by the overrides and their file: once each
    for host in hosts:
        if host.overrides is None:
            continue
        scoped = Collector(host.overrides_from or "inventory")
        overrides = validate(HOST_OVERRIDES, host.overrides, scoped, f"host {host.name}: {OVERRIDES_VAR}")
        out.items.extend(scoped.items)
        if scoped.errors or not overrides:
            continue
        key = json.dumps([overrides, host.overrides_from], sort_keys=True, default=str)
        if key not in verdicts:
            verdicts[key] = judge(
                profile.data, profile.source, shape_name, overrides, profile.warnings, host.overrides_from
            )
        errors, warnings = verdicts[key]
        judged.items.extend(
            dataclasses.replace(problem, where=f"host {host.name}: {problem.where}") for problem in errors + warnings
        )
    return judged


def _unique(problems: Sequence[Problem]) -> list[Problem]:
    seen: dict[str, Problem] = {}
    for p in problems:
        seen.setdefault(p.render(), p)
    return list(seen.values())


DISCOVERED_KEYS = ("hca", "socket_ifname", "gid_index")


def discovered_fabric(fabric: Mapping[str, Any], discovered: Any) -> dict[str, Any]:
    """The names the fabric role found on a host's ports, for what the profile (with the host's overrides)
    leaves to discovery: a value the profile sets wins."""
    if not isinstance(discovered, Mapping):
        return {}
    found: dict[str, Any] = {}
    for key in DISCOVERED_KEYS:
        value = discovered.get(key)
        if key in fabric or value is None or value in ("", []):
            continue
        if key == "hca" and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            found[key] = list(value)
        elif key == "socket_ifname" and isinstance(value, str):
            found[key] = value
        elif key == "gid_index" and isinstance(value, int) and not isinstance(value, bool):
            found[key] = value
    return found


def _render_rank(
    profile: Profile,
    shape_name: str,
    host: Host,
    master_addr: str,
    out: Collector,
    api: Mapping[str, Any] | None = None,
    listen: Mapping[str, Any] | None = None,
    refused: bool = False,
) -> dict[str, Any]:
    """One rank as its host runs it (a :class:`Rank`); ``refused``: its overrides break a rule, so it
    is rendered for the agreement check but gets no container parameters (they would only repeat the problem)."""
    errors_before = len(out.errors)
    # what this host runs: the profile with its overrides merged in, which _judge_overrides has judged
    data = effective_data(profile.data, shape_name, host.overrides)
    shape = data["shapes"][shape_name]
    container = effective_container(data, shape_name)
    args = effective_docker_args(data, shape_name)
    secrets = secrets_of(data)
    env = shape_environment(shape, **discovered_fabric(shape["fabric"], host.discovered))
    # Secrets are files bound at /run/secrets/<name>: only the path goes in the environment (HF_TOKEN_PATH).
    env.update(_secrets.environment(secrets))
    # vLLM opens further ports on VLLM_HOST_IP (default: the default route's interface); pin it to the fabric.
    env.setdefault("VLLM_HOST_IP", str(host.fabric_address))
    rank = int(host.rank)
    role = "head" if rank == 0 else "worker"
    command = render_serve_command(data, shape, container, rank, master_addr)
    entrypoint = container["entrypoint"][0]
    if rank == 0 and api is not None and listen is not None:
        # the API's --host and TLS files; with a key, a wrapper that reads it into VLLM_API_KEY (never argv)
        command += _api_access.head_flags(api, listen["bind"])
        entrypoint, wrapped = _api_access.wrapped(api, entrypoint, command)
    else:
        wrapped = command
    labels = {
        PROFILE_LABEL: profile.sha256,
        f"{LABEL_PREFIX}.shape": shape_name,
        RANK_LABEL: str(rank),
        SPEC_LABEL: "",  # _assembled sets it
    }
    if data.get("model_revision"):
        labels[f"{LABEL_PREFIX}.model_revision"] = data["model_revision"]
    rendered: Rank = {
        "host": host.name,
        "rank": rank,
        "role": role,
        "fabric_address": str(host.fabric_address),
        "image": container["image"],
        "argv": [],  # argv, spec_sha256, the spec label and container: _assembled, from the parts
        "environment": env,
        "ulimits": {k: v.as_dict() for k, v in sorted(docker.container_ulimits(args.args).items())},
        "labels": labels,
        "spec_sha256": "",
        "agreement": {},
        "docker_run_args": list(args.args),
        "entrypoint": entrypoint,
        "command": list(wrapped),
        "api_port": int(container["api_port"]) if rank == 0 else None,
        "container": {},
        "fabric": dict(shape["fabric"]),
        "environment_pinned": sorted(set(shape.get("environment", {})) | set(_secrets.environment(secrets))),
    }
    rendered["agreement"] = _agreement_view(rendered, command, container)
    name = container["name"]
    if refused or len(out.errors) > errors_before:
        # the host's overrides are wrong: container parameters would only repeat it
        return _assembled(rendered, rendered["environment"], name, with_container=False)
    try:
        assembled = _assembled(rendered, rendered["environment"], name)
        # the whole rendered argv, the entrypoint's and the overrides' words included: nothing it shows is hidden
        _secrets.check_argv(assembled["argv"], f"host {host.name}: rank {rank} argv", out)
        return assembled
    except ProfileError as exc:
        for problem in exc.problems:
            out.error(problem.where, problem.message, problem.found, problem.expected, problem.hint)
    return _assembled(rendered, rendered["environment"], name, with_container=False)


# The environment the fabric's names set (nccl_environment's hca, socket_ifname and gid_index): what bind() redoes.
DISCOVERED_ENV = ("NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_GID_INDEX")


def _assembled(rank: Mapping[str, Any], environment: Mapping[str, str], name: str, with_container: bool = True) -> Rank:
    """A rank with ``environment``, and what follows from its parts: the spec hash (what releases record and the
    container's label carries), the ``docker run`` argv and the docker_container parameters of its container,
    ``name`` (the plan's ``container_name``)."""
    result: Rank = dict(rank)  # type: ignore[assignment]  # a Rank's keys, as given
    result["environment"] = dict(environment)
    spec = {
        "image": rank["image"],
        "entrypoint": rank["entrypoint"],
        "command": rank["command"],
        "docker_run_args": rank["docker_run_args"],
        "environment": result["environment"],
    }
    result["spec_sha256"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    result["labels"] = {**rank["labels"], SPEC_LABEL: result["spec_sha256"]}
    argv = ["docker", "run", "--detach", "--name", name]
    for key, value in result["labels"].items():
        argv += ["--label", f"{key}={value}"]
    argv += rank["docker_run_args"]
    for key in sorted(environment):
        argv += ["--env", f"{key}={environment[key]}"]
    result["argv"] = [*argv, "--entrypoint", rank["entrypoint"], rank["image"], *rank["command"]]
    result["container"] = docker_container_params(result, name) if with_container else {}
    return result


def bind(plan: Plan, discovered: Mapping[str, Any], facts: Mapping[str, Any] | None = None) -> Plan:
    """The plan with what the nodes report bound in, as an overlay: the fabric names (``discovered``: host -> its
    ``fabric_nccl``: hca, socket_ifname, gid_index) and, with ``facts`` (host -> its node facts), the KV fit on the
    head's weights (``kv.fit``). For each rank whose names change, only what depends on them is redone (its NCCL
    environment, spec hash, argv and container parameters). A name the profile sets (its fabric or environment,
    with the host's overrides) wins over the node's, as when planning; a host not in ``discovered`` keeps what it
    has. The plan is not built again."""
    ranks = []
    for rank in plan["ranks"]:
        if rank["host"] not in (discovered or {}):
            ranks.append(rank)
            continue
        found = discovered_fabric(rank["fabric"], discovered[rank["host"]])
        fresh = nccl_environment(plan["nodes"], rank["fabric"], **found)
        env = dict(rank["environment"])
        for key in DISCOVERED_ENV:
            if key in rank["environment_pinned"]:
                continue
            if key in fresh:
                env[key] = fresh[key]
            else:
                env.pop(key, None)
        ranks.append(rank if env == rank["environment"] else _assembled(rank, env, plan["container_name"]))
    fresh: Plan = {**plan, "ranks": ranks}  # type: ignore[typeddict-item]  # a new plan: the one given is left alone
    if facts:
        fresh["kv"] = kv_bound(fresh, facts)  # type: ignore[typeddict-item]  # a KV's keys
    return fresh


def render_serve_command(
    data: Mapping[str, Any], shape: Mapping[str, Any], container: Mapping[str, Any], rank: int, master_addr: str
) -> list[str]:
    """The engine's command for one rank: the entrypoint's remaining words, the model, then flags."""
    nodes = shape["nodes"]
    cmd = [*container["entrypoint"][1:], container.get("model_path") or data["model"]]
    cmd += ["--served-model-name", data["model"], "--tensor-parallel-size", str(nodes)]
    if nodes > 1:
        cmd += [
            "--distributed-executor-backend",
            "mp",
            "--nnodes",
            str(nodes),
            "--node-rank",
            str(rank),
            "--master-addr",
            master_addr,
            "--master-port",
            str(container["master_port"]),
        ]
    sizing = shape["sizing"]
    for key, flag in SIZING_FLAGS:
        if key in sizing:
            cmd += [flag, _number(sizing[key])]
    if shape.get("speculative_config"):
        cmd += ["--speculative-config", json.dumps(shape["speculative_config"], sort_keys=True, separators=(",", ":"))]
    if data.get("model_revision") and not str(cmd[len(container["entrypoint"]) - 1]).startswith("/"):
        cmd += ["--revision", data["model_revision"]]
    if data.get("generation_defaults") and has_flag("--override-generation-config"):
        cmd += [
            "--override-generation-config",
            json.dumps(data["generation_defaults"], sort_keys=True, separators=(",", ":")),
        ]
    cmd += ["--port", str(container["api_port"])] if rank == 0 else ["--headless"]
    cmd += container["serve_args"]
    return cmd


def _number(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _agreement_view(rank: Rank, command: Sequence[str], container: Mapping[str, Any]) -> dict[str, Any]:
    """Read back, from what was rendered, every setting the ranks must share."""
    view: dict[str, Any] = {"image": rank["image"], "model": command[len(container["entrypoint"]) - 1]}
    view["model_revision"] = rank["labels"].get(f"{LABEL_PREFIX}.model_revision")
    argv = serve_argv(command[len(container["entrypoint"]) :], container["fork_flags"])
    for number, value in enumerate(argv.positionals, 1):
        view[f"argument {number}"] = value
    for arg in argv.args:
        # one key per setting, however it is written (-tp or --tensor-parallel-size, --x then --no-x): its argparse
        # destination as a flag; the value vLLM keeps (the last occurrence's, a switch's True or False)
        name = f"--{arg.dest.replace('_', '-')}" if arg.dest else arg.flag
        if not arg.flag or name in PER_RANK_FLAGS:
            continue
        if arg.key:  # the dotted JSON form (--speculative-config.method mtp): one key of the option
            view[f"{name}.{arg.key}"] = arg.value
            continue
        switch = argv.switch(arg.flag)
        kept = argv.last(arg.flag)
        view[name] = switch if switch is not None else (kept.value if kept and kept.value is not None else True)
    for key, value in rank["environment"].items():
        if key.startswith(AGREEING_ENV_PREFIXES) and key not in PER_RANK_ENV:
            view[f"env {key}"] = value
    return view


def _check_agreement(ranks: Sequence[Mapping[str, Any]], out: Collector) -> None:
    keys = sorted({k for r in ranks for k in r["agreement"]})
    for key in keys:
        values = [r["agreement"].get(key) for r in ranks]
        if len({json.dumps(v, sort_keys=True) for v in values}) > 1:
            table = "; ".join(f"{r['host']} (rank {r['rank']}) = {_shown(r['agreement'].get(key))}" for r in ranks)
            out.error(
                f"rank agreement: {key}",
                f"ranks disagree: {table}",
                hint="ranks that disagree hang NCCL silently until a watchdog fires (vLLM PR #44718); "
                f"set it once in the profile, not in per-host {OVERRIDES_VAR}",
            )


def _shown(value: Any) -> str:
    return "(not set)" if value is None else str(value)
