# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Metrics and alerts in Prometheus (issue 29): every metric the rules and the Grafana dashboard query is one that
something serves (the guard's textfile, the stand-in engine's and vLLM's /metrics, node_exporter's ``up``, the rules'
own records and thresholds) or one docs/monitoring.md defines as not exported yet; every alert has a promtool test
that fires it and one where it stays silent; and the file_sd targets and thresholds the playbook writes."""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.prometheus import (
    THRESHOLDS,
    cluster_name,
    prometheus_files,
    prometheus_targets,
    prometheus_thresholds,
    ttft_slo_seconds,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT

PROMETHEUS = ROOT / "extras" / "prometheus"
RULES = PROMETHEUS / "rules" / "dgxspark.rules.yml"
TESTS = PROMETHEUS / "tests" / "dgxspark.test.yml"
DASHBOARD = ROOT / "extras" / "grafana" / "dgxspark-cluster.json"
MONITORING = ROOT / "docs" / "monitoring.md"
# vLLM's own names the rules read that the stand-in does not serve: the KV cache gauge's name before vLLM 0.9's
# rename (vllm/v1/metrics/loggers.py: "Deprecated in 0.9 - Renamed as vllm:kv_cache_usage_perc").
VLLM_ONLY = {"vllm:gpu_cache_usage_perc"}
# Defined by docs/monitoring.md for the rules, exported by nothing yet (the docs say so).
NOT_EXPORTED_YET = {"dgxspark_rank_container_running", "dgxspark_gpu_clock_latched"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}


def _guard_metrics() -> set[str]:
    spec = importlib.util.spec_from_file_location(
        "guard_for_metrics", ROOT / "roles/memguard/files/dgxspark_memguard.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.METRICS)


def _standin_metrics() -> set[str]:
    """What sim/engine's /metrics serves: its gauges and counters, and each histogram's series."""
    source = (ROOT / "sim" / "engine" / "vllm_sim" / "api.py").read_text(encoding="utf-8")
    names = set(re.findall(r'metric\(\s*"(vllm:[a-z_]+)"', source))
    for histogram in re.findall(r'hist\(\s*"(vllm:[a-z_]+)"', source):
        names |= {histogram + suffix for suffix in ("_bucket", "_sum", "_count")}
    return names


def _records() -> set[str]:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule}


KNOWN = (
    {"up"}
    | _guard_metrics()
    | _standin_metrics()
    | VLLM_ONLY
    | NOT_EXPORTED_YET
    | _records()
    | set(THRESHOLDS.values())
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords, label names and strings left out)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if not call and name not in KEYWORDS:
            names.add(name)
    return names


def test_the_name_parser() -> None:
    expr = (
        'sum by (cluster, le) (rate(vllm:x_bucket{job="a",le="1.0"}[5m])) > on (cluster) group_left () b:c or up == 0'
    )
    assert metric_names(expr) == {"vllm:x_bucket", "b:c", "up"}


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for variable in dashboard["templating"]["list"]:  # label_values(SELECTOR, LABEL): the selector
        if variable.get("definition"):
            exprs.append(re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["definition"]).group(1))
    return exprs


def test_the_dashboard_queries_only_known_metrics() -> None:
    exprs = _dashboard_exprs()
    assert len(exprs) >= 13
    unknown = {name: expr for expr in exprs for name in metric_names(expr) if name not in KNOWN}
    assert not unknown, f"the dashboard queries metrics nothing serves: {unknown}"


def test_the_dashboard_shows_what_the_rules_use() -> None:
    """The guard, the API and the vLLM metrics the alerts read are all on the dashboard."""
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    used = set().union(*(metric_names(r["expr"]) for g in rules["groups"] for r in g["rules"] if "alert" in r))
    shown = set().union(*(metric_names(expr) for expr in _dashboard_exprs()))
    # the queue and KV alerts read the raw gauges, the dashboard their records; the staleness alert a timestamp
    # the dashboard shows as an age
    shown |= {
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "dgxspark_memguard_last_sample_timestamp_seconds",
        "dgxspark_memguard_stale_after_seconds",
        "dgxspark_rank_container_running",
    }
    assert used - shown == set()


def test_the_rules_query_only_known_metrics() -> None:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    unknown = {name: expr for expr in exprs for name in metric_names(expr) if name not in KNOWN}
    assert not unknown, f"the rules query metrics nothing serves: {unknown}"


def test_every_metric_is_documented() -> None:
    text = MONITORING.read_text(encoding="utf-8")
    missing = sorted(
        name for name in _guard_metrics() | NOT_EXPORTED_YET | set(THRESHOLDS.values()) if name not in text
    )
    assert not missing, f"docs/monitoring.md does not name {missing}"


def test_every_alert_fires_in_a_test_and_stays_silent_in_one() -> None:
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    alerts = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    tests = yaml.safe_load(TESTS.read_text(encoding="utf-8"))
    fired: set[str] = set()
    silent: set[str] = set()
    for test in tests["tests"]:
        for case in test.get("alert_rule_test", []):
            (fired if case["exp_alerts"] else silent).add(case["alertname"])
    assert alerts - fired == set(), "alerts no test fires"
    assert alerts - silent == set(), "alerts no test shows silent"
    assert len(alerts) >= 9


# ----------------------------------------------------------------------------- targets and thresholds


PLAN: dict[str, Any] = {
    "head": "spark-head",
    "ranks": [
        {"host": "spark-head", "rank": 0, "role": "head"},
        {"host": "spark-w1", "rank": 1, "role": "worker"},
        {"host": "spark-w2", "rank": 2, "role": "worker"},
    ],
    "api": {"scheme": "http", "address": "198.51.100.10", "port": 8000},
}
HOSTVARS = {"spark-head": {"ansible_host": "192.0.2.10"}, "spark-w1": {"ansible_host": "2001:db8::11"}, "spark-w2": {}}


def test_the_targets_of_a_cluster() -> None:
    targets = prometheus_targets(PLAN, HOSTVARS, "spark3")
    assert [group["targets"] for group in targets["node"]] == [
        ["192.0.2.10:9100"],
        ["[2001:db8::11]:9100"],
        ["spark-w2:9100"],
    ]
    assert targets["node"][1]["labels"] == {"cluster": "spark3", "node": "spark-w1", "rank": "1", "role": "worker"}
    [vllm] = targets["vllm"]
    assert vllm["targets"] == ["198.51.100.10:8000"]  # where the plan's API is, as the boot's clients reach it
    assert vllm["labels"]["__scheme__"] == "http" and vllm["labels"]["node"] == "spark-head"
    https = prometheus_targets({**PLAN, "api": {**PLAN["api"], "scheme": "https"}}, HOSTVARS, "spark3", 9101)
    assert https["vllm"][0]["labels"]["__scheme__"] == "https" and https["node"][0]["targets"] == ["192.0.2.10:9101"]


def test_an_api_on_loopback_is_refused_unless_prometheus_says_where() -> None:
    plan = {**PLAN, "api": {**PLAN["api"], "address": "127.0.0.1"}}
    with pytest.raises(AnsibleFilterError, match="binds 127.0.0.1 \\(loopback\\)"):
        prometheus_targets(plan, HOSTVARS, "spark3")
    assert prometheus_targets(plan, HOSTVARS, "spark3", vllm_address="192.0.2.10")["vllm"][0]["targets"] == [
        "192.0.2.10:8000"
    ]


def test_the_ttft_slo_is_the_benchs() -> None:
    assert ttft_slo_seconds(None) == 1.0  # the bench's default: TTFT p90 <= 1000 ms
    assert ttft_slo_seconds([{"metric": "ttft_ms", "op": "<=", "threshold": 800, "percentile": 90}]) == 0.8
    with pytest.raises(AnsibleFilterError, match="not on p90"):
        ttft_slo_seconds([{"metric": "ttft_ms", "op": "<=", "threshold": 800, "percentile": 99}])
    with pytest.raises(AnsibleFilterError, match="no ttft_ms SLO"):
        ttft_slo_seconds([{"metric": "tps_user", "op": ">=", "threshold": 20, "percentile": 10}])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sim3", 0, 1.0), "max_num_seqs"),
        (("sim3", 4, 0), "ttft_p90_seconds"),
        (("sim3", 4, 1.0, 1.5), "kv_cache_usage_max"),
        (('si"m3', 4, 1.0), "the cluster's name"),
    ],
)
def test_thresholds_refused(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(AnsibleFilterError, match=message):
        prometheus_thresholds(*args)


def test_sim3s_thresholds_are_what_the_playbook_writes() -> None:
    """extras/prometheus/tests/sim3.thresholds.yml (the promtool tests' thresholds) is the filter's output for sim3:
    its profile's max_num_seqs and the bench's default TTFT SLO."""
    profile = json.loads((ROOT / "inventories" / "sim3" / "serving-profile.json").read_text(encoding="utf-8"))
    sizing = profile["shapes"][profile.get("default_shape") or next(iter(profile["shapes"]))]["sizing"]
    written = prometheus_thresholds("sim3", sizing["max_num_seqs"], ttft_slo_seconds(None))
    fixture = yaml.safe_load((PROMETHEUS / "tests" / "sim3.thresholds.yml").read_text(encoding="utf-8"))
    assert fixture == written


def test_the_playbook_names_every_knob_it_reads() -> None:
    playbook = (ROOT / "playbooks" / "prometheus_targets.yml").read_text(encoding="utf-8")
    used = set(re.findall(r"\bprometheus_[a-z0-9_]+", playbook)) - {
        "prometheus_plan",
        "prometheus_files",
        "prometheus_targets",
    }
    used -= {"prometheus_thresholds", "prometheus_ttft_slo_seconds"}
    header = playbook.split("- name:", 1)[0]
    assert used and all(f"#   {name} " in header for name in used), sorted(used)
    docs = MONITORING.read_text(encoding="utf-8")
    assert all(name in docs for name in used), sorted(name for name in used if name not in docs)


def test_the_cluster_is_named_by_the_knob_the_fleet_or_the_inventory() -> None:
    assert cluster_name({"cluster": "lab", "head_group": "sim3_head", "inventory": "fleet"}) == "lab"
    assert cluster_name({"cluster": "", "head_group": "sim3_head", "inventory": "fleet"}) == "sim3"
    assert cluster_name({"cluster": "", "head_group": "", "inventory": "spark3"}) == "spark3"


def test_what_the_playbook_writes_with_the_knobs_as_the_play_templates_them() -> None:
    result = {
        "plan": PLAN,
        "shape": "tp3-triangle",
        "profile": {"shapes": {"tp3-triangle": {"sizing": {"max_num_seqs": 8}}}},
    }
    knobs = {"inventory": "spark3", "node_exporter_port": "9101", "ttft_p90_ms": "", "slos": None}
    files = prometheus_files(result, HOSTVARS, {**knobs, "kv_cache_usage_max": "0.8", "guard_grace_fraction": ""})
    assert files["cluster"] == "spark3" and files["targets"]["node"][0]["targets"] == ["192.0.2.10:9101"]
    rules = {rule["record"]: rule["expr"] for rule in files["thresholds"]["groups"][0]["rules"]}
    assert rules == {
        "dgxspark:threshold:max_num_seqs": 'label_replace(vector(8), "cluster", "spark3", "", "")',
        "dgxspark:threshold:ttft_p90_seconds": 'label_replace(vector(1), "cluster", "spark3", "", "")',
        "dgxspark:threshold:kv_cache_usage_max": 'label_replace(vector(0.8), "cluster", "spark3", "", "")',
        "dgxspark:threshold:guard_grace_fraction": 'label_replace(vector(0.5), "cluster", "spark3", "", "")',
    }
    with pytest.raises(AnsibleFilterError, match="prometheus_node_exporter_port: expected int"):
        prometheus_files(result, HOSTVARS, {**knobs, "node_exporter_port": "ninety"})
    fast = prometheus_files(result, HOSTVARS, {**knobs, "ttft_p90_ms": "800"})["thresholds"]["groups"][0]["rules"]
    assert fast[1]["expr"] == 'label_replace(vector(0.8), "cluster", "spark3", "", "")'
