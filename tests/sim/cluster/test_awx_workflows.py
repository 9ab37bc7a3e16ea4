# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workflows of awx/resources.yml run as AWX runs them, on the simulated clusters (issue 28).

tools/awx/run_workflow.py: each node a job of its template through ansible-runner inside the execution
environment's image (make ee-image), with what AWX gives a node (the survey's defaults, the node's extra_data, the
workflow's extra variables, the credential's guard key), the nodes without a parent at once, each other node on its
parent's success. Every job's output is checked for ansible-core's "errantly sent data directly to stdout".

- `dgxspark fleet boot` on sim3 and sim4 at once: both boots overlap in time, both clusters serve; then each
  cluster's own stop template.
- `dgxspark preflight, boot, bench` with its promote node on sim3: the benchmark kept short through the bench and
  promote nodes' extra_data (8 requests at concurrency 1, no needle or bursts; an AWX admin's edit of the nodes),
  the results on a folder every job sees (AWX's "Paths to expose to isolated jobs", docs/awx.md section 5), the
  candidate a faster stand-in (SIM_ENGINE_TIME_SCALE 0.8) there too: promoted.

Shares the simulated clusters with the other sim tests: run it alone (flock /tmp/sim.lock on a shared machine).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from simcluster import REPO, ee_image, http_json, rank_containers

sys.path.insert(0, str(REPO / "tools" / "awx"))
import run_workflow  # noqa: E402 - tools/awx is not a package
import runner_job  # noqa: E402

SHARED = "/var/lib/dgxspark-shared"
SMALL_BENCH = {
    "dgxspark_bench_levels": [1],
    "dgxspark_bench_requests": 8,
    "dgxspark_bench_prompt_tokens": 64,
    "dgxspark_bench_max_tokens": 32,
    "dgxspark_bench_warmup": 1,
    "dgxspark_bench_bursts": [],
    "dgxspark_bench_needle_tokens": 0,
}


def _span(job: runner_job.Job) -> tuple[datetime, datetime]:
    times = [datetime.fromisoformat(e["created"]) for e in job.events if e.get("created")]
    return min(times), max(times)


def _stop(cluster: str, template: str, inventory: str | None, tmp_path, image: str) -> None:
    keys: dict[str, str] = {}
    info = run_workflow.sim_cluster(cluster, keys)
    job = runner_job.launch(
        template, inventory, info.ssh_key, tmp_path / f"stop-{cluster}", image, info.network, info.variables
    )
    assert job.status == "successful", job.stdout()[-4000:]


def test_the_fleet_boot_workflow_boots_sim3_and_sim4_at_once(sim3, sim4, tmp_path):
    image = ee_image()
    try:
        runs = run_workflow.run("dgxspark fleet boot", tmp_path / "wf", image=image)
        assert run_workflow.succeeded(runs), {k: (r.status, r.reason) for k, r in runs.items()}
        spans = {key: _span(record.job) for key, record in runs.items()}
        (a_start, a_end), (b_start, b_end) = spans["sim3"], spans["sim4"]
        assert a_start < b_end and b_start < a_end, f"the two boots did not overlap: {spans}"
        for info in (sim3, sim4):
            head = info["nodes"][0]["management_address"]
            assert http_json(f"http://{head}:8000/v1/models")["data"], info["cluster"]
            for node in info["nodes"]:
                assert rank_containers(node["host"]) == {"vllm_dsv41": "running"}, node["host"]
        for key, record in runs.items():
            assert record.limit == key and record.inventory == "fleet"
    finally:
        for cluster in ("sim3", "sim4"):
            _stop(cluster, f"dgxspark stop (fleet {cluster})", None, tmp_path, image)
    for info in (sim3, sim4):
        for node in info["nodes"]:
            assert rank_containers(node["host"]) == {}, node["host"]


def test_the_preflight_boot_bench_workflow_promotes_a_candidate_on_sim3(sim3, tmp_path):
    image = ee_image()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    profile = json.loads((REPO / "inventories" / "sim3" / "serving-profile.json").read_text())
    profile["shapes"][profile["default_shape"]]["environment"] = {"SIM_ENGINE_TIME_SCALE": "0.8"}
    (shared / "candidate.json").write_text(json.dumps(profile, indent=2))
    (shared / "candidate.json").chmod(0o644)
    try:
        runs = run_workflow.run(
            "dgxspark preflight, boot, bench",
            tmp_path / "wf",
            inventory="sim3",
            extra_vars={
                "dgxspark_candidate": f"{SHARED}/candidate.json",
                "dgxspark_bench_dir": f"{SHARED}/bench-sim3",
            },
            node_extra={"bench": SMALL_BENCH, "promote": SMALL_BENCH},
            image=image,
            volumes=[f"{shared}:{SHARED}"],
        )
        assert run_workflow.succeeded(runs), {k: (r.status, r.reason) for k, r in runs.items()}
        assert list(runs) == ["preflight", "boot", "bench", "promote"]
        flat = " ".join(runs["promote"].job.stdout().split())
        assert "serves and is the promoted release" in flat, flat[-4000:]
        bench = runs["bench"].extra_vars
        assert bench["dgxspark_bench_requests"] == 8 and bench["dgxspark_candidate"].endswith("candidate.json")
        assert list((shared / "bench-sim3").iterdir()), "the bench node's run is on the shared folder"
    finally:
        _stop("sim3", "dgxspark stop", "sim3", tmp_path, image)
    for node in sim3["nodes"]:
        assert rank_containers(node["host"]) == {}, node["host"]
