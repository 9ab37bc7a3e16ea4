# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's ``kv-fit``: the planned KV cache against one ``max_model_len`` sequence of the weights the
head will load, at the per-token cost their own ``config.json`` gives.

vLLM checks this only at engine start, after minutes of loading weights, and refuses with "To serve at least one
request with the model's max seq len ..." (``_kv.vllm_kv_refusal``). The profile's validation can judge it only
from the profile's own numbers (``model_config``, a measured ``kv_cache_bytes_per_token``) or, without them, a
plausibility floor. Here the numbers come from the weights on the head: node_facts' ``weights.model_configs``
(the KV-relevant keys of ``config.json``, never the whole file).

- The config.json is the one in the model's directory: the container's ``model_path`` mapped through the head
  rank's bind mounts to the node, relative to ``host.weights_path`` (``<weights_path>/config.json`` when the
  weights path is the model's directory); the only one found when the model path is not bound from there.
- The KV cache per rank is the plan's: ``--kv-cache-memory-bytes`` on the head's command when the profile fixes it
  in bytes (seed 000), else the plan's memory budget (``memory.kv_cache_gib``, or the budget less its
  components).
- The cost per token and per rank is ``_kv.kv_bytes_per_token`` of that config with the command's
  ``--kv-cache-dtype`` and ``--tensor-parallel-size``; one sequence costs ``_kv.kv_bytes_for_sequence`` in whole
  ``--block-size`` blocks.

FAIL in vLLM's words when the cache cannot hold one sequence; PASS with the figures (tokens that fit, and vLLM's
"maximum concurrency" for a max_model_len request) when it can; WARN when the config describes attention ``_kv``
does not model (DeepSeek-V4's compressed attention, linear or state-space layers) and the profile gives no
measured ``kv_cache_bytes_per_token`` to take its place (with one, the fit is judged at that figure); SKIP
without ``host.weights_path``. A profile's own ``model_config`` is compared with the weights' config.json: a
disagreement WARNs (the weights are what vLLM loads).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

# model_config keys of the profile that name a config.json key (architecture: architectures[0]): the model's KV
# figures that node_facts gathers
from ansible_collections.dgxspark.cluster.plugins.module_utils._model_config import SHAPE_KEYS as COMPARED
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kv import (
    GIB,
    KVCost,
    kv_bytes_for_sequence,
    kv_bytes_per_token,
    language_config,
    tokens_that_fit,
    unmodelled_attention,
    vllm_kv_refusal,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.api_access import unwrapped
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.docker_args import host_path
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import effective_container
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.vllm import ServeArgv, serve_argv

CHECK = "kv-fit"
PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
CONFIG_NAME = "config.json"
MEASURED = (
    "vLLM's 'Available KV cache memory' over its 'GPU KV cache size' (_kv.read_vllm_kv_lines), as the shape's "
    "memory.kv_cache_bytes_per_token or model_config.kv_cache_bytes_per_token"
)


def _line(host: str, status: str, message: str) -> dict[str, str]:
    return {"check": CHECK, "host": host, "status": status, "message": message}


def engine_argv(rank: Mapping[str, Any], fork_flags: Sequence[str] = ()) -> ServeArgv:
    """A rank's ``vllm serve`` arguments as the plan renders them, read by the one model of them (``_vllm``): its
    command less the API key's wrapper (the entrypoint's other words and the model are its first positionals)."""
    _entrypoint, command = unwrapped(str(rank.get("entrypoint") or ""), [str(w) for w in rank.get("command") or []])
    return serve_argv(command, fork_flags)


def planned_kv_cache(head: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[float | None, str]:
    """The KV cache per rank in bytes, and where it comes from: the head's ``--kv-cache-memory-bytes``, else the
    plan's memory budget; (None, why) when neither sizes it (vLLM sizes it from gpu_memory_utilization)."""
    explicit = engine_argv(head).integer("--kv-cache-memory-bytes")
    if explicit is not None and explicit >= 0:
        return float(explicit), f"--kv-cache-memory-bytes {explicit:,} (sizing.kv_cache_memory_bytes)"
    budget = plan.get("memory_budget") or {}
    gib = budget.get("kv_cache_gib")
    if gib is None:
        return None, "neither sizing.kv_cache_memory_bytes nor a memory budget sizes it"
    source = budget.get("kv_cache_from") or "the memory budget"
    if source == "budget minus components":
        source = "the memory budget less its components"
    return float(gib) * GIB, f"{source}, {gib:g} GiB"


def _model_directory(
    profile: Mapping[str, Any], shape_name: str, head: Mapping[str, Any], weights_path: str
) -> tuple[str | None, str]:
    """The model's directory relative to the weights path ('' for the weights path itself), and how it was found;
    (None, why) when the model path is not bound from under the weights path."""
    model_path = effective_container(profile, shape_name).get("model_path") or profile.get("model")
    mapped = host_path(head.get("docker_run_args") or [], str(model_path))
    if mapped is None:
        return None, f"container.model_path {model_path} is not bound from the node"
    weights = posixpath.normpath(weights_path)
    directory = posixpath.normpath(mapped[0])
    if directory != weights and not directory.startswith(weights.rstrip("/") + "/"):
        return None, f"container.model_path {model_path} is bound from {directory}, not from under {weights}"
    relative = posixpath.relpath(directory, weights)
    return ("" if relative == "." else relative), f"container.model_path {model_path}, bound by {mapped[1]}"


def _pick(configs: Mapping[str, Any], relative: str | None, how: str, weights_path: str) -> tuple[str | None, str]:
    """The config.json to judge by (its name in ``weights.model_configs``), or (None, why not)."""
    names = sorted(configs)
    if relative is not None:
        wanted = f"{relative}/{CONFIG_NAME}" if relative else CONFIG_NAME
        if wanted in configs:
            return wanted, how
        if relative.count("/"):
            return None, (
                f"the model's directory {weights_path}/{relative} ({how}) is more than one directory below "
                "host.weights_path, and node_facts reads config.json at its top and one directory down: point "
                "host.weights_path at the model's directory or its parent"
            )
        found = f"found: {', '.join(names)}" if names else "none found"
        return None, f"no {weights_path}/{wanted} ({how}); {found}"
    if len(names) == 1:
        return names[0], f"the only config.json under host.weights_path ({how})"
    if not names:
        return None, f"no config.json in {weights_path} nor one directory down ({how})"
    return None, f"{len(names)} config.json under {weights_path} ({', '.join(names)}) and {how}: which one is served?"


def _measured(profile: Mapping[str, Any], shape: Mapping[str, Any], name: str) -> tuple[float | None, str]:
    per_token = (shape.get("memory") or {}).get("kv_cache_bytes_per_token")
    if per_token is not None:
        return float(per_token), f"shapes.{name}.memory.kv_cache_bytes_per_token"
    per_token = (profile.get("model_config") or {}).get("kv_cache_bytes_per_token")
    if per_token is not None:
        return float(per_token), "model_config.kv_cache_bytes_per_token"
    return None, ""


def compare_model_config(
    model: Mapping[str, Any], config: Mapping[str, Any], kv_dtype: str, tensor_parallel: int
) -> list[str]:
    """Where the profile's ``model_config`` and the weights' config.json disagree (empty: they agree)."""
    inner = language_config(config)
    differences: list[str] = []
    architectures = config.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures else None
    if "architecture" in model and first is not None and model["architecture"] != first:
        differences.append(f"architecture: profile {model['architecture']}, config.json {first}")
    for key in COMPARED:
        if key not in model:
            continue
        found = inner.get(key, inner.get("dtype")) if key == "torch_dtype" else inner.get(key)
        if found is None:
            continue  # config.json leaves it to a default (head_dim from hidden_size): the costs below tell
        if found != model[key]:
            differences.append(f"{key}: profile {model[key]}, config.json {found}")
    try:
        theirs = kv_bytes_per_token(config, kv_dtype, tensor_parallel)
        ours = kv_bytes_per_token(model, kv_dtype, tensor_parallel)
    except ValueError:
        return differences
    if (ours.bytes_per_token, ours.window_bytes_per_token) != (theirs.bytes_per_token, theirs.window_bytes_per_token):
        differences.append(
            f"KV bytes per token per rank: profile {ours.bytes_per_token:,.0f}, "
            f"config.json {theirs.bytes_per_token:,.0f}"
        )
    return differences


def inputs(profile: Mapping[str, Any], shape_name: str, head: Mapping[str, Any]) -> dict[str, Any]:
    """What kv-fit reads of the profile, worked out once by the plan (its ``kv``): the weights path, the model's
    directory under it (through the head rank's binds), the shape's ``max_model_len``, the fork's flags, the
    profile's ``model_config`` and a measured cost per token; ``fit`` stays None until :func:`bound`."""
    shape = profile["shapes"][shape_name]
    weights_path = (profile.get("host") or {}).get("weights_path")
    relative, how = (None, "") if not weights_path else _model_directory(profile, shape_name, head, weights_path)
    per_token, measured_from = _measured(profile, shape, shape_name)
    model = profile.get("model_config")
    return {
        "weights_path": weights_path,
        "model_directory": relative,
        "model_directory_from": how,
        "max_model_len": shape["sizing"]["max_model_len"],
        "fork_flags": list(effective_container(profile, shape_name).get("fork_flags") or ()),
        "model_config": dict(model) if isinstance(model, Mapping) else {},
        "measured_bytes_per_token": per_token,
        "measured_from": measured_from,
        "fit": None,
    }


def bound(plan: Mapping[str, Any], facts: Mapping[str, Any]) -> dict[str, Any]:
    """The plan's ``kv`` with its ``fit``: kv-fit judged on the head's node facts (``facts``: host to its node), when
    they are given; else as it was."""
    head = next((r for r in plan["ranks"] if r.get("rank") == 0), plan["ranks"][0])
    node = facts.get(head["host"]) if isinstance(facts, Mapping) else None
    if not isinstance(node, Mapping):
        return dict(plan["kv"])
    return {**plan["kv"], "fit": kv_fit(head["host"], node, plan)}


def kv_fit(host: str, node: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, str]:
    """``kv-fit`` on the head's node (``host``, rank 0's), from the plan (its head rank, memory budget and ``kv``):
    see the module's description."""
    kv = plan["kv"]
    weights_path = kv["weights_path"]
    if not weights_path:
        return _line(
            host,
            SKIP,
            "the profile names no host.weights_path, so the weights' config.json is not read (validation judged "
            "the KV cache by the profile's own model numbers, or by the plausibility floor)",
        )
    weights = node.get("weights")
    configs = weights.get("model_configs") if isinstance(weights, Mapping) else None
    if not isinstance(configs, Mapping):
        return _line(
            host,
            WARN,
            "could not check: node_facts gathered no weights.model_configs (sections: [weights], with weights_path)",
        )
    head = next((r for r in plan["ranks"] if r.get("rank") == 0), plan["ranks"][0])
    name, how = _pick(configs, kv["model_directory"], kv["model_directory_from"], weights_path)
    if name is None:
        return _line(host, WARN, f"could not check the KV cache against the weights: {how}")
    entry = configs[name]
    where = f"{posixpath.join(weights_path, name)} on {host}"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("keys"), Mapping):
        error = entry.get("error") if isinstance(entry, Mapping) else "not gathered"
        return _line(host, WARN, f"could not read {where}: {error}")
    config = entry["keys"]
    argv = engine_argv(head, kv["fork_flags"])
    kv_dtype = argv.value("--kv-cache-dtype") or "auto"
    tensor_parallel = argv.integer("--tensor-parallel-size") or int(plan.get("nodes") or 1)
    max_len = argv.integer("--max-model-len")
    max_len = max_len if max_len is not None and max_len > 0 else kv["max_model_len"]
    block = argv.integer("--block-size")
    architectures = config.get("architectures")
    label = where + (f" ({architectures[0]})" if isinstance(architectures, list) and architectures else "")
    notes: list[str] = []
    unmodelled = unmodelled_attention(config)
    if unmodelled:
        per_token, measured_at = kv["measured_bytes_per_token"], kv["measured_from"]
        missing = f"the KV formula does not model {'; '.join(unmodelled)}"
        if per_token is None:
            return _line(
                host,
                WARN,
                f"{label}: {missing}, and the profile gives no measured KV cost to take its place: add "
                f"kv_cache_bytes_per_token, {MEASURED}",
            )
        cost = KVCost(per_token, formula=f"measured, {measured_at}")
        notes.append(f"{missing}: judged at the profile's measured {per_token:,.0f} bytes per token ({measured_at})")
    else:
        try:
            cost = kv_bytes_per_token(config, kv_dtype, tensor_parallel)
        except ValueError as error:
            return _line(
                host, WARN, f"{label}: cannot work out the KV cost per token: {error}; or give kv_cache_bytes_per_token"
            )
    model = kv["model_config"]
    disagree: list[str] = []
    if isinstance(model, Mapping) and model:
        disagree = compare_model_config(model, config, kv_dtype, tensor_parallel)
        if disagree:
            notes.append(
                "the profile's model_config disagrees with the weights' config.json ("
                + "; ".join(disagree)
                + "): vLLM loads the weights, so correct model_config and its sources"
            )
        else:
            notes.append("the profile's model_config agrees with it")
    kv_bytes, kv_from = planned_kv_cache(head, plan)
    needed = kv_bytes_for_sequence(cost, max_len, block)
    per_token = f"{cost.bytes_per_token:,.0f} bytes per token per rank ({cost.formula})"
    tail = f"; {'; '.join(notes)}" if notes else ""
    if kv_bytes is None:
        return _line(
            host,
            WARN,
            f"{label}: {per_token}; one max_model_len sequence ({max_len:,} tokens) needs {needed / GIB:.2f} GiB per "
            f"rank, but the plan does not size the KV cache ({kv_from}): vLLM sizes it at start{tail}",
        )
    fits = tokens_that_fit(cost, kv_bytes, block)
    if needed > kv_bytes:
        return _line(
            host,
            FAIL,
            "vLLM would refuse to start, after loading the weights: "
            + vllm_kv_refusal(max_len, needed, kv_bytes, fits)
            + f" [{label}: {per_token}; KV cache {kv_bytes:,.0f} bytes per rank from {kv_from}]{tail}",
        )
    status = WARN if disagree else PASS
    return _line(
        host,
        status,
        f"{label}: {per_token}; one max_model_len sequence ({max_len:,} tokens) needs {needed / GIB:.2f} GiB of the "
        f"{kv_bytes / GIB:.2f} GiB KV cache per rank ({kv_from}): {fits:,} tokens fit, maximum concurrency "
        f"{kv_bytes / needed:.2f}x{tail}",
    )
