#!/usr/bin/env python
"""Launch a job template of awx/resources.yml the way AWX launches it, without an AWX: ansible-runner inside the
execution environment's image (make ee-image), in a private data directory made as AWX makes one.

    .venv/bin/python tools/awx/runner_job.py 'dgxspark preflight' --inventory sim3 \\
        --ssh-key .cache/sim/sim3/id_ed25519 --network dgxspark-sim3-mgmt
    ... -e boot_timeout=600      (extra variables over the survey's answers, as a launch's prompt gives them)
    .venv/bin/python tools/awx/runner_job.py 'dgxspark boot (fleet sim3)' \\
        --ssh-key .cache/sim/sim3/id_ed25519 --network dgxspark-sim3-mgmt   (a fleet cluster's: its inventory, limit)

The private data directory (ansible-runner 2.4's layout; AWX's RunJob writes the same, awx/main/tasks/jobs.py):

    project/          the checkout as a project update leaves it: its files that git tracks or would track (no
                      .ansible link to the checkout, no venvs, caches or build output)
    inventory/hosts   an executable script that prints the inventory as AWX's inventory script data: the hosts,
                      groups and variables of the inventory in awx/resources.yml (no key path: the credential
                      supplies the key)
    env/extravars     the survey's answers as the launch form opens (every question's default; a question without
                      one is left out, as AWX leaves it out), the AWX meta variables, then the given extra variables
    env/ssh_key       the machine credential's private key: ansible-runner adds it to an ssh-agent for the run
    env/cmdline       -u USER, the credential's user name; -l LIMIT, the template's limit (or the launch's, when the
                      template asks for one), as AWX's RunJob.build_args adds it
    env/envvars       what AWX sets that the run sees: ANSIBLE_COLLECTIONS_PATH and ANSIBLE_ROLES_PATH (the job's
                      requirements folders, then the project's ansible.cfg setting, then the defaults, where the
                      EE's collections are: /usr/share/ansible/collections), the ControlPath folder /runner/cp, ...
    env/settings      job_timeout (the template's), suppress_ansible_output (AWX reads the events, not stdout)

Then `docker run --rm -v DIR:/runner IMAGE ansible-runner run /runner -p PLAYBOOK --ident ID`, as the image's own
user (DIR is handed to it when this runs as root), on --network. What AWX shows of the job is read back from
artifacts/ID/: status (successful, failed, ...), rc, and the job events (job_events/*.json, in counter order).
Prints the events' stdout and the status; exits with the runner's rc.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "awx" / "resources.yml"
DEFAULT_IMAGE = "dgxspark-ee/ee:latest"
# in the container
RUNNER = "/runner"
EE_COLLECTIONS_DEFAULT = "~/.ansible/collections:/usr/share/ansible/collections"
EE_ROLES_DEFAULT = "~/.ansible/roles:/usr/share/ansible/roles:/etc/ansible/roles"


def resources() -> dict[str, Any]:
    return yaml.safe_load(RESOURCES.read_text(encoding="utf-8"))


def template(name: str) -> dict[str, Any]:
    found = [t for t in resources()["job_templates"] if t["name"] == name]
    if not found:
        raise KeyError(f"no job template named {name!r} in {RESOURCES.relative_to(ROOT)}")
    return found[0]


def survey_defaults(job_template: dict[str, Any]) -> dict[str, Any]:
    """The survey's answers when the launch form is submitted as it opens: AWX's survey defaults (a question
    without a default is not sent)."""
    spec = (job_template.get("related") or {}).get("survey_spec") or {}
    return {q["variable"]: q["default"] for q in spec.get("spec", []) if q.get("default") is not None}


def template_inventory(job_template: dict[str, Any]) -> str:
    """The name of the template's own inventory (a launch that asks for none runs there)."""
    return job_template["inventory"]["name"]


def launch_limit(job_template: dict[str, Any], limit: str | None = None) -> str:
    """The limit a launch runs with: the template's own, or the one given when the template asks for it on launch
    (AWX ignores a limit given to a template that does not ask; refused here, so that no test believes otherwise)."""
    own = job_template.get("limit", "")
    if limit is None or limit == own:
        return own
    if not job_template.get("ask_limit_on_launch"):
        raise ValueError(f"{job_template['name']} does not ask for a limit on launch: it runs on {own or 'every host'}")
    return limit


def _variables(text: str) -> dict[str, Any]:
    return yaml.safe_load(text or "") or {}


def inventory_script_data(name: str) -> dict[str, Any]:
    """The inventory `name` of awx/resources.yml as AWX's inventory script prints it (Inventory.get_script_data)."""
    found = [i for i in resources()["inventory"] if i["name"] == name]
    if not found:
        raise KeyError(f"no inventory named {name!r} in {RESOURCES.relative_to(ROOT)}")
    related = found[0].get("related") or {}
    data: dict[str, Any] = {"all": {"vars": _variables(found[0].get("variables", ""))}}
    children: set[str] = set()
    for group in related.get("groups", []):
        members = group.get("related") or {}
        data[group["name"]] = {
            "hosts": [h["name"] for h in members.get("hosts", [])],
            "children": [c["name"] for c in members.get("children", [])],
            "vars": _variables(group.get("variables", "")),
        }
        children.update(data[group["name"]]["children"])
    data["all"]["children"] = sorted(g for g in data if g not in ("all", *children))
    data["_meta"] = {"hostvars": {h["name"]: _variables(h.get("variables", "")) for h in related.get("hosts", [])}}
    return data


def _project_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [path for path in listed.split("\0") if path and (ROOT / path).is_file()]


def _awx_path(setting: str, folder: str, default: str, project: Path) -> str:
    """AWX's RunJob.build_env for one path: the job's requirements folder, the project's ansible.cfg value, then
    the defaults."""
    cfg = configparser.ConfigParser()
    cfg.read(project / "ansible.cfg")
    paths = default.split(":")
    configured = cfg.get("defaults", setting, fallback=None)
    if configured:
        paths = [configured, *(p for p in paths if p not in configured.split(":"))]
    return ":".join([f"{RUNNER}/{folder}", *paths])


@dataclass
class Job:
    """An ansible-runner job's artifacts, as AWX shows them: status, rc and the events in order."""

    private_data_dir: Path
    ident: str
    status: str
    rc: int
    events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, private_data_dir: Path, ident: str) -> Job:
        artifacts = private_data_dir / "artifacts" / ident
        status = (artifacts / "status").read_text().strip() if (artifacts / "status").is_file() else "missing"
        rc = int((artifacts / "rc").read_text().strip() or -1) if (artifacts / "rc").is_file() else -1
        events = [json.loads(path.read_text()) for path in (artifacts / "job_events").glob("*.json")]
        return cls(private_data_dir, ident, status, rc, sorted(events, key=lambda e: e["counter"]))

    def stdout(self) -> str:
        """The job's output as AWX's job view shows it: every event's stdout, in counter order."""
        return "\n".join(e["stdout"] for e in self.events if e.get("stdout"))

    def of(self, event: str, task: str | None = None) -> list[dict[str, Any]]:
        """The events of a kind (runner_on_ok, ...), those of one task when it is named."""
        return [e for e in self.events if e["event"] == event and (task is None or e["event_data"].get("task") == task)]

    def stats(self) -> dict[str, Any]:
        """playbook_on_stats' counts by host: ok, changed, failures, dark (unreachable), skipped, ..."""
        (stats,) = self.of("playbook_on_stats")
        return stats["event_data"]


def private_data_dir(
    path: Path,
    job_template: dict[str, Any],
    inventory: str,
    ssh_key: Path,
    username: str = "root",
    extra_vars: dict[str, Any] | None = None,
    ident: str = "1",
    limit: str | None = None,
) -> Path:
    """Write the private data directory of a launch of `job_template` on `inventory` into `path` (made afresh);
    `limit` is the launch's (None: the template's own, launch_limit)."""
    shutil.rmtree(path, ignore_errors=True)
    project = path / "project"
    for name in _project_files():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    (path / "inventory").mkdir(parents=True)
    script = path / "inventory" / "hosts"
    data = json.dumps(inventory_script_data(inventory))
    script.write_text(f"#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint({data!r})\n")
    script.chmod(0o700)
    env = path / "env"
    env.mkdir()
    extravars = survey_defaults(job_template) | {
        "awx_job_id": int(ident) if ident.isdigit() else ident,
        "awx_job_template_name": job_template["name"],
        "awx_job_launch_type": "manual",
        "awx_inventory_name": inventory,
    }
    (env / "extravars").write_text(json.dumps(extravars | (extra_vars or {}), indent=2))
    (env / "ssh_key").write_text(ssh_key.read_text())
    (env / "ssh_key").chmod(0o600)
    limit = launch_limit(job_template, limit)
    (env / "cmdline").write_text(shlex.join(["-u", username, *(["-l", limit] if limit else [])]))
    (env / "envvars").write_text(
        json.dumps(
            {
                "ANSIBLE_COLLECTIONS_PATH": _awx_path(
                    "collections_path", "requirements_collections", EE_COLLECTIONS_DEFAULT, project
                ),
                "ANSIBLE_ROLES_PATH": _awx_path("roles_path", "requirements_roles", EE_ROLES_DEFAULT, project),
                "ANSIBLE_SSH_CONTROL_PATH_DIR": f"{RUNNER}/cp",
                "ANSIBLE_RETRY_FILES_ENABLED": "False",
                "JOB_ID": ident,
            },
            indent=2,
        )
    )
    (env / "settings").write_text(
        json.dumps({"job_timeout": job_template.get("timeout") or 0, "suppress_ansible_output": True})
    )
    (path / "cp").mkdir(mode=0o700)
    return path


def _image_user(image: str) -> str:
    user = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Config.User}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return user or "0"


def run(
    path: Path,
    playbook: str,
    image: str = DEFAULT_IMAGE,
    network: str = "none",
    ident: str = "1",
    timeout: float = 1800,
    volumes: list[str] | None = None,
) -> Job:
    """ansible-runner in the image on the private data directory `path`; the job as its artifacts say. `volumes`
    (HOST:CONTAINER) are the folders AWX's "Paths to expose to isolated jobs" would expose to the job."""
    if os.geteuid() == 0:
        # the container runs as the image's user (AWX runs the EE as its own): the directory is handed to it
        uid = int(_image_user(image).split(":")[0])
        for item in [path, *path.rglob("*")]:
            os.lchown(item, uid, 0)
        user = []
    else:
        user = ["--user", f"{os.getuid()}:{os.getgid()}"]
    name = f"dgxspark-ee-job-{uuid.uuid4().hex[:8]}"
    argv = [
        "docker",
        "run",
        "--rm",
        "--name",
        name,
        *user,
        "--network",
        network,
        "--volume",
        f"{path}:{RUNNER}",
        *(item for volume in volumes or [] for item in ("--volume", volume)),
        image,
        "ansible-runner",
        "run",
        RUNNER,
        "--playbook",
        playbook,
        "--ident",
        ident,
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)
        raise
    job = Job.read(path, ident)
    if job.status == "missing":
        raise RuntimeError(f"ansible-runner left no status ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return job


def launch(
    template_name: str,
    inventory: str | None,
    ssh_key: Path,
    path: Path,
    image: str = DEFAULT_IMAGE,
    network: str = "none",
    extra_vars: dict[str, Any] | None = None,
    username: str = "root",
    ident: str = "1",
    timeout: float = 1800,
    limit: str | None = None,
    volumes: list[str] | None = None,
) -> Job:
    """A launch of the template with its survey's defaults: the private data directory, then the run. No inventory
    or limit: the template's own (a fleet cluster's template has both)."""
    job_template = template(template_name)
    inventory = inventory or template_inventory(job_template)
    if inventory != template_inventory(job_template) and not job_template.get("ask_inventory_on_launch"):
        raise ValueError(f"{template_name} does not ask for an inventory on launch: it runs on its own")
    private_data_dir(path, job_template, inventory, ssh_key, username, extra_vars, ident, limit)
    return run(path, job_template["playbook"], image, network, ident, timeout, volumes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("template", help="a job template's name in awx/resources.yml, e.g. 'dgxspark preflight'")
    parser.add_argument(
        "--inventory", help="an inventory's name in awx/resources.yml, e.g. sim3 (default: the template's)"
    )
    parser.add_argument("--limit", help="the launch's limit, when the template asks for one (default: the template's)")
    parser.add_argument("--ssh-key", type=Path, required=True, help="the machine credential's private key")
    parser.add_argument("--user", default="root", help="the machine credential's user name (default root)")
    parser.add_argument("--network", default="none", help="the Docker network that reaches the nodes")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the execution environment (default {DEFAULT_IMAGE})")
    parser.add_argument("--dir", type=Path, default=ROOT / ".build" / "awx-job", help="the private data directory")
    parser.add_argument("-e", "--extra-var", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.extra_var)
    job = launch(
        args.template,
        args.inventory,
        args.ssh_key,
        args.dir.absolute(),
        args.image,
        args.network,
        extra,
        args.user,
        limit=args.limit,
    )
    print(job.stdout())
    print(f"\n{args.template}: {job.status} (rc {job.rc}; {len(job.events)} events in {job.private_data_dir})")
    return job.rc


if __name__ == "__main__":
    sys.exit(main())
