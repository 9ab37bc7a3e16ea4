#!/usr/bin/env python
"""Run a workflow of awx/resources.yml the way AWX runs it, without an AWX: each node a job of its template, launched
as tools/awx/runner_job.py launches one (ansible-runner inside the execution environment's image, a private data
directory per job), the nodes without a parent at once, each node after its parent's success.

    .venv/bin/python tools/awx/run_workflow.py 'dgxspark fleet boot' --sim
    .venv/bin/python tools/awx/run_workflow.py 'dgxspark preflight, boot, bench' --sim --inventory sim3 \\
        -e dgxspark_candidate=/var/lib/dgxspark-shared/candidate.json \\
        --node-extra bench:dgxspark_bench_requests=8 --share /tmp/shared:/var/lib/dgxspark-shared

What each node's job gets, as AWX gives it (awx/main/models/workflow.py, WorkflowJobNode.get_job_kwargs; the
template's _accept_or_ignore_job_kwargs):
  - its template's playbook, inventory, limit and credential; the workflow's inventory (the launch's, where the
    workflow asks for one) for a template that asks for an inventory, else the node's own, else the template's;
    the node's limit (or the workflow's) only where the template asks for one or it equals the template's own:
    AWX refuses a node whose prompt the template does not take;
  - extra variables: the survey's defaults for every question not answered, then the node's extra_data, then the
    workflow's extra variables (the launch's -e), then the credentials' injected variables (--credential-var; the
    guards' key, per cluster);
  - a node whose prompts its template does not take is refused by AWX when the node is saved (the import fails on
    it); here such a node fails without a job. A node that leaves a required survey question unanswered (promote's
    dgxspark_candidate, when the launch gives none) is not refused at save: AWX starts its job without the
    variable (it only logs "Bad launch configuration") and the playbook's own argument check fails it. Here the
    node fails up front, status "refused", naming the variable ("variables_needed_to_start"), rather than spend a
    job on it; either way the node fails, what follows it does not run, and the workflow fails.

With --sim, each node's cluster is a simulated one (sim/README.md): the machine credential is
.cache/sim/<cluster>/id_ed25519, the network dgxspark-<cluster>-mgmt, the guards' key
inventories/<cluster>/.dgxspark-memguard.key's (or a new one per run), the cluster being the node's limit or its
inventory's name. --share HOST:CONTAINER exposes a folder of this machine to every job, as AWX's "Paths to expose
to isolated jobs" does (docs/awx.md, section 5): promote's comparison needs the bench node's run there.

Prints each node's status; every job's stdout is checked for ansible-core's "errantly sent data directly to stdout"
warning, which fails the node. Exits 0 when the workflow succeeded (every node that ran succeeded, none refused).
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runner_job  # noqa: E402 - tools/awx is not a package

ROOT = runner_job.ROOT
ERRANT = "errantly sent data directly to"


@dataclass
class NodeRun:
    identifier: str
    template: str
    status: str = "never run"  # successful, failed, refused, skipped (a parent failed), never run
    reason: str = ""
    job: runner_job.Job | None = None
    extra_vars: dict[str, Any] = field(default_factory=dict)
    inventory: str = ""
    limit: str = ""


def workflow(name: str) -> dict[str, Any]:
    found = [w for w in runner_job.resources()["workflow_job_templates"] if w["name"] == name]
    if not found:
        raise KeyError(f"no workflow named {name!r} in awx/resources.yml")
    return found[0]


def _json(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return json.loads(value) if value else {}


def node_launch(
    node: dict[str, Any],
    wf: dict[str, Any],
    wf_inventory: str | None,
    wf_extra: dict[str, Any],
    node_extra: dict[str, Any],
) -> tuple[dict[str, Any], str, str, list[str]]:
    """A node's job as AWX would create it: (its template, inventory, limit, refusals). Refusals are why AWX would
    not start it (a prompt its template does not take, a required question unanswered)."""
    template = runner_job.template(node["unified_job_template"]["name"])
    refusals: list[str] = []
    own_inventory = runner_job.template_inventory(template)
    node_inventory = (node.get("inventory") or {}).get("name")
    inventory = own_inventory
    for given in (node_inventory, wf_inventory):
        if given is None or given == own_inventory:
            continue
        if not template.get("ask_inventory_on_launch"):
            refusals.append(f"inventory {given!r}: {template['name']} does not prompt for an inventory on launch")
        else:
            inventory = given
    limit = template.get("limit", "")
    for given in (node.get("limit"), wf.get("limit") if wf.get("ask_limit_on_launch") else None):
        if given in (None, "", limit):
            continue
        if not template.get("ask_limit_on_launch"):
            refusals.append(f"limit {given!r}: {template['name']} does not prompt for a limit on launch")
        else:
            limit = given
    answers = {**_json(node.get("extra_data")), **node_extra, **wf_extra}
    spec = (template.get("related") or {}).get("survey_spec") or {}
    missing = [q["variable"] for q in spec.get("spec", []) if q.get("required") and q["variable"] not in answers]
    if template.get("survey_enabled") and missing:
        refusals.append("variables_needed_to_start: " + ", ".join(f"'{v}' value missing" for v in missing))
    return template, inventory, limit, refusals


@dataclass
class Cluster:
    ssh_key: Path
    network: str
    variables: dict[str, Any]


def sim_cluster(name: str, keys: dict[str, str]) -> Cluster:
    """A simulated cluster's machine credential, network and guards' key (what a credential injects)."""
    if name not in keys:
        path = ROOT / "inventories" / name / ".dgxspark-memguard.key"
        keys[name] = path.read_text().split(" salt=")[0].strip() if path.is_file() else secrets.token_hex(16)
    return Cluster(
        ROOT / ".cache" / "sim" / name / "id_ed25519", f"dgxspark-{name}-mgmt", {"memguard_peer_key": keys[name]}
    )


def run(
    name: str,
    work: Path,
    clusters: dict[str, Cluster] | None = None,
    inventory: str | None = None,
    extra_vars: dict[str, Any] | None = None,
    node_extra: dict[str, dict[str, Any]] | None = None,
    image: str = runner_job.DEFAULT_IMAGE,
    volumes: list[str] | None = None,
    timeout: float = 1800,
    log: Any = print,
) -> dict[str, NodeRun]:
    """Run the workflow `name`; its nodes' runs by identifier. `clusters` maps a cluster (a node's limit, else its
    inventory) to its credential and network; None: the simulated clusters'."""
    wf = workflow(name)
    if inventory is not None and not wf.get("ask_inventory_on_launch"):
        raise ValueError(f"{name} does not prompt for an inventory on launch")
    if extra_vars and not wf.get("ask_variables_on_launch"):
        raise ValueError(f"{name} does not prompt for extra variables on launch")
    nodes = {n["identifier"]: n for n in wf["related"]["workflow_nodes"]}
    children = {key: [c["identifier"] for c in n["related"].get("success_nodes", [])] for key, n in nodes.items()}
    parents = {key: [p for p, kids in children.items() if key in kids] for key in nodes}
    runs = {key: NodeRun(key, n["unified_job_template"]["name"]) for key, n in nodes.items()}
    keys: dict[str, str] = {}
    lock = threading.Lock()
    ident = [0]

    def run_node(key: str) -> None:
        node = nodes[key]
        template, inv, limit, refusals = node_launch(
            node, wf, inventory, extra_vars or {}, (node_extra or {}).get(key, {})
        )
        record = runs[key]
        record.reason = ""
        record.inventory, record.limit = inv, limit
        if refusals:
            record.status, record.reason = "refused", "; ".join(refusals)
            log(f"[{key}] {template['name']}: refused by AWX's checks: {record.reason}")
            return
        cluster_name = limit or inv
        cluster = (clusters or {}).get(cluster_name) if clusters is not None else sim_cluster(cluster_name, keys)
        if cluster is None:
            record.status, record.reason = "failed", f"no credential or network given for {cluster_name}"
            return
        record.extra_vars = {
            **_json(node.get("extra_data")),
            **(node_extra or {}).get(key, {}),
            **(extra_vars or {}),
            **cluster.variables,
        }
        with lock:
            ident[0] += 1
            number = str(ident[0])
        log(f"[{key}] {template['name']} on {inv}{f' -l {limit}' if limit else ''}: job {number} starts")
        try:
            job = runner_job.launch(
                template["name"],
                inv,
                cluster.ssh_key,
                work / f"{number}-{key}",
                image=image,
                network=cluster.network,
                extra_vars=record.extra_vars,
                ident=number,
                timeout=timeout,
                limit=limit if template.get("ask_limit_on_launch") else None,
                volumes=volumes,
            )
        except Exception as error:  # noqa: BLE001 - the node fails, the workflow reports it
            record.status, record.reason = "failed", f"{type(error).__name__}: {error}"
            log(f"[{key}] {template['name']}: {record.reason}")
            return
        record.job = job
        errant = [line for line in job.stdout().splitlines() if ERRANT in line]
        if job.status != "successful":
            record.status, record.reason = "failed", f"job {job.status} (rc {job.rc})"
        elif errant:
            record.status, record.reason = "failed", f"ansible-core warned: {errant[0].strip()}"
        else:
            record.status = "successful"
        times = [datetime.fromisoformat(e["created"]) for e in job.events if e.get("created")]
        took = f", {(max(times) - min(times)).total_seconds():.1f} s from {min(times):%H:%M:%S}" if times else ""
        log(f"[{key}] {template['name']}: {record.status} {record.reason} ({len(job.events)} events{took})")

    def branch(key: str) -> None:
        run_node(key)
        following = children[key] if runs[key].status == "successful" else []
        for skipped in children[key]:
            if runs[key].status != "successful":
                _skip(skipped)
        threads = [threading.Thread(target=branch, args=(k,)) for k in following if _ready(k)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _ready(key: str) -> bool:
        # all_parents_must_converge is false here: a node runs on the success of any one parent, once
        with lock:
            if runs[key].status != "never run" or runs[key].reason == "queued":
                return False
            runs[key].reason = "queued"
            return True

    def _skip(key: str) -> None:
        if runs[key].status == "never run":
            runs[key].status, runs[key].reason = "skipped", "a parent did not succeed"
            for k in children[key]:
                _skip(k)

    roots = [key for key in nodes if not parents[key]]
    threads = [threading.Thread(target=branch, args=(key,)) for key in roots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return runs


def succeeded(runs: dict[str, NodeRun]) -> bool:
    """AWX's verdict on the workflow job: successful when no node failed or was refused (these workflows have no
    failure or always paths, so a node skipped after its parent's failure leaves the workflow failed too)."""
    return all(r.status == "successful" for r in runs.values())


def _pairs(items: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in items:
        key, _sep, value = item.partition("=")
        try:
            found[key] = json.loads(value)
        except ValueError:
            found[key] = value
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workflow", help="a workflow's name in awx/resources.yml")
    parser.add_argument("--inventory", help="the launch's inventory (where the workflow asks for one)")
    parser.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE (JSON or text)")
    parser.add_argument(
        "--node-extra",
        action="append",
        default=[],
        metavar="NODE:KEY=VALUE",
        help="extra_data of one node, over the file's (an AWX admin's edit of the node)",
    )
    parser.add_argument("--sim", action="store_true", help="the simulated clusters' credentials and networks")
    parser.add_argument(
        "--share", action="append", default=[], metavar="HOST:CONTAINER", help="a folder every job sees"
    )
    parser.add_argument("--image", default=runner_job.DEFAULT_IMAGE)
    parser.add_argument("--dir", type=Path, default=ROOT / ".build" / "awx-workflow")
    args = parser.parse_args()
    if not args.sim:
        parser.error("only --sim is implemented: the simulated clusters' credentials and networks")
    node_extra: dict[str, dict[str, Any]] = {}
    for item in args.node_extra:
        node, _sep, pair = item.partition(":")
        node_extra.setdefault(node, {}).update(_pairs([pair]))
    runs = run(
        args.workflow,
        args.dir.absolute(),
        None,
        args.inventory,
        _pairs(args.extra_var),
        node_extra,
        args.image,
        args.share,
    )
    ok = succeeded(runs)
    for record in runs.values():
        print(f"  {record.identifier}: {record.status} {record.reason}")
    print(f"{args.workflow}: {'successful' if ok else 'failed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
