# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of playbooks/prometheus_targets.yml (issue 29): a cluster's Prometheus scrape targets (file_sd) from
its plan, and its thresholds (a rules file of constant series) from its profile and the playbook's knobs.
Documentation: the .yml file of each filter; docs/monitoring.md."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench.bench import DEFAULT_SLOS

# The scrape jobs extras/prometheus/prometheus.yml reads the targets of (one file each per cluster).
NODE_JOB = "dgxspark-node"
VLLM_JOB = "dgxspark-vllm"
# The threshold series the alerting rules (extras/prometheus/rules/dgxspark.rules.yml) join on the cluster label.
THRESHOLDS = {
    "max_num_seqs": "dgxspark:threshold:max_num_seqs",
    "ttft_p90_seconds": "dgxspark:threshold:ttft_p90_seconds",
    "kv_cache_usage_max": "dgxspark:threshold:kv_cache_usage_max",
    "guard_grace_fraction": "dgxspark:threshold:guard_grace_fraction",
}


def _host_port(address: str, port: int) -> str:
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return f"{address}:{port}"
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return address == "localhost"


def prometheus_targets(
    plan: Any, hostvars: Any, cluster: Any, node_exporter_port: Any = 9100, vllm_address: Any = ""
) -> dict[str, list[dict[str, Any]]]:
    """``{"node": [...], "vllm": [...]}``: the file_sd target groups of the cluster ``plan`` (serving_profile's
    ``plan``) describes. node_exporter on every rank's node at its ``ansible_host`` (its inventory name without
    one, as Ansible connects); the head's vLLM ``/metrics`` where the plan's API is (``plan.api``: the address and
    port the boot's own clients use, and its scheme). Each target is labelled with ``cluster``, ``node``, ``rank``
    and ``role``."""
    name = "dgxspark.cluster.prometheus_targets"
    if not isinstance(plan, Mapping) or not isinstance(plan.get("ranks"), Sequence) or not plan.get("api"):
        raise AnsibleFilterError(f"{name}: the input is serving_profile's plan (with ranks and api), found {plan!r}")
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError(f"{name}: hostvars must be a mapping")
    if not isinstance(cluster, str) or not cluster:
        raise AnsibleFilterError(f"{name}: the cluster's name must be a non-empty string, found {cluster!r}")
    port = node_exporter_port
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise AnsibleFilterError(f"{name}: node_exporter's port must be a TCP port (1-65535), found {port!r}")
    nodes = []
    for rank in plan["ranks"]:
        host = str(rank["host"])
        address = str((hostvars.get(host) or {}).get("ansible_host") or host)
        labels = {"cluster": cluster, "node": host, "rank": str(rank["rank"]), "role": str(rank["role"])}
        nodes.append({"targets": [_host_port(address, port)], "labels": labels})
    api = plan["api"]
    address = str(vllm_address or api["address"])
    if _is_loopback(address):
        raise AnsibleFilterError(
            f"{name}: the API of {plan.get('head')} binds {address} (loopback): a Prometheus on another machine cannot "
            "scrape its /metrics. Bind it where Prometheus reaches it (the profile's container.api.bind), or, with "
            "Prometheus on the head itself, say so: -e prometheus_vllm_address=127.0.0.1"
        )
    head = next((r for r in plan["ranks"] if r["role"] == "head"), plan["ranks"][0])
    vllm_labels = {"cluster": cluster, "node": str(head["host"]), "rank": str(head["rank"]), "role": "head"}
    vllm_labels.update({"__scheme__": str(api.get("scheme") or "http"), "__metrics_path__": "/metrics"})
    return {"node": nodes, "vllm": [{"targets": [_host_port(address, int(api["port"]))], "labels": vllm_labels}]}


def _number(value: Any, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise AnsibleFilterError(f"dgxspark.cluster.prometheus_thresholds: {what}: expected a number, found {value!r}")
    if not low < value <= high:
        raise AnsibleFilterError(
            f"dgxspark.cluster.prometheus_thresholds: {what}: expected a number over {low:g} and at most {high:g}, "
            f"found {value!r}"
        )
    return value


def ttft_slo_seconds(slos: Any) -> float:
    """The TTFT p90 SLO of the benchmark's SLOs (``dgxspark_bench_slos``; none: the bench's default, p90 <= 1000 ms),
    in seconds. A TTFT SLO on another percentile is refused: the rules record p90 only."""
    slos = DEFAULT_SLOS if slos in (None, "", []) else slos
    if not isinstance(slos, Sequence) or isinstance(slos, str):
        raise AnsibleFilterError(f"dgxspark.cluster.prometheus_thresholds: slos: expected a list, found {slos!r}")
    ttft = [slo for slo in slos if isinstance(slo, Mapping) and slo.get("metric") == "ttft_ms"]
    if not ttft:
        raise AnsibleFilterError(
            "dgxspark.cluster.prometheus_thresholds: the SLOs have no ttft_ms SLO: give prometheus_ttft_p90_ms"
        )
    slo = ttft[0]
    if slo.get("percentile", 90) != 90 or slo.get("op", "<=") not in ("<=", "<"):
        raise AnsibleFilterError(
            f"dgxspark.cluster.prometheus_thresholds: the ttft_ms SLO {dict(slo)} is not on p90 with <= or <: the "
            "rules record TTFT p90 only; give prometheus_ttft_p90_ms"
        )
    return _number(slo.get("threshold"), "the ttft_ms SLO's threshold (ms)", 0, 3600 * 1000) / 1000.0


def prometheus_thresholds(
    cluster: Any,
    max_num_seqs: Any,
    ttft_p90_seconds: Any,
    kv_cache_usage_max: Any = 0.9,
    guard_grace_fraction: Any = 0.5,
) -> dict[str, Any]:
    """A Prometheus rules file (as data) of the cluster's thresholds: one constant series each, labelled with the
    cluster, that the alerting rules compare with (``on(cluster)``)."""
    if not isinstance(cluster, str) or not cluster or '"' in cluster or "\\" in cluster:
        raise AnsibleFilterError(f"dgxspark.cluster.prometheus_thresholds: the cluster's name, found {cluster!r}")
    if isinstance(max_num_seqs, bool) or not isinstance(max_num_seqs, int) or max_num_seqs < 1:
        raise AnsibleFilterError(
            f"dgxspark.cluster.prometheus_thresholds: max_num_seqs: expected a positive integer, found {max_num_seqs!r}"
        )
    values = {
        "max_num_seqs": max_num_seqs,
        "ttft_p90_seconds": _number(ttft_p90_seconds, "ttft_p90_seconds", 0, 3600),
        "kv_cache_usage_max": _number(kv_cache_usage_max, "kv_cache_usage_max", 0, 1),
        "guard_grace_fraction": _number(guard_grace_fraction, "guard_grace_fraction", 0, 1),
    }
    rules = [
        {
            "record": THRESHOLDS[key],
            "expr": f'label_replace(vector({value:g}), "cluster", "{cluster}", "", "")',
        }
        for key, value in values.items()
    ]
    return {"groups": [{"name": f"dgxspark-thresholds-{cluster}", "rules": rules}]}


def _knob(knobs: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
    """A knob as the play templated it (a number may come as its text); ``default`` when empty or null."""
    value = knobs.get(key)
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError(
            f"dgxspark.cluster.prometheus_files: prometheus_{key}: expected {kind.__name__}, found {value!r}"
        ) from None


def cluster_name(knobs: Mapping[str, Any]) -> str:
    """``prometheus_cluster``; else a fleet's cluster by the head group its dgxspark_cluster_groups names (sim3_head:
    sim3); else the inventory's directory (inventories/spark3: spark3)."""
    head_group = str(knobs.get("head_group") or "")
    name = str(knobs.get("cluster") or "") or (head_group.removesuffix("_head") if head_group else "")
    return name or str(knobs.get("inventory") or "")


def prometheus_files(result: Any, hostvars: Any, knobs: Any) -> dict[str, Any]:
    """What playbooks/prometheus_targets.yml writes for one cluster, from serving_profile's ``result`` (its ``plan``,
    ``profile`` and ``shape``) and the play's ``knobs``: ``cluster``, ``targets`` (:func:`prometheus_targets`) and
    ``thresholds`` (:func:`prometheus_thresholds`)."""
    if not isinstance(result, Mapping) or not result.get("plan") or not isinstance(result.get("profile"), Mapping):
        raise AnsibleFilterError("dgxspark.cluster.prometheus_files: the input is serving_profile's result (a plan)")
    if not isinstance(knobs, Mapping):
        raise AnsibleFilterError(f"dgxspark.cluster.prometheus_files: the knobs must be a mapping, found {knobs!r}")
    cluster = cluster_name(knobs)
    ttft_ms = _knob(knobs, "ttft_p90_ms", float, None)
    ttft = ttft_slo_seconds(knobs.get("slos")) if ttft_ms is None else ttft_ms / 1000.0
    sizing = result["profile"]["shapes"][result["shape"]]["sizing"]
    return {
        "cluster": cluster,
        "targets": prometheus_targets(
            result["plan"],
            hostvars,
            cluster,
            _knob(knobs, "node_exporter_port", int, 9100),
            str(knobs.get("vllm_address") or ""),
        ),
        "thresholds": prometheus_thresholds(
            cluster,
            sizing["max_num_seqs"],
            ttft,
            _knob(knobs, "kv_cache_usage_max", float, 0.9),
            _knob(knobs, "guard_grace_fraction", float, 0.5),
        ),
    }


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "prometheus_files": prometheus_files,
            "prometheus_targets": prometheus_targets,
            "prometheus_thresholds": prometheus_thresholds,
            "prometheus_ttft_slo_seconds": ttft_slo_seconds,
        }
