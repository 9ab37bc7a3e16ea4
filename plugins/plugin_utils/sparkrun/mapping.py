# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A sparkrun recipe (``recipe.Recipe``) and its cluster's hosts to a serving profile and an inventory.

Every setting of the recipe goes one of three ways, each recorded as a :class:`Note`: **mapped** to a place in the
profile (the profile's ``sources`` cites the recipe setting for it), **dropped** with the reason (no place in a
profile, or a rule of the plan refuses it), or it **refuses** the import (:class:`ImportRefused`, every reason at
once): a node count the collection does not serve, pipeline or data parallelism, a runtime other than vLLM's, a
command that is not one ``vllm serve`` argv. What the profile needs and the recipe does not say is **added** from
seed 000 (its ``docker run`` options and host settings), each named too.

The profile is then validated by the plan itself (``profile.profile.parse_profile`` and ``plan.plan.build_plan``, as
``plan.yml`` runs them). An error the plan finds at a place a recipe setting filled drops that setting, names the
rule, and the profile is validated again; an error no recipe setting explains refuses the import.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Collector, Problem, ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.nccl import nccl_environment
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import parse_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import redact_text
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.seed_rules import check_kv_left_to_gmu
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import (
    SIZING_FLAGS,
    has_flag,
    human_int,
    parse_serve_args,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.sparkrun.recipe import VLLM_RUNTIMES, Recipe

SERVED_NODES = (3, 4, 8)
# The fabric each node count is cabled as: seed 000's tp3-triangle and tp4-ring, seed 002's switch of 8.
TRANSPORTS = {3: ("oneshot-direct", "triangle"), 4: ("oneshot-ring4", "ring"), 8: ("switch", "switch")}
# Seed 000's host settings (inventories/spark3/serving-profile.json): a recipe has none.
SEED000_HOST: dict[str, Any] = {
    "memguard_gib": 3,
    "memguard_interval_seconds": 2,
    "memguard_grace_seconds": 30,
    "startup_memguard_gib": 5,
    "startup_memguard_interval_seconds": 0.25,
    "startup_memguard_grace_seconds": 45,
    "startup_memguard_wait_seconds": 120,
    "min_mem_available_gib": 100,
}
# Stand-in fabric addresses (RFC 2544's benchmark range), used only to validate a plan when none are given; never
# written: the inventory then marks the addresses missing, and plan.yml refuses it until they are set.
_STAND_IN_FABRIC = "198.18.0.{}"
_SHELL = re.compile(r"^(?:&&|\|\||[;|&<>]|>>|2>&1|\$\(.*|`.*)$")
_HOSTNAME = re.compile(r"^[A-Za-z][A-Za-z0-9.-]*$")
_SEED000 = "seed 000 (inventories/spark3/serving-profile.json)"
# Seed 000's rule a typical recipe breaks: the KV cache sized by --gpu-memory-utilization alone (docs/seed-rules.md).
KV_WAIVER = "kv-cache-explicit"
VLLM_DEFAULT_GMU = 0.9  # vllm serve's --gpu-memory-utilization when none is given

# Chain keys sparkrun reads for itself, not as a vllm serve flag.
_SPARKRUN_KEYS = {
    "model": "the model",
    "model_revision": "the model's revision",
    "resolved_model_path": "the model's path",
}
# Recipe keys with no place in a serving profile, and why.
_NO_PLACE: dict[str, str] = {
    "description": "free text: the shape's description carries it",
    "metadata": "sparkrun's catalog and VRAM estimate; a profile states the KV cache and memory budget itself",
    "benchmark": "bench.yml runs the collection's own benchmark (docs/benchmark.md)",
    "builder": "the collection builds no image: every node holds the image before a boot (playbooks/images.yml)",
    "builder_config": "the collection builds no image",
    "mods": "patches applied in the container before the serve: the collection runs the image as it is",
    "pre_exec": "commands run in the container before the serve: the collection runs the image as it is",
    "post_exec": "commands run after the serve starts: not part of a rank",
    "post_commands": "commands run after the serve starts: not part of a rank",
    "stop_after_post": "not part of a rank",
    "distribution_config": "the weights and the image are placed on every node before a boot, never pulled by it",
    "runtime_version": "the image names the engine",
    "min_sparkrun_version": "sparkrun's own version gate",
    "sparkrun_version": "sparkrun's own version gate",
    "scheduler": "one rank per node, in the inventory's order",
    "layout": "one rank per node, in the inventory's order",
    "executor": "ranks run in Docker",
    "cluster_config": "sparkrun's internal launch overrides",
    "runtime_cache": "sparkrun's compile caches on the nodes",
    "readiness": "the boot waits for the head's API and a smoke completion",
    "capabilities": "a gateway's admission list",
    "unsupported_capabilities": "a gateway's admission list",
    "containers": "one image for every rank (ranks that disagree hang NCCL)",
    "overrides": "conditional layers chosen by sparkrun at launch from the hosts' hardware: not applied; put what "
    "applies to these hosts in defaults (or -e sparkrun_options)",
    "runtime_config": "runtime settings sparkrun's runtime reads; not a vllm serve argument",
    "name": "the profile's shape is named from the node count",
    "maintainer": "free text",
    "draft_model": "a speculative model is named in --speculative-config",
    "patches": "patches of a launcher: the collection runs the image as it is",
    "mode": "read as the node range",
}
# Keys read into the profile (or the refusals) elsewhere.
_READ = {
    "recipe_version",
    "model",
    "model_revision",
    "runtime",
    "container",
    "image",
    "min_nodes",
    "max_nodes",
    "cluster_only",
    "solo_only",
    "defaults",
    "env",
    "command",
    "variants",
    "executor_config",
}
# sparkrun 0.4.2's flag for a chain key when a recipe has no command template (runtimes/_vllm_common.VLLM_FLAG_MAP).
_FLAG_OF_KEY = {
    "port": "--port",
    "host": "--host",
    "tensor_parallel": "-tp",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "served_model_name": "--served-model-name",
    "dtype": "--dtype",
    "quantization": "--quantization",
    "enforce_eager": "--enforce-eager",
    "enable_prefix_caching": "--enable-prefix-caching",
    "trust_remote_code": "--trust-remote-code",
    "pipeline_parallel": "-pp",
    "data_parallel": "--data-parallel-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "attention_backend": "--attention-backend",
    "load_format": "--load-format",
    "reasoning_parser": "--reasoning-parser",
    "tool_call_parser": "--tool-call-parser",
    "chat_template": "--chat-template",
    "speculative_config": "--speculative-config",
    "tokenizer_mode": "--tokenizer-mode",
    "mm_encoder_tp_mode": "--mm-encoder-tp-mode",
    "block_size": "--block-size",
    "seed": "--seed",
    "enable_auto_tool_choice": "--enable-auto-tool-choice",
    "enable_chunked_prefill": "--enable-chunked-prefill",
    "async_scheduling": "--async-scheduling",
    "generation_config": "--generation-config",
    "hf_overrides": "--hf-overrides",
    "compilation_config": "--compilation-config",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
    "long_prefill_token_threshold": "--long-prefill-token-threshold",
    "limit_mm_per_prompt": "--limit-mm-per-prompt",
    "default_chat_template_kwargs": "--default-chat-template-kwargs",
    "max_cudagraph_capture_size": "--max-cudagraph-capture-size",
}
_SWITCH_KEYS = {
    "enforce_eager",
    "enable_prefix_caching",
    "trust_remote_code",
    "enable_auto_tool_choice",
    "enable_chunked_prefill",
    "async_scheduling",
}
# vllm serve destinations sparkrun appends per node (its vllm-distributed runtime), or that name one rank.
_PER_RANK = {"nnodes", "node_rank", "master_addr", "headless", "data_parallel_rank", "data_parallel_address"}
_SIZING = {flag: key for key, flag in SIZING_FLAGS}
# The environment names the fabric settings give (NCCL_IB_HCA ...), and the fabric key each is.
_FABRIC_ENV = {"NCCL_IB_HCA": "hca", "NCCL_SOCKET_IFNAME": "socket_ifname", "NCCL_IB_GID_INDEX": "gid_index"}


@dataclass(frozen=True)
class Note:
    """What became of one recipe setting."""

    kind: str
    """mapped, added, dropped, waived (a seed rule the profile knowingly breaks until the operator fixes it)."""
    setting: str
    """The recipe setting (``defaults.max_num_seqs``, ``command --kv-cache-dtype fp8``, ``env.NCCL_IB_HCA``)."""
    to: str = ""
    """Its place in the profile (a JSON path), for mapped and added."""
    reason: str = ""

    def render(self) -> str:
        """One line; a secret's value shows its length only (``profile.secrets.redact_text``)."""
        setting = redact_text(self.setting)  # alone: a value runs to the next blank
        if self.kind == "dropped":
            return f"dropped {setting}: {redact_text(self.reason)}"
        where = f" -> {self.to}" if self.to else ""
        return f"{self.kind} {setting}{where}" + (f" ({redact_text(self.reason)})" if self.reason else "")


class ImportRefused(ValueError):
    """The recipe cannot become a profile for these hosts; ``reasons`` says every reason, ``notes`` what was read."""

    def __init__(self, source: str, reasons: Sequence[str], notes: Sequence[Note] = ()) -> None:
        self.source = source
        self.reasons = [redact_text(reason) for reason in reasons]
        self.notes = list(notes)
        super().__init__(f"{source}: the import is refused: " + "; ".join(self.reasons))


@dataclass
class _Part:
    """One recipe setting's contribution to the profile: where it goes and how."""

    setting: str
    path: str
    apply: Callable[[dict[str, Any]], None]
    tokens: tuple[str, ...] = ()
    reason: str = ""
    kind: str = "mapped"
    fallback: _Part | None = None
    """What replaces it when the plan refuses it (seed 000's value of the same option)."""


@dataclass
class Imported:
    profile: dict[str, Any]
    shape: str
    hosts: list[dict[str, Any]]
    """By rank: name, ansible_host, fabric address (None: missing)."""
    notes: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """The plan's warnings on the profile."""

    @property
    def fabric_missing(self) -> bool:
        return any(h["fabric_address"] is None for h in self.hosts)


def shape_name(nodes: int) -> str:
    return f"tp{nodes}-{TRANSPORTS[nodes][1]}"


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def inventory_hosts(hosts: Sequence[str], fabric: Sequence[str] | None) -> list[dict[str, Any]]:
    """The inventory's hosts by rank: a host name as given when it is one (else spark-head, spark-w<rank>), its
    ``ansible_host`` (as given) and its fabric address (None when not given)."""
    out = []
    for rank, host in enumerate(hosts):
        name = host if _HOSTNAME.match(host) and not _is_ip(host) else ("spark-head" if rank == 0 else f"spark-w{rank}")
        out.append({"name": name, "ansible_host": host, "fabric_address": fabric[rank] if fabric else None})
    return out


def _tokens(recipe: Recipe, notes: list[Note], refusals: list[str]) -> list[str]:
    """The command's argv: the rendered template, or (no template) the command sparkrun builds from the chain."""
    if recipe.rendered is None:
        argv = ["vllm", "serve", recipe.model]
        for key, flag in _FLAG_OF_KEY.items():
            value = recipe.chain.get(key)
            if value is None or key == "tensor_parallel" and not value:
                continue
            if key in _SWITCH_KEYS:
                if value is True or str(value).lower() == "true":
                    argv.append(flag)
                continue
            argv += [flag, str(value)]
        notes.append(Note("mapped", "defaults (no command)", "", "the command sparkrun 0.4.2 builds from the chain"))
        return argv
    if recipe.unresolved:
        refusals.append(
            "command: placeholders with no value in defaults, the variant or the options: "
            + ", ".join(recipe.unresolved)
        )
        return []
    try:
        argv = shlex.split(recipe.rendered.replace("\\\n", " "))
    except ValueError as error:
        refusals.append(f"command: not one argv ({error}): {recipe.rendered!r}")
        return []
    shell = [t for t in argv if _SHELL.match(t) or "$" in t]
    if shell:
        refusals.append(f"command: shell syntax {shell} (the collection starts each rank with one argv, never a shell)")
    if argv[:2] != ["vllm", "serve"]:
        refusals.append(f"command: starts {' '.join(argv[:3])!r}, not 'vllm serve' (the collection serves vLLM)")
    return argv


def _json(value: str | None) -> Any:
    try:
        return json.loads(value or "")
    except ValueError:
        return None


def _number(value: str | None, kind: type) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        return human_int(str(value)) if kind is int and value else None


def _read_command(
    recipe: Recipe,
    argv: list[str],
    nodes: int,
    hosts: list[dict[str, Any]],
    parts: list[_Part],
    notes: list[Note],
    refusals: list[str],
) -> dict[str, Any]:
    """Walk the serve arguments: map each, drop it with the reason, or refuse. Returns what was read (model, tp...)."""
    read: dict[str, Any] = {"forks": []}
    args = parse_serve_args(argv[2:])
    positionals = [a for a in args if not a.flag]
    if len(positionals) != 1:
        refusals.append(
            f"command: {len(positionals)} positional arguments {[a.value for a in positionals]}: "
            "'vllm serve' takes one, the model"
        )
    else:
        read["model_path"] = positionals[0].value
    for arg in args:
        if not arg.flag:
            continue
        tokens = tuple(argv[2 + arg.index : 2 + arg.index + 1 + (0 if "=" in argv[2 + arg.index] else len(arg.values))])
        shown = " ".join(tokens)
        setting = f"command {shown}"
        dest = arg.dest or arg.flag
        value = arg.value
        if dest == "tensor_parallel_size":
            read["tp"] = _number(value, int)
            notes.append(
                Note("mapped", setting, "$.shapes.<shape>.nodes", "one rank per node, tensor parallel across all")
            )
        elif dest in ("pipeline_parallel_size", "data_parallel_size"):
            read["pp" if dest == "pipeline_parallel_size" else "dp"] = _number(value, int)
            if _number(value, int) == 1:
                notes.append(Note("dropped", setting, reason="1 is vLLM's default: the plan renders none"))
        elif dest in _PER_RANK:
            notes.append(Note("dropped", setting, reason="per rank: the plan renders it for each rank"))
        elif dest == "master_port":
            parts.append(
                _Part(setting, "$.container.master_port", _set(("container", "master_port"), _number(value, int)))
            )
        elif dest == "distributed_executor_backend":
            reason = "the collection starts every rank with vLLM's own multi-node launch (mp): no Ray cluster"
            notes.append(Note("dropped", setting, reason=reason if value == "ray" else "the plan renders mp"))
        elif dest == "served_model_name":
            read["served"] = arg.values[0] if arg.values else value
            notes.append(Note("mapped", setting, "$.model"))
        elif dest == "model":
            read["model_path"] = value
        elif dest == "port":
            parts.append(_Part(setting, "$.container.api_port", _set(("container", "api_port"), _number(value, int))))
        elif dest == "host":
            _read_host(str(value), setting, hosts, parts, notes)
        elif arg.flag in _SIZING or (dest and f"--{dest.replace('_', '-')}" in _SIZING):
            key = _SIZING.get(arg.flag) or _SIZING[f"--{dest.replace('_', '-')}"]
            number = _number(value, float if key == "gpu_memory_utilization" else int)
            if number is None:
                refusals.append(f"{setting}: not a number")
                continue
            path = f"$.shapes.<shape>.sizing.{key}"
            fallback = None
            if key == "gpu_memory_utilization":
                # Dropped alone, the flag would leave vLLM's default, which no rule sees (gmu-within-memory-limit
                # judges a stated value): the default takes its place, stated, so that the plan judges it too.
                fallback = _Part(
                    f"vLLM's default --gpu-memory-utilization {VLLM_DEFAULT_GMU}",
                    path,
                    _set(("shape", "sizing", key), VLLM_DEFAULT_GMU),
                    reason="in place of the recipe's, which the plan refuses: what vLLM uses when none is given, "
                    "stated so that the plan checks it",
                    kind="added",
                )
            parts.append(_Part(setting, path, _set(("shape", "sizing", key), number), fallback=fallback))
        elif dest == "speculative_config":
            if arg.key:
                parsed = _json(value)
                parts.append(
                    _Part(
                        setting,
                        "$.shapes.<shape>.speculative_config",
                        _merge(("shape", "speculative_config"), {arg.key: value if parsed is None else parsed}),
                    )
                )
            elif isinstance(_json(value), dict):
                parts.append(
                    _Part(
                        setting,
                        "$.shapes.<shape>.speculative_config",
                        _set(("shape", "speculative_config"), _json(value)),
                    )
                )
            else:
                refusals.append(f"{setting}: --speculative-config is not a JSON object")
        elif dest == "revision":
            read["revision"] = value
        elif (
            dest == "override_generation_config"
            and not arg.key
            and isinstance(_json(value), dict)
            and has_flag(arg.flag)
        ):
            parts.append(_Part(setting, "$.generation_defaults", _set(("generation_defaults",), _json(value))))
        elif dest == "api_key" or (dest == "hf_token" and value is not None):
            notes.append(
                Note(
                    "dropped",
                    f"command {arg.flag} <redacted>",
                    reason="a secret in argv: name a file on every node "
                    "in container.api.api_key_file (the API's key) or container.secrets (docs/profile.md, Secrets)",
                )
            )
        elif dest in ("ssl_certfile", "ssl_keyfile"):
            notes.append(Note("dropped", setting, reason="TLS files are secrets on every node: set container.api.tls"))
        else:
            if arg.spec is None and not arg.matches:
                read["forks"].append(arg.flag)
                reason = (
                    "not a flag of upstream vLLM: declared in container.fork_flags for the recipe's image "
                    f"({recipe.container})"
                )
            else:
                reason = ""
            parts.append(
                _Part(setting, "$.container.serve_args", _extend(("container", "serve_args"), tokens), tokens, reason)
            )
    return read


def _read_host(value: str, setting: str, hosts: list[dict[str, Any]], parts: list[_Part], notes: list[Note]) -> None:
    head = hosts[0]
    if value in ("0.0.0.0", "::", "[::]", ""):
        notes.append(
            Note(
                "dropped",
                setting,
                reason="an API bound to every address: the profile binds the head's management "
                "address (container.api.bind: management, the default); set container.api.bind: all to choose every "
                "interface knowingly (a warning of the plan: firewall it)",
            )
        )
    elif value in ("127.0.0.1", "localhost", "::1"):
        parts.append(_Part(setting, "$.container.api.bind", _set(("container", "api", "bind"), "loopback")))
    elif value == head["ansible_host"]:
        notes.append(Note("mapped", setting, "$.container.api.bind", "the head's management address: the default"))
    else:
        parts.append(_Part(setting, "$.container.api.bind", _set(("container", "api", "bind"), value)))


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return apply


def _merge(path: tuple[str, ...], value: Mapping[str, Any]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        node = doc
        for key in path:
            node = node.setdefault(key, {})
        node.update(value)

    return apply


def _extend(path: tuple[str, ...], tokens: Sequence[str]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node.setdefault(path[-1], []).extend(tokens)

    return apply


def _docker_parts(recipe: Recipe, nodes: int, socket_fabric: bool, parts: list[_Part], notes: list[Note]) -> None:
    """``docker run`` options: the recipe's ``executor_config`` where it says, seed 000's where a rule needs one."""
    config = dict(recipe.data.get("executor_config") or {})
    given: dict[str, list[str]] = {}

    def option(key: str, args: list[str]) -> None:
        given.setdefault(key, []).extend(args)

    for key, value in config.items():
        values = value if isinstance(value, list) else [value]
        if key in ("network", "ipc", "shm_size", "user", "gpus"):
            option(key, [f"--{key.replace('_', '-')}={value}"])
        elif key == "memory_limit":
            option("memory", [f"--memory={value}"])
        elif key in ("ulimit", "cap_add", "devices", "security_opt", "volumes"):
            flag = {
                "ulimit": "--ulimit",
                "cap_add": "--cap-add",
                "devices": "--device",
                "security_opt": "--security-opt",
                "volumes": "--volume",
            }[key]
            option(key, [f"{flag}={v}" for v in values])
        elif key == "privileged":
            if value:
                option(key, ["--privileged"])
        elif key == "accelerator_vendor" and str(value).lower() == "cpu":
            notes.append(
                Note("mapped", "executor_config.accelerator_vendor: cpu", "$.container.docker_run_args", "no --gpus")
            )
        else:
            notes.append(
                Note("dropped", f"executor_config.{key}: {value!r}", reason="no docker run option of a rank for it")
            )
    cpu = str(config.get("accelerator_vendor", "")).lower() == "cpu"
    rdma = not socket_fabric
    defaults: list[tuple[str, list[str], str]] = [
        ("network", ["--network=host"], "ranks run on the host's network"),
        ("ipc", ["--ipc=host"], "seed 000 (ipc-host)"),
        ("gpus", [] if cpu else ["--gpus=all"], "the GPU"),
        ("devices", ["--device=/dev/infiniband:/dev/infiniband:rwm"] if rdma else [], "RoCE needs the RDMA devices"),
        ("cap_add", ["--cap-add=IPC_LOCK"] if rdma else [], "RDMA pins memory (ipc-lock)"),
        ("ulimit", [], ""),
        ("security_opt", [], ""),
        ("shm_size", [], ""),
        ("memory", ["--memory=112g"], "seed 002 4.2: 9 GiB of 121 for the OS (container-memory-limit)"),
    ]
    ulimits_needed = [("stack", "--ulimit=stack=67108864:67108864", "seed 002 4.2 (stack-64m)")]
    if rdma:
        ulimits_needed.insert(0, ("memlock", "--ulimit=memlock=-1:-1", "RoCE (memlock-unlimited)"))
    if nodes >= 8:
        ulimits_needed.append(("nofile", "--ulimit=nofile=1048576:1048576", "NCCL 2.30 at 8 ranks (nofile-at-8-ranks)"))
    needed = {name: (arg, reason) for name, arg, reason in ulimits_needed}
    for key, default, why in defaults:
        if key in given:
            for arg in given[key]:
                source = "executor_config." + ("memory_limit" if key == "memory" else key)
                name = arg.split("=", 2)[1] if key == "ulimit" and arg.count("=") >= 2 else ""
                if name in needed:
                    fix, reason = needed[name]
                    fallback = _Part(
                        f"{_SEED000}: {fix}", "$.container.docker_run_args",
                        _extend(("container", "docker_run_args"), [fix]), (fix,), reason, "added",
                    )  # fmt: skip
                    parts.append(
                        _Part(
                            f"{source}: {arg}", "$.container.docker_run_args",
                            _extend(("container", "docker_run_args"), [arg]), (arg,), fallback=fallback,
                        )
                    )  # fmt: skip
                    continue
                parts.append(
                    _Part(
                        f"{source}: {arg}",
                        "$.container.docker_run_args",
                        _extend(("container", "docker_run_args"), [arg]),
                        (arg,),
                    )
                )
        elif default:
            for arg in default:
                parts.append(
                    _Part(
                        f"{_SEED000}: {arg}",
                        "$.container.docker_run_args",
                        _extend(("container", "docker_run_args"), [arg]),
                        (arg,),
                        why,
                        "added",
                    )
                )
        if key == "ulimit":
            have = {a.split("=", 2)[1] for a in given.get("ulimit", []) if a.count("=") >= 2}
            for name, arg, reason in ulimits_needed:
                if name not in have:
                    parts.append(
                        _Part(
                            f"{_SEED000}: {arg}",
                            "$.container.docker_run_args",
                            _extend(("container", "docker_run_args"), [arg]),
                            (arg,),
                            reason,
                            "added",
                        )
                    )
        if key == "memory":
            memory = (given.get("memory") or default)[0].split("=", 1)[1]
            swap = f"--memory-swap={memory}"
            parts.append(
                _Part(
                    f"{_SEED000}: {swap}",
                    "$.container.docker_run_args",
                    _extend(("container", "docker_run_args"), [swap]),
                    (swap,),
                    "no swap headroom (no-swap-headroom)",
                    "added",
                )
            )
    for key in ("privileged", "user", "volumes"):
        for arg in given.get(key, []):
            parts.append(
                _Part(
                    f"executor_config.{key}: {arg}",
                    "$.container.docker_run_args",
                    _extend(("container", "docker_run_args"), [arg]),
                    (arg,),
                )
            )


def _env_parts(recipe: Recipe, nodes: int, fabric: dict[str, Any], parts: list[_Part], notes: list[Note]) -> None:
    computed = nccl_environment(nodes, fabric)
    for name, value in recipe.env.items():
        setting = f"env.{name}={value}"
        if name == "NCCL_NET":
            continue  # read into fabric.nccl_net
        if name == "VLLM_HOST_IP":
            notes.append(Note("dropped", setting, reason="per rank: the plan sets it to each host's fabric address"))
        elif name in _FABRIC_ENV:
            key = _FABRIC_ENV[name]
            fabric_value: Any = [v for v in value.split(",") if v] if key == "hca" else value
            if key == "gid_index":
                fabric_value = _number(value, int)
            parts.append(_Part(setting, f"$.shapes.<shape>.fabric.{key}", _set(("shape", "fabric", key), fabric_value)))
        elif computed.get(name) == value:
            notes.append(Note("mapped", setting, "", "the plan sets the same value for this fabric"))
        else:
            parts.append(
                _Part(setting, f"$.shapes.<shape>.environment.{name}", _set(("shape", "environment", name), value))
            )


def _assemble(
    recipe: Recipe, nodes: int, read: dict[str, Any], parts: Sequence[_Part], fabric: dict[str, Any]
) -> dict[str, Any]:
    shape = shape_name(nodes)
    doc: dict[str, Any] = {"shape": {"sizing": {}, "fabric": dict(fabric), "environment": {}}, "container": {}}
    for part in parts:
        part.apply(doc)
    served = read.get("served") or read.get("model_path") or recipe.model
    container: dict[str, Any] = {"image": recipe.container}
    model_path = read.get("model_path") or recipe.model
    if model_path and model_path != served:
        container["model_path"] = model_path
    container["docker_run_args"] = doc["container"].pop("docker_run_args", [])
    container["serve_args"] = doc["container"].pop("serve_args", [])
    forks = sorted(set(read["forks"]))
    if forks:
        container["fork_flags"] = forks
    container.update(doc["container"])
    the_shape = {
        "nodes": nodes,
        "description": f"Imported from sparkrun recipe {recipe.name}"
        + (f" (variant {recipe.variant})" if recipe.variant else "")
        + (f": {recipe.data.get('description')}" if isinstance(recipe.data.get("description"), str) else ""),
        **doc["shape"],
    }
    the_shape["description"] = " ".join(str(the_shape["description"]).split())
    profile: dict[str, Any] = {"schema_version": 2, "model": served}
    revision = read.get("revision") or recipe.data.get("model_revision")
    if revision:
        profile["model_revision"] = str(revision)
    profile["upstream"] = f"sparkrun-recipe:{recipe.name}"
    if "generation_defaults" in doc:
        profile["generation_defaults"] = doc["generation_defaults"]
    profile.update(default_shape=shape, shapes={shape: the_shape}, container=container, host=dict(SEED000_HOST))
    sources = {"$.model": _cite(recipe, "the served model name (--served-model-name, else the model)")}
    for part in parts:
        path = part.path.replace("<shape>", shape)
        if path.endswith(("docker_run_args", "serve_args")):
            what = (
                "executor_config, and seed 000's options where a rule needs one it does not give"
                if path.endswith("docker_run_args")
                else "the command's other flags, as written"
            )
            sources[path] = _cite(recipe, what)
        elif _exists(profile, path) and path not in sources:
            sources[path] = _cite(recipe, part.setting) if part.kind == "mapped" else part.setting
    for key in SEED000_HOST:
        sources[f"$.host.{key}"] = f"{_SEED000}: the recipe has no host settings"
    reason = kv_waiver_reason(recipe, the_shape)
    if reason:
        profile["waivers"] = {KV_WAIVER: reason}
        sources[f"$.waivers.{KV_WAIVER}"] = (
            "playbooks/import_sparkrun.yml: the recipe sizes the KV cache by gpu_memory_utilization alone, which seed "
            "000 refuses (docs/seed-rules.md, kv-cache-explicit); waived so that the import serves, and warned on "
            "every plan until the KV cache is sized"
        )
    sources[f"$.shapes.{shape}.fabric.transport"] = f"{nodes} nodes, cabled as seed 000 and seed 002 cable them"
    profile["sources"] = sources
    return profile


def kv_waiver_reason(recipe: Recipe, shape: Mapping[str, Any]) -> str | None:
    """The reason the profile waives ``kv-cache-explicit``, when the shape breaks it (the seed rule itself judges);
    None when the recipe sizes the KV cache (``--kv-cache-memory-bytes``).

    A sparkrun recipe normally sizes the KV cache by ``--gpu-memory-utilization`` alone, and no recipe setting gives
    the KV cache vLLM reports. Refusing would refuse nearly every recipe; guessing a size would be a number no one
    measured. So the profile keeps the recipe's setting and waives the rule by name, with a reason that says where it
    came from and how to size it: the plan then reports seed 000's error as a warning on every run until it is fixed."""
    probe = Collector()
    check_kv_left_to_gmu(shape.get("sizing") or {}, shape.get("memory"), "$", probe)
    if not probe.errors:
        return None
    gmu = (shape.get("sizing") or {}).get("gpu_memory_utilization")
    left_to = (
        f"--gpu-memory-utilization {gmu}"
        if gmu is not None
        else f"vLLM's default --gpu-memory-utilization ({VLLM_DEFAULT_GMU})"
    )
    variant = f" (variant {recipe.variant})" if recipe.variant else ""
    return (
        f"imported from sparkrun recipe {recipe.source}{variant}, which leaves the KV cache to {left_to}: vLLM sizes "
        "it from what its profiling run leaves. Size it before serving: boot once, read the 'Available KV cache "
        "memory' line vLLM logs on the head, and set sizing.kv_cache_memory_bytes to it in bytes (or give that figure "
        "as memory.kv_cache_gib in a memory budget); then remove this waiver"
    )


def _cite(recipe: Recipe, setting: str) -> str:
    variant = f", variant {recipe.variant}" if recipe.variant else ""
    return f"sparkrun recipe {recipe.source}{variant}: {setting}"


def _exists(doc: Any, path: str) -> bool:
    node = doc
    for key in path.removeprefix("$.").split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _validation_hosts(hosts: list[dict[str, Any]]) -> list[Host]:
    return [
        Host(
            h["name"],
            rank=rank,
            fabric_address=h["fabric_address"] or _STAND_IN_FABRIC.format(rank + 1),
            head=rank == 0,
            management_address=h["ansible_host"],
        )
        for rank, h in enumerate(hosts)
    ]


def _blamed(problem: Problem, parts: Sequence[_Part], shape: str) -> list[_Part]:
    """The parts a problem of the plan is about: those filling its JSON path (an option of docker_run_args or
    serve_args by the value found)."""
    where = problem.where.split(" ")[0]
    found = json.dumps(problem.found) if problem.found is not None else ""
    value = problem.found if isinstance(problem.found, str) and problem.found else None
    blamed = []
    for part in parts:
        path = part.path.replace("<shape>", shape)
        if path.endswith(("docker_run_args", "serve_args")):
            tokens = [t for t in part.tokens if t]
            if where.startswith(path) and any(t in found or (value and value in t) for t in tokens):
                blamed.append(part)
        elif where == path or where.startswith((path + ".", path + "[")):
            blamed.append(part)
    return blamed


def import_recipe(recipe: Recipe, hosts: Sequence[str], fabric: Sequence[str] | None = None) -> Imported:
    """The profile and inventory hosts for ``recipe`` on ``hosts`` (management addresses or names, by rank), with
    ``fabric`` addresses by rank (None: missing). ImportRefused with every reason when it cannot be served."""
    notes: list[Note] = [Note("mapped", n) for n in recipe.notes]
    refusals: list[str] = []
    hosts = [str(h).strip() for h in hosts]
    nodes = len(hosts)
    if nodes not in SERVED_NODES:
        refusals.append(f"{nodes} hosts given: the collection serves 3, 4 or 8 nodes (one rank per node)")
    if len(set(hosts)) != nodes or any(not h for h in hosts):
        refusals.append(f"the hosts must be distinct and non-empty: {list(hosts)}")
    if fabric is not None and len(fabric) != nodes:
        refusals.append(f"{len(fabric)} fabric addresses for {nodes} hosts: give one per host, in the hosts' order")
    if recipe.runtime not in VLLM_RUNTIMES:
        refusals.append(
            f"runtime {recipe.runtime}: the collection serves vLLM only (vllm, vllm-distributed, vllm-ray); "
            f"{recipe.runtime} ranks have another launcher, flags and API"
        )
    if recipe.mode == "solo":
        refusals.append("solo: the recipe runs on one node (solo_only or mode: solo); the collection serves 3, 4 or 8")
    if nodes < recipe.min_nodes or (recipe.max_nodes is not None and nodes > recipe.max_nodes):
        span = (
            f"{recipe.min_nodes}..{recipe.max_nodes}" if recipe.max_nodes is not None else f"{recipe.min_nodes} or more"
        )
        refusals.append(f"min_nodes/max_nodes: the recipe runs on {span} nodes, not {nodes}")
    if not recipe.container:
        refusals.append("no container: the image every rank runs")
    if refusals and nodes not in SERVED_NODES:
        raise ImportRefused(recipe.source, refusals, notes)
    if recipe.runtime not in VLLM_RUNTIMES:
        raise ImportRefused(recipe.source, refusals, notes)
    if recipe.runtime == "vllm-ray":
        notes.append(Note("dropped", "runtime vllm-ray", reason="every rank runs vLLM's own multi-node launch (mp)"))

    for key in recipe.data:
        if key in _NO_PLACE and key not in _READ:
            notes.append(Note("dropped", key, reason=_NO_PLACE[key]))
        elif key not in _READ and key not in _NO_PLACE:
            notes.append(Note("dropped", key, reason="not a key sparkrun 0.4.2 reads for a vLLM launch"))
    if recipe.variants and recipe.variant is None:
        notes.append(
            Note(
                "mapped",
                "variants",
                "",
                f"none chosen (offered: {', '.join(recipe.variants)}); "
                "the defaults, as sparkrun 0.4.2 reads them; choose one with -e sparkrun_variant=NAME",
            )
        )
    inventory = inventory_hosts(hosts, fabric)
    parts: list[_Part] = []
    argv = _tokens(recipe, notes, refusals)
    read = _read_command(recipe, argv, nodes, inventory, parts, notes, refusals) if argv else {"forks": []}
    for key in sorted(set(recipe.chain) - set(recipe.used) - set(_SPARKRUN_KEYS)):
        if recipe.rendered is not None and key not in ("tensor_parallel", "pipeline_parallel", "data_parallel"):
            notes.append(
                Note(
                    "dropped",
                    f"{recipe.chain_origin[key]}.{key}",
                    reason="the command template does not use it: no vllm serve argument comes of it",
                )
            )

    tp = recipe.parallel("tensor_parallel")
    if read.get("tp") is not None and tp is not None and read["tp"] != tp:
        refusals.append(f"tensor_parallel {tp} but the command says --tensor-parallel-size {read['tp']}")
    tp = tp if tp is not None else read.get("tp", 1)
    if tp != nodes and nodes in SERVED_NODES:
        refusals.append(
            f"tensor_parallel {tp}: the recipe runs on {tp} node(s), and {nodes} hosts are given; the collection runs "
            f"one rank per node, tensor parallel across all of them (sparkrun's -o tensor_parallel={nodes}: "
            f'-e \'{{"sparkrun_options": {{"tensor_parallel": {nodes}}}}}\')'
        )
    for key, flag in (("pipeline_parallel", "pp"), ("data_parallel", "dp")):
        value = max(recipe.parallel(key) or 1, read.get(flag) or 1)
        if value > 1:
            what = "pipeline parallelism" if flag == "pp" else "data parallelism (replicas)"
            refusals.append(
                f"{key} {value}: {what} is not served; the collection runs one tensor-parallel group across every node"
            )
    for key in ("expert_parallel", "context_parallel"):
        if (recipe.parallel(key) or 1) > 1:
            notes.append(Note("dropped", f"defaults.{key}", reason="sparkrun renders no vllm serve flag for it"))

    fabric_settings: dict[str, Any] = {"transport": TRANSPORTS.get(nodes, ("switch", "switch"))[0]}
    net = recipe.env.get("NCCL_NET")
    if net is not None:
        if net in ("IB", "Socket"):
            fabric_settings["nccl_net"] = net
            notes.append(
                Note(
                    "mapped",
                    f"env.NCCL_NET={net}",
                    f"$.shapes.{shape_name(nodes) if nodes in SERVED_NODES else '<shape>'}.fabric.nccl_net",
                )
            )
        else:
            notes.append(Note("dropped", f"env.NCCL_NET={net}", reason="NCCL's transport is IB (RoCE) or Socket"))
    _docker_parts(recipe, nodes, fabric_settings.get("nccl_net") == "Socket", parts, notes)
    _env_parts(recipe, nodes, fabric_settings, parts, notes)
    sizing = {p.path.rsplit(".", 1)[-1] for p in parts if ".sizing." in p.path}
    for key in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        if key not in sizing:
            refusals.append(
                f"{key}: the recipe leaves it to vLLM's default; every rank must be given the same value, so the "
                f'profile states it: set it in the recipe\'s defaults or -e \'{{"sparkrun_options": {{"{key}": N}}}}\''
            )
    if refusals:
        raise ImportRefused(recipe.source, refusals, notes)
    if str(read.get("model_path") or "").startswith("/"):
        notes.append(
            Note("mapped", f"the model path {read['model_path']}", "$.container.model_path",
                 "sparkrun binds its model cache into the container; a rank here gets only the binds the profile "
                 "names: set host.weights_path and bind it read-only (--volume=<weights>:<path>:ro) if the image "
                 "does not hold the weights")
        )  # fmt: skip
    if read.get("revision") or recipe.data.get("model_revision"):
        notes.append(Note("mapped", "model_revision / --revision", "$.model_revision"))

    shape = shape_name(nodes)
    dropped: list[_Part] = []
    replaced: dict[int, tuple[_Part, Problem]] = {}  # a fallback's id -> the part it replaced, and why
    for _round in range(8):
        kept = [p for p in parts if p not in dropped]
        profile = _assemble(recipe, nodes, read, kept, fabric_settings)
        text = json.dumps(profile, indent=2)
        try:
            parsed = parse_profile(text, f"{recipe.name} (imported)")
            plan = build_plan(parsed, shape, _validation_hosts(inventory))
        except ProfileError as error:
            blamed = {id(p): (p, problem) for problem in error.problems for p in _blamed(problem, kept, shape)}
            unexplained = [p for p in error.problems if not _blamed(p, kept, shape)]
            if unexplained or not blamed:
                raise ImportRefused(
                    recipe.source,
                    [f"the plan refuses the profile: {p.render()}" for p in (unexplained or error.problems)],
                    notes,
                ) from None
            twice = [(p, problem) for p, problem in blamed.values() if id(p) in replaced]
            if twice:  # what takes a refused setting's place is refused too: nothing of the recipe is left to drop
                raise ImportRefused(
                    recipe.source,
                    [
                        f"{replaced[id(p)][0].setting}: the plan refuses it ({replaced[id(p)][1].message}), and "
                        f"{p.setting} in its place too ({problem.message}): change the recipe so that the plan "
                        "takes one of them"
                        for p, problem in twice
                    ],
                    notes,
                ) from None
            for part, problem in blamed.values():
                dropped.append(part)
                if part.fallback is not None:
                    parts.insert(parts.index(part) + 1, part.fallback)
                    replaced[id(part.fallback)] = (part, problem)
                notes.append(Note("dropped", part.setting, reason=f"the plan refuses it: {problem.message}"))
            continue
        for part in kept:
            notes.append(Note(part.kind, part.setting, part.path.replace("<shape>", shape), part.reason))
        for check, reason in profile.get("waivers", {}).items():
            notes.append(Note("waived", check, f"$.waivers.{check}", reason))
        notes = [replace(n, to=n.to.replace("<shape>", shape)) for n in notes]
        return Imported(profile, shape, inventory, notes, list(plan["warnings"]))
    raise ImportRefused(recipe.source, ["the plan kept refusing the profile after dropping what it named"], notes)
