# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A real Prometheus scrapes sim3 (issue 29): node_exporter on every node, with the memory guard's textfile in its
textfile directory, and the head's vLLM stand-in. With the collection's rules and sim3's thresholds as
playbooks/prometheus_targets.yml writes them, no alert fires while the cluster serves; a worker's rank container
stopped by hand fires DgxsparkRankDown for that node, and a guard tripped by hand fires DgxsparkGuardTripped.

Prometheus is Debian's (`make sim-test` installs it with `promtool-bin`), run by this test on a free loopback port
with its storage in tmp_path, and killed at the end whatever happens. It scrapes only the project's own containers.
The rules are the shipped ones with one change, in a copy: every `for:` is a sixth of the shipped one (1m -> 10s),
so that the test waits seconds rather than minutes; the expressions are untouched (checked below).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from simcluster import ansible_on, guard_phase, node_sh, rank_containers

HOSTS = ("sim3-head", "sim3-worker1", "sim3-worker2")
INTERVAL = "2s"  # scrape and evaluation
FOR_SCALE = 6  # the test's `for:` durations are the shipped ones divided by this


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shorter(duration: str) -> str:
    """A `for:` duration of the shipped rules (``1m``, ``10m``) divided by FOR_SCALE, in seconds."""
    match = re.fullmatch(r"(\d+)m", duration)
    assert match, f"a `for:` duration this test does not know: {duration!r}"
    return f"{int(match.group(1)) * 60 // FOR_SCALE}s"


def rules_for_the_test(dest: Path) -> Path:
    """rules/dgxspark.rules.yml as the playbook copied it, with every `for:` shortened (and nothing else)."""
    shipped = yaml.safe_load((dest / "rules" / "dgxspark.rules.yml").read_text(encoding="utf-8"))
    copy = json.loads(json.dumps(shipped))
    for group in copy["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = shorter(rule["for"])
    # the same rules, the same expressions: only `for` differs
    strip = [{k: v for k, v in r.items() if k != "for"} for g in copy["groups"] for r in g["rules"]]
    assert strip == [{k: v for k, v in r.items() if k != "for"} for g in shipped["groups"] for r in g["rules"]]
    path = dest / "test-rules" / "dgxspark.rules.yml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(copy, sort_keys=False, width=1000), encoding="utf-8")
    return path


class Prometheus:
    def __init__(self, url: str, proc: subprocess.Popen, log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def alerts(self, state: str = "firing") -> list[dict]:
        return [a for a in self.api("alerts")["alerts"] if a["state"] == state]

    def until(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        """check()'s first true value within ``timeout`` seconds, else a failure naming ``what``."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"prometheus exited: {self.log.read_text(errors='replace')[-3000:]}"
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {timeout:g} s; alerts {self.api('alerts')['alerts']}")
            time.sleep(1)


@pytest.fixture(scope="module")
def prometheus(sim3, tmp_path_factory) -> Iterator[Prometheus]:
    """The targets and thresholds from playbooks/prometheus_targets.yml for sim3, and a prometheus on 127.0.0.1 that
    scrapes them with the test's rules; killed at the end of the module whatever happened."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed: `make promtool-bin` installs Debian's package (make sim-test does)")
    dest = tmp_path_factory.mktemp("prometheus")
    written = ansible_on(
        "sim3", "ansible-playbook", "playbooks/prometheus_targets.yml", "-e", f"prometheus_dest={dest}"
    )
    assert written.returncode == 0, written.stdout[-4000:] + written.stderr[-2000:]
    nodes = json.loads((dest / "file_sd" / "sim3-node.json").read_text(encoding="utf-8"))
    assert sorted(t["labels"]["node"] for t in nodes) == list(HOSTS)
    config = {
        "global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL, "scrape_timeout": INTERVAL},
        "rule_files": [str(dest / "rules" / "sim3.thresholds.yml"), str(rules_for_the_test(dest))],
        "scrape_configs": [  # the jobs of extras/prometheus/prometheus.yml, on the files the playbook wrote
            {"job_name": "dgxspark-node", "file_sd_configs": [{"files": [str(dest / "file_sd" / "*-node.json")]}]},
            {"job_name": "dgxspark-vllm", "file_sd_configs": [{"files": [str(dest / "file_sd" / "*-vllm.json")]}]},
        ],
    }
    (dest / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log = dest / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={dest / 'prometheus.yml'}",
                f"--storage.tsdb.path={dest / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:
        running.until("prometheus ready", lambda: _ready(running.url), 30)
        yield running
    finally:
        proc.kill()
        proc.wait(10)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def by_node(results: list[dict]) -> dict[str, float]:
    return {r["metric"]["node"]: float(r["value"][1]) for r in results}


def firing(prom: Prometheus, alertname: str) -> set[str]:
    return {a["labels"].get("node", "") for a in prom.alerts() if a["labels"]["alertname"] == alertname}


def test_node_exporter_runs_on_every_node(sim3):
    for host in HOSTS:
        assert node_sh(host, "systemctl is-active prometheus-node-exporter").stdout.strip() == "active", host


def test_a_serving_cluster_is_scraped_and_quiet(sim3, prometheus):
    boot = ansible_on("sim3", "ansible-playbook", "playbooks/boot.yml")
    assert boot.returncode == 0, boot.stdout[-6000:] + boot.stderr[-2000:]
    for host in HOSTS:
        assert rank_containers(host) == {"vllm_dsv41": "running"}, host

    def all_up() -> bool:
        active = prometheus.api("targets")["activeTargets"]
        return len(active) == 4 and all(t["health"] == "up" for t in active) and active

    targets = prometheus.until("every target up", all_up, 60)
    assert {(t["labels"]["job"], t["labels"]["node"]) for t in targets} == {("dgxspark-node", h) for h in HOSTS} | {
        ("dgxspark-vllm", "sim3-head")
    }
    # the guards' metrics arrive through node_exporter, with the targets' labels
    steady = prometheus.until(
        "every guard steady",
        lambda: (f := by_node(prometheus.query('dgxspark_memguard_phase{phase="steady"} == 1'))) and len(f) == 3 and f,
        30,
    )
    assert sorted(steady) == list(HOSTS)
    running = prometheus.until(
        "every rank container running",
        lambda: (f := by_node(prometheus.query("dgxspark_rank_container_running"))) and len(f) == 3 and f,
        30,
    )
    assert running == dict.fromkeys(HOSTS, 1.0)
    assert by_node(prometheus.query("dgxspark_memguard_tripped")) == dict.fromkeys(HOSTS, 0.0)
    assert len(prometheus.query('vllm:num_requests_running{job="dgxspark-vllm",node="sim3-head"}')) >= 1
    # quiet: longer than the longest shortened `for:` of the alerts that could fire on a serving cluster (10 s),
    # nothing fires and nothing is pending
    time.sleep(15)
    assert prometheus.api("alerts")["alerts"] == []


def test_a_rank_stopped_by_hand_fires_rank_down(sim3, prometheus):
    node_sh("sim3-worker2", "docker stop -t 1 vllm_dsv41")
    assert rank_containers("sim3-worker2") == {"vllm_dsv41": "exited"}
    assert guard_phase("sim3-worker2")["phase"] == "steady"  # the guard still expects it: not stopped on purpose
    prometheus.until(
        "dgxspark_rank_container_running 0 for sim3-worker2",
        lambda: by_node(prometheus.query("dgxspark_rank_container_running == 0")) == {"sim3-worker2": 0.0},
        30,
    )
    prometheus.until("DgxsparkRankDown firing for sim3-worker2", lambda: firing(prometheus, "DgxsparkRankDown"), 40)
    assert firing(prometheus, "DgxsparkRankDown") == {"sim3-worker2"}  # the others run
    [alert] = [a for a in prometheus.alerts() if a["labels"]["alertname"] == "DgxsparkRankDown"]
    assert alert["labels"]["rank"] == "2" and alert["labels"]["cluster"] == "sim3"
    assert alert["annotations"]["summary"] == "Rank 2 of sim3 (sim3-worker2) is down"


def test_a_guard_tripped_by_hand_fires_guard_tripped(sim3, prometheus):
    node_sh("sim3-worker1", "dgxspark-memguard trip 'a trip by hand (prometheus test)'")
    prometheus.until(
        "DgxsparkGuardTripped firing for sim3-worker1",
        lambda: "sim3-worker1" in firing(prometheus, "DgxsparkGuardTripped"),
        30,
    )
    tripped = {n for n, v in by_node(prometheus.query("dgxspark_memguard_tripped")).items() if v == 1}
    assert "sim3-worker1" in tripped and firing(prometheus, "DgxsparkGuardTripped") <= tripped
    assert all(guard_phase(host).get("tripped") for host in tripped), tripped


def test_a_cluster_stopped_on_purpose_has_no_rank_down(sim3, prometheus):
    """The trips cleared by hand (the ranks stay stopped: RankDown for every node whose guard is steady), then
    stop.yml: the guards go idle and write no container series, so nothing is down any more."""
    for host in HOSTS:
        node_sh(host, "dgxspark-memguard clear >/dev/null")
    prometheus.until(
        "DgxsparkRankDown firing for every node (cleared guards, stopped ranks)",
        lambda: firing(prometheus, "DgxsparkRankDown") == set(HOSTS),
        40,
    )
    stopped = ansible_on("sim3", "ansible-playbook", "playbooks/stop.yml")
    assert stopped.returncode == 0, stopped.stdout[-6000:]
    for host in HOSTS:
        assert guard_phase(host)["phase"] == "idle", host
    prometheus.until(
        "no dgxspark_rank_container_running series once idle",
        lambda: prometheus.query("dgxspark_rank_container_running") == [],
        30,
    )
    prometheus.until(
        "no rank or guard alert active",
        lambda: (
            not [
                a
                for a in prometheus.api("alerts")["alerts"]
                if a["labels"]["alertname"] in ("DgxsparkRankDown", "DgxsparkGuardTripped")
            ]
        ),
        30,
    )
