#!/usr/bin/env python
"""Write awx/resources.yml: the AWX resources of dgxspark.cluster in awxkit's import format.

    make awx-resources        # or: .venv/bin/python tools/awx/gen_resources.py [--check]
    .venv/bin/python tools/awx/gen_resources.py --ee-image registry.example.com/dgxspark/ee:0.1.0 \\
        --ee-pull missing --output - | awx import -f yaml      # a site's own EE image (docs/awx.md)

What the file holds (load it with `awx import -f yaml < awx/resources.yml`; docs/awx.md):
  - the organization, the project (this repository) and the execution environment the templates run in (the
    image `make ee-image` builds, never pulled: docs/awx.md says how it gets onto AWX's nodes);
  - one inventory per directory of inventories/ with the same hosts, groups and variables, except that every
    `{{ inventory_dir }}` becomes the checkout's path from playbook_dir (an AWX job's inventory_dir is the
    folder of the inventory script AWX writes, not the checkout) and ansible_ssh_private_key_file is dropped
    (the machine credential gives the key);
  - job templates for the playbooks named in TEMPLATES, each with a survey made from the argument specs of
    what the playbook runs (SURVEY_RULES below), and the machine credential referred to by name;
  - for an inventory that holds a fleet (several clusters, each a group whose variables name its head and
    workers groups: inventories/fleet), the templates of FLEET_TEMPLATES once per cluster, limited to it, with
    the cluster's own machine credential; and the workflow that boots every cluster of the fleet at once;
  - the workflow preflight -> boot -> bench -> promote;
  - schedules (a nightly bench, a recover check every 5 minutes), imported disabled.

The machine credentials themselves are not in the file: they hold secrets. Create them in AWX first.
The surveys are generated, never edited: tests/unit/awx/ checks that the file is this script's output
and, independently, that every question matches its spec.
"""

from __future__ import annotations

import argparse
import difflib
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "awx" / "resources.yml"

ORGANIZATION = "DGX Spark"
PROJECT = "dgxspark.cluster"
SCM_URL = "https://github.com/dgxspark/cluster.git"
SCM_BRANCH = "main"
CREDENTIAL = "dgxspark nodes (SSH)"
DEFAULT_INVENTORY = "spark3"
PREFIX = "dgxspark"
# The execution environment: the image `make ee-image` builds (tools/packaging/ee_image.py: REPOSITORY and
# STABLE_TAG), loaded onto AWX's nodes by hand (docker save/load, docs/awx.md), so never pulled: a pull of this
# name would ask Docker Hub for dgxspark-ee/ee, a name this project does not own.
EE_NAME = "dgxspark.cluster EE"
EE_IMAGE = "dgxspark-ee/ee:latest"
EE_PULL = "never"
EE_PULL_CHOICES = ("always", "missing", "never")
# The variable of a cluster's group in a fleet that names its head and workers groups (every role's and playbook's):
# a dict, {head: <group>, workers: <group>}.
CLUSTER_VAR = "dgxspark_cluster_groups"
CLUSTER_KEYS = ("head", "workers")
# The templates a fleet gets once per cluster, and the one its workflow runs on every cluster at once.
FLEET_TEMPLATES = ("preflight", "boot", "stop", "bench", "recover")
FLEET_WORKFLOW_STEP = "boot"
# What a run of a fleet inventory without its cluster's limit would do (why the limit is fixed), per template.
FLEET_UNLIMITED = {
    "preflight": "its hosts would span two clusters, and the plan refuses that before any node is contacted",
    "boot": "its hosts would span two clusters, and the plan (the boot's preflight) refuses that before any node "
    "is touched",
    "stop": "stop.yml has no plan to refuse it: it would stop every cluster of the inventory",
    "bench": "its hosts would span two clusters, and the benchmark's plan refuses that before any request is sent",
    "recover": "its look at the nodes and its decision would mix two clusters (an interrupted boot's undo on any "
    "node, an attempt recorded on one head) before the boot's plan refused the run",
}
# The schedules: (name, template, rrule, description). AWX takes an rrule with a DTSTART in UTC or with a time
# zone, one RRULE with an INTERVAL; a schedule runs its template with the survey's defaults. Imported disabled:
# an import starts nothing on a cluster; a team turns each on when it wants it (docs/awx.md).
SCHEDULES = (
    (
        "nightly bench",
        "bench",
        "DTSTART:20260101T020000Z RRULE:FREQ=DAILY;INTERVAL=1",
        "Every night at 02:00 UTC: the benchmark of the serving cluster (results in the job's output).",
    ),
    (
        "recover check",
        "recover",
        "DTSTART:20260101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=5",
        "Every 5 minutes: recover.yml; a serving cluster, or a run inside the backoff, changes nothing; a memory "
        "trip or the attempts spent fails the job (what a notification should watch).",
    ),
)

BOOT_SPEC = ("roles/boot/meta/argument_specs.yml", "main")
PLAYBOOK_SPEC = "awx/playbook_argument_specs.yml"
# name -> (playbook, where its argument specs are, description). A spec is (file, entry point); a playbook
# that imports another (rollback.yml imports boot.yml) has both, its own first.
TEMPLATES: dict[str, tuple[str, tuple[tuple[str, str], ...], str]] = {
    "preflight": (
        "playbooks/preflight.yml",
        (BOOT_SPEC,),
        "Read-only: validate the profile, plan every rank, check every node against the plan on one report. "
        "Run it before every change.",
    ),
    "boot": (
        "playbooks/boot.yml",
        (BOOT_SPEC,),
        "Boot the serving cluster from its profile: preflight, converge, workers, head, smoke; undo on any failure.",
    ),
    "stop": (
        "playbooks/stop.yml",
        ((PLAYBOOK_SPEC, "stop"),),
        "Stop every rank the collection started and leave the memory guard idle.",
    ),
    "bench": (
        "playbooks/bench.yml",
        ((PLAYBOOK_SPEC, "bench"),),
        "Benchmark the serving cluster: gate, warm-up, concurrency sweep, needle; results in the inventory's .bench.",
    ),
    "compare": (
        "playbooks/compare.yml",
        ((PLAYBOOK_SPEC, "compare"),),
        "Compare the newest benchmark run with the one before it; fails on a regression.",
    ),
    "releases": (
        "playbooks/releases.yml",
        ((PLAYBOOK_SPEC, "releases"),),
        "Read-only: list the cluster's releases kept on the head, or show one whole (profile as booted, plan, "
        "images, history).",
    ),
    "rollback": (
        "playbooks/rollback.yml",
        ((PLAYBOOK_SPEC, "rollback"), BOOT_SPEC),
        "Roll back to the previous promoted release, or a named one, through the boot's own preflight; the boot's "
        "undo on any failure.",
    ),
    "images": (
        "playbooks/images.yml",
        ((PLAYBOOK_SPEC, "images"),),
        "Put a release's image (the promoted one's by default) on the nodes that lack it, streamed from the head over "
        "SSH and its ID checked on arrival; never from a registry unless asked. Run it when a preflight names it.",
    ),
    "weights": (
        "playbooks/weights.yml",
        ((PLAYBOOK_SPEC, "weights"),),
        "Put the profile's weights on every node that lacks them or differs, from the head (or a named node) over the "
        "fabric: planned first, resumable, each file's SHA-256 checked on arrival; staged beside a running rank.",
    ),
    "recover": (
        "playbooks/recover.yml",
        ((PLAYBOOK_SPEC, "recover"), BOOT_SPEC),
        "After a guard trip or a rank exit: state the cause from every node, and boot the promoted release again "
        "when it is not memory, a bounded number of times with backoff (fit for a schedule).",
    ),
    "status": (
        "playbooks/status.yml",
        ((PLAYBOOK_SPEC, "status"),),
        "Read-only: the cluster's status on one screen - the release that serves, every rank, the API, every memory "
        "guard, the GPU clocks, the weights' disk, the last benchmark; fails when anything is degraded (fit for a "
        "schedule).",
    ),
    "window": (
        "playbooks/window.yml",
        ((PLAYBOOK_SPEC, "window"), BOOT_SPEC),
        "The multimodal window: stop serving, run one job (an image and its command) with the memory guard watching "
        "it, then boot the promoted release again and verify it serves; a failed job still gets serving restored.",
    ),
    "promote": (
        "playbooks/promote.yml",
        ((PLAYBOOK_SPEC, "promote"), (PLAYBOOK_SPEC, "bench"), BOOT_SPEC),
        "Boot a candidate profile as a candidate release, benchmark it, compare its run with the promoted "
        "release's (Welch, 3 %): promote it on a pass, else roll back to the promoted release.",
    ),
}
# The workflow: each node runs on the success of the one before it.
WORKFLOW = ("preflight", "boot", "bench", "promote")

SURVEY_RULES = """\
Survey questions are made from the argument specs of what each playbook runs (its own first, then
  those of a playbook it imports):
  bool -> multiplechoice "true"/"false"; int -> integer; float -> float; str or path -> text
  (multiplechoice when the spec has choices; password when no_log); a list of str or int -> text,
  comma-separated (Ansible's list type splits a string on commas), multiselect when it has choices.
  The spec's default is the question's default, and the question is not required: the form starts
  filled in, and a launch that does not answer it (the API's, the CLI's, a schedule's) gets the
  default (AWX refuses such a launch, and a schedule's save, when the question is required). A
  question whose default is empty has none (left blank, the playbook's default applies). Only a
  required option without a default (promote.yml's dgxspark_candidate, window.yml's image and
  command) is a required question, with no default; its description says what to pass. Options
  without a literal default (computed from the inventory or the plan: a Jinja default or none) and
  dict-valued options have no question: give them as extra variables (every template prompts for
  them). Nor has a variable the playbook sets itself (set_fact: rollback.yml sets the boot's
  boot_release, boot_profile_content, boot_replace and boot_shape): an extra variable would take
  its place. A fleet's template for one cluster has no question for a variable that
  the cluster's group sets: AWX gives every job its survey's defaults (for what a launch leaves unanswered), which
  would replace the cluster's own (the cluster's groups, dgxspark_cluster_groups, are a dict: no
  template asks for them)."""


# What a launch must pass for a required question (one without a safe default): AWX refuses a launch without it
# ("'<variable>' value missing", variables_needed_to_start), so the question itself says what to pass.
REQUIRED_HINTS = {
    "dgxspark_candidate": "Required, no default: pass the candidate profile's path in the job's checkout of the "
    'project, e.g. --extra_vars \'{"dgxspark_candidate": "/runner/project/profiles/next.json"}\'.',
    "window_image": "Required, no default: pass the job's image, e.g. --extra_vars "
    '\'{"window_image": "nvcr.io/nvidia/pytorch:25.01-py3", "window_command": "python,-c,print(1)"}\'.',
    "window_command": "Required, no default: pass the job's command, comma-separated, e.g. --extra_vars "
    '\'{"window_command": "python,-c,print(1)"}\'.',
}


def _org_key() -> dict[str, Any]:
    return {"name": ORGANIZATION, "type": "organization"}


def _key(kind: str, name: str) -> dict[str, Any]:
    return {"organization": _org_key(), "name": name, "type": kind}


def _credential_key(name: str = CREDENTIAL) -> dict[str, Any]:
    return {
        "organization": _org_key(),
        "name": name,
        "credential_type": {"name": "Machine", "kind": "ssh", "type": "credential_type"},
        "type": "credential",
    }


def cluster_credential(cluster: str) -> str:
    """The name of a fleet cluster's machine credential (made by hand in AWX, like CREDENTIAL)."""
    return f"{PREFIX} {cluster} machine"


def _ee_key() -> dict[str, Any]:
    return {"name": EE_NAME, "type": "execution_environment"}


class _Dumper(yaml.SafeDumper):
    """No anchors or aliases: every natural key is written out where it is used."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # lists indented under their key, as yamllint (ansible-lint) wants them
        super().increase_indent(flow, False)


def _dump_vars(data: dict[str, Any]) -> str:
    return "---\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=False) if data else ""


def load_spec(path: str, entry: str) -> dict[str, dict[str, Any]]:
    spec = yaml.safe_load((ROOT / path).read_text())
    return spec["argument_specs"][entry]["options"]


def set_by_playbook(playbook: str) -> set[str]:
    """The variables a playbook's tasks set with set_fact, those of the playbooks it imports included (promote.yml
    imports rollback.yml): an extra variable would take their place."""
    names: set[str] = set()

    def walk(tasks: list[dict[str, Any]] | None) -> None:
        for task in tasks or []:
            for section in ("block", "rescue", "always"):
                walk(task.get(section))
            for action in ("ansible.builtin.set_fact", "set_fact"):
                if isinstance(task.get(action), dict):
                    names.update(name for name in task[action] if name != "cacheable")

    for play in yaml.safe_load((ROOT / playbook).read_text()) or []:
        imported = play.get("import_playbook") or play.get("ansible.builtin.import_playbook")
        if imported:
            names |= set_by_playbook(str(Path(playbook).parent / imported))
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            walk(play.get(section))
    return names


def template_options(template: str) -> dict[str, dict[str, Any]]:
    """The options a template's survey is made from: its specs' in order, less what its playbook sets."""
    playbook, specs, _description = TEMPLATES[template]
    options: dict[str, dict[str, Any]] = {}
    for spec_file, entry in specs:
        for name, option in load_spec(spec_file, entry).items():
            if name in options and options[name].get("default") != option.get("default"):
                raise ValueError(f"{template}: {name} has another default in {spec_file} ({entry}) than before it")
            options.setdefault(name, option)
    for name in set_by_playbook(playbook):
        options.pop(name, None)
    return options


def _literal(default: Any) -> bool:
    return not (isinstance(default, str) and "{{" in default)


def question(name: str, option: dict[str, Any]) -> dict[str, Any] | None:
    """The survey question for one argument-spec option, or None when it has none (SURVEY_RULES)."""
    kind = option.get("type", "str")
    elements = option.get("elements", "str")
    choices = option.get("choices")
    default = option.get("default")
    given = option.get("required") and "default" not in option  # a required option: a question with no default
    if not given and ("default" not in option or not _literal(default)):
        return None
    if kind == "dict" or (kind == "list" and elements == "dict"):
        return None
    q: dict[str, Any] = {
        "question_name": name,
        "question_description": option["description"]
        if isinstance(option["description"], str)
        else " ".join(option["description"]),
        "variable": name,
        "required": True,
    }
    if kind == "bool":
        q.update(type="multiplechoice", choices=["true", "false"], default="true" if default else "false")
    elif kind == "int":
        q.update(type="integer", default=default)
    elif kind == "float":
        q.update(type="float", default=default)
    elif kind in ("str", "path"):
        if choices:
            q.update(type="multiplechoice", choices=[str(c) for c in choices], default=str(default))
        else:
            q.update(type="password" if option.get("no_log") else "text", default=default)
    elif kind == "list" and elements in ("str", "int"):
        if choices:
            q.update(type="multiselect", choices=[str(c) for c in choices], default="\n".join(map(str, default or [])))
        else:
            q.update(type="text", default=",".join(map(str, default or [])))
            q["question_description"] += " Comma-separated."
    else:
        raise ValueError(f"{name}: no survey type for type {kind!r} (elements {elements!r}); extend SURVEY_RULES")
    if q.get("default") in ("", None):
        q.pop("default", None)
    # Required only where no default is safe (a required option without one): AWX's launch endpoint (the API, the
    # CLI) and a schedule's save refuse a required question that is not answered, default or not, while a
    # question's default is what AWX gives a job that does not answer it. So a question with a default is not
    # required: the form still opens filled in, and a launch without extra_vars runs with the defaults.
    q["required"] = bool(given)
    if given:
        q["question_description"] += " " + REQUIRED_HINTS.get(
            name, f"Required, no default: pass it at launch, e.g. --extra_vars '{{\"{name}\": ...}}'."
        )
    return q


def survey(
    template: str, spec: dict[str, dict[str, Any]], name: str = "", without: frozenset[str] = frozenset()
) -> dict[str, Any]:
    questions = [q for option, body in spec.items() if option not in without and (q := question(option, body))]
    dropped = sorted(option for option, body in spec.items() if option in without and question(option, body))
    description = "Made from the argument specs of what the playbook runs (tools/awx/gen_resources.py)."
    if dropped:
        description += f" No question for what the cluster's group sets: {', '.join(dropped)}."
    return {"name": name or f"{PREFIX} {template}", "description": description, "spec": questions}


# ------------------------------------------------------------------------------------------------ inventories
_AT_INVENTORY_DIR = re.compile(r"\{\{\s*inventory_dir\s*\}\}(/[^{}]*)?")
# What the machine credential gives a job instead.
CREDENTIAL_VARS = ("ansible_ssh_private_key_file", "ansible_private_key_file")


def checkout_path(value: Any, name: str) -> Any:
    """A variable of inventories/<name> as an AWX job needs it: every `{{ inventory_dir }}/<path>` (in a string, a
    list or a dict) becomes the same file's path in the job's checkout, from playbook_dir.

    An AWX job has an inventory_dir, but not the repository's: it is the folder of the inventory script that AWX
    writes into the job's private data directory (inventory/hosts), for a database inventory as for any other. Its
    playbook_dir is the project's playbooks/ (every template's playbook is there), so the checkout is
    `{{ playbook_dir }}/..`. The path is normalised (inventories/fleet/../sim3 is inventories/sim3). A variable that
    uses inventory_dir otherwise (in an expression, after other text), or whose path leaves the checkout, is
    refused: exported as it is, it would name a file that no AWX job has."""
    if isinstance(value, dict):
        return {key: checkout_path(item, name) for key, item in value.items()}
    if isinstance(value, list):
        return [checkout_path(item, name) for item in value]
    if not isinstance(value, str) or "inventory_dir" not in value:
        return value
    match = _AT_INVENTORY_DIR.fullmatch(value)
    if not match:
        raise ValueError(
            f"inventories/{name}: {value!r} uses inventory_dir other than as '{{{{ inventory_dir }}}}/<path>', "
            "which an AWX job cannot have: write it so, or give the path another way"
        )
    relative = posixpath.normpath(posixpath.join("inventories", name, (match[1] or "").lstrip("/")))
    if relative == ".." or relative.startswith("../"):
        raise ValueError(f"inventories/{name}: {value!r} leaves the checkout, and an AWX job has only the project")
    return f"{{{{ playbook_dir }}}}/../{relative}"


def _exported(variables: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: checkout_path(value, name) for key, value in variables.items() if key not in CREDENTIAL_VARS}


def load_inventory(name: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """inventories/<name> as the repository has it: host -> its variables (hosts.yml's, then host_vars/<host>.yml),
    group -> {hosts, children, vars} (hosts.yml's group vars, then group_vars/<group>.yml, for any group)."""
    source = ROOT / "inventories" / name
    tree = yaml.safe_load((source / "hosts.yml").read_text())
    hosts: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}

    def walk(group: str, body: dict[str, Any] | None) -> None:
        body = body or {}
        entry = groups.setdefault(group, {"hosts": [], "children": [], "vars": {}})
        entry["vars"].update(body.get("vars") or {})
        for host, host_vars in (body.get("hosts") or {}).items():
            hosts.setdefault(host, {}).update(host_vars or {})
            if host not in entry["hosts"]:
                entry["hosts"].append(host)
        for child, child_body in (body.get("children") or {}).items():
            if child not in entry["children"]:
                entry["children"].append(child)
            walk(child, child_body)

    for group, body in tree.items():
        walk(group, body)
    for kind, target in (("group_vars", groups), ("host_vars", hosts)):
        for vars_file in sorted((source / kind).glob("*.yml")):
            variables = yaml.safe_load(vars_file.read_text()) or {}
            if kind == "group_vars":
                groups.setdefault(vars_file.stem, {"hosts": [], "children": [], "vars": {}})["vars"].update(variables)
            else:
                target.setdefault(vars_file.stem, {}).update(variables)
    return hosts, groups


@dataclass(frozen=True)
class Cluster:
    """One cluster of a fleet inventory: a group whose own variables name its head and workers groups."""

    inventory: str
    name: str
    head_group: str
    workers_group: str
    sets: frozenset[str]  # the variables the cluster's group sets: its templates ask none of them

    def template(self, template: str) -> str:
        return f"{PREFIX} {template} ({self.inventory} {self.name})"

    @property
    def credential(self) -> str:
        return cluster_credential(self.name)


def clusters(name: str) -> list[Cluster]:
    """The clusters of inventories/<name> when it holds a fleet (inventories/fleet), else none. A cluster is a group
    whose variables name both its head and its workers group (CLUSTER_VAR), groups under it; no host is in two
    clusters, and every host with a rank is in one. Anything else fails here, before a template is made for it."""
    hosts, groups = load_inventory(name)

    def under(group: str) -> set[str]:
        found = {group}
        for child in groups[group]["children"]:
            found |= under(child)
        return found

    found: list[Cluster] = []
    members: dict[str, str] = {}
    for group, body in groups.items():
        if CLUSTER_VAR not in body["vars"]:
            continue
        given = body["vars"][CLUSTER_VAR]
        named = [given.get(key) for key in CLUSTER_KEYS] if isinstance(given, dict) else [None, None]
        if not all(named) or not set(named) <= under(group) - {group}:
            raise ValueError(
                f"inventories/{name}: group {group} sets {CLUSTER_VAR} to {given!r}: a cluster names both its head "
                "and workers groups (its keys head and workers), groups under its own"
            )
        for host in sorted({h for g in under(group) for h in groups[g]["hosts"]}):
            if host in members:
                raise ValueError(f"inventories/{name}: host {host} is in the clusters {members[host]} and {group}")
            members[host] = group
        found.append(Cluster(name, group, named[0], named[1], frozenset(body["vars"])))
    strays = sorted(h for h, variables in hosts.items() if "dgxspark_rank" in variables and h not in members)
    if found and strays:
        raise ValueError(f"inventories/{name}: hosts {', '.join(strays)} have a rank but are in no cluster")
    return found


def inventory_names() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "inventories").glob("*/hosts.yml"))


def fleet() -> list[Cluster]:
    """Every cluster of every fleet inventory, in inventory order, then the inventory's own order."""
    return [cluster for name in inventory_names() for cluster in clusters(name)]


def inventory(name: str) -> dict[str, Any]:
    """One AWX inventory from inventories/<name>: hosts, groups and variables as the repository has them, but for
    the paths from inventory_dir (checkout_path) and the key file (the machine credential's)."""
    hosts, groups = load_inventory(name)
    inv_key = _key("inventory", name)
    members = clusters(name)
    if members:
        description = (
            f"The fleet of inventories/{name}: the clusters {', '.join(c.name for c in members)} side by side, each a "
            "group with its own head and workers groups, profile and guard key. A run acts on one cluster: the "
            f"templates '{members[0].template('<playbook>')}' and the others are limited to theirs."
        )
    else:
        description = f"The cluster of inventories/{name} (hosts, groups and variables as in the repository)."

    def host_key(host: str) -> dict[str, Any]:
        return {"name": host, "inventory": inv_key, "type": "host"}

    def group_key(group: str) -> dict[str, Any]:
        return {"name": group, "inventory": inv_key, "type": "group"}

    return {
        "name": name,
        "description": description,
        "organization": _org_key(),
        "kind": "",
        "variables": "",
        "natural_key": inv_key,
        "related": {
            "hosts": [
                {
                    "name": host,
                    "description": "",
                    "enabled": True,
                    "variables": _dump_vars(_exported(host_vars, name)),
                    "inventory": inv_key,
                    "natural_key": host_key(host),
                }
                for host, host_vars in hosts.items()
            ],
            "groups": [
                {
                    "name": group,
                    "description": "",
                    "variables": _dump_vars(_exported(body["vars"], name)),
                    "inventory": inv_key,
                    "natural_key": group_key(group),
                    "related": {
                        "hosts": [host_key(h) for h in body["hosts"]],
                        "children": [group_key(c) for c in body["children"]],
                    },
                }
                for group, body in groups.items()
            ],
        },
    }


# ------------------------------------------------------------------------------------------------ templates
def job_template(template: str, cluster: Cluster | None = None) -> dict[str, Any]:
    """A job template of TEMPLATES; with a cluster, that cluster's own: its inventory, limit and machine credential
    fixed, no question for what its group sets."""
    playbook, _specs, description = TEMPLATES[template]
    name = cluster.template(template) if cluster else f"{PREFIX} {template}"
    inventory_name = cluster.inventory if cluster else DEFAULT_INVENTORY
    if cluster:
        description += (
            f" Cluster {cluster.name} of the inventory {cluster.inventory} (a fleet) only: its limit ({cluster.name}), "
            f"inventory and machine credential ({cluster.credential}) are the template's, not asked at launch. "
            f"Without that limit {FLEET_UNLIMITED[template]}."
        )
    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "job_type": "run",
        "project": _key("project", PROJECT),
        "playbook": playbook,
        "inventory": _key("inventory", inventory_name),
    }
    if cluster:
        fields["limit"] = cluster.name
    fields.update(
        {
            "execution_environment": _ee_key(),
            "ask_inventory_on_launch": not cluster,
            "ask_credential_on_launch": not cluster,
            "ask_limit_on_launch": not cluster,
            "ask_variables_on_launch": True,
            "ask_verbosity_on_launch": True,
            "extra_vars": "",
            "forks": 0,
            "verbosity": 0,
            "timeout": 0,
            "become_enabled": False,
            "diff_mode": False,
            "allow_simultaneous": False,
            "survey_enabled": True,
            "natural_key": _key("job_template", name),
            "related": {
                "credentials": [_credential_key(cluster.credential if cluster else CREDENTIAL)],
                "survey_spec": survey(
                    template, template_options(template), name, cluster.sets if cluster else frozenset()
                ),
            },
        }
    )
    return fields


def _node_key(workflow_key: dict[str, Any], identifier: str) -> dict[str, Any]:
    return {"workflow_job_template": workflow_key, "identifier": identifier, "type": "workflow_job_template_node"}


def workflow() -> dict[str, Any]:
    name = f"{PREFIX} preflight, boot, bench"
    wf_key = _key("workflow_job_template", name)
    nodes = []
    for index, step in enumerate(WORKFLOW):
        following = WORKFLOW[index + 1 : index + 2]
        nodes.append(
            {
                "identifier": step,
                "unified_job_template": _key("job_template", f"{PREFIX} {step}"),
                "workflow_job_template": wf_key,
                "all_parents_must_converge": False,
                "natural_key": _node_key(wf_key, step),
                "related": {
                    "success_nodes": [_node_key(wf_key, s) for s in following],
                    "failure_nodes": [],
                    "always_nodes": [],
                    "credentials": [],
                },
            }
        )
    return {
        "name": name,
        "description": "Preflight (read-only), then boot, then bench, then promote (it asks for the candidate "
        "profile), each on the success of the one before. The name predates promote's node and is kept for imports.",
        "organization": _org_key(),
        "inventory": _key("inventory", DEFAULT_INVENTORY),
        "ask_inventory_on_launch": True,
        "ask_limit_on_launch": True,
        "ask_variables_on_launch": True,
        "extra_vars": "",
        "allow_simultaneous": False,
        "survey_enabled": False,
        "natural_key": wf_key,
        "related": {"workflow_nodes": nodes},
    }


def fleet_workflow(name: str, members: list[Cluster]) -> dict[str, Any]:
    """The fleet's clusters booted at once: a node per cluster, none after another (AWX starts every node without a
    parent together), each running its cluster's boot template."""
    title = f"{PREFIX} {name} {FLEET_WORKFLOW_STEP}"
    wf_key = _key("workflow_job_template", title)
    nodes = [
        {
            "identifier": cluster.name,
            "unified_job_template": _key("job_template", cluster.template(FLEET_WORKFLOW_STEP)),
            "workflow_job_template": wf_key,
            "inventory": _key("inventory", name),
            "limit": cluster.name,
            "all_parents_must_converge": False,
            "natural_key": _node_key(wf_key, cluster.name),
            "related": {"success_nodes": [], "failure_nodes": [], "always_nodes": [], "credentials": []},
        }
        for cluster in members
    ]
    return {
        "name": title,
        "description": (
            f"Boots every cluster of the inventory {name} (a fleet) at once ({', '.join(c.name for c in members)}): "
            "a node per cluster and no link between them, so AWX starts them together; each runs its cluster's "
            f"{FLEET_WORKFLOW_STEP} template with that template's limit, inventory and machine credential (the node "
            "repeats the limit and the inventory, and has no credential: AWX refuses one for a template that "
            "does not ask for credentials or already has it). One cluster's failure fails its node only. Nothing "
            "is asked at launch: a workflow's extra variables and limit go to every node, across the clusters."
        ),
        "organization": _org_key(),
        "inventory": _key("inventory", name),
        "ask_inventory_on_launch": False,
        "ask_limit_on_launch": False,
        "ask_variables_on_launch": False,
        "extra_vars": "",
        "allow_simultaneous": False,
        "survey_enabled": False,
        "natural_key": wf_key,
        "related": {"workflow_nodes": nodes},
    }


def schedules(job_templates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SCHEDULES on the single-cluster templates, and on every fleet cluster's own.

    AWX checks a schedule, when it is saved (created, or replaced by a re-import's PUT), against its template's
    required survey questions: each must be answered in the schedule's extra_data. A question is required only
    where it has no default (question()), and no schedule here may be on such a template: refused here, since no
    answer in extra_data would be right for every cluster. So a schedule carries no extra_data: each of its jobs
    gets the survey's defaults as they are then, not a copy frozen at import."""
    required = {
        t["name"]: [q["variable"] for q in t["related"]["survey_spec"]["spec"] if q["required"]] for t in job_templates
    }
    found = []
    targets: list[tuple[str, str]] = [(f"{PREFIX} {{}}", "")]
    targets += [(cluster.template("{}"), f" ({cluster.inventory} {cluster.name})") for cluster in fleet()]
    for pattern, suffix in targets:
        for name, template, rrule, description in SCHEDULES:
            template_key = _key("job_template", pattern.format(template))
            title = f"{PREFIX} {name}{suffix}"
            if required.get(template_key["name"]):
                raise ValueError(
                    f"schedule {title!r}: its template {template_key['name']!r} has required questions "
                    f"{required[template_key['name']]}, which AWX refuses a schedule without"
                )
            found.append(
                {
                    "name": title,
                    "description": f"{description} Imported disabled: turn it on in AWX.",
                    "unified_job_template": template_key,
                    "rrule": rrule,
                    "enabled": False,
                    "natural_key": {"unified_job_template": template_key, "name": title, "type": "schedule"},
                }
            )
    return found


def execution_environment(image: str = EE_IMAGE, pull: str = EE_PULL) -> dict[str, Any]:
    where = (
        "never pulled: it must be on every node that runs jobs, loaded there by hand (docker save, then docker or "
        "podman load; docs/awx.md)"
        if pull == "never"
        else f"pulled from its registry ({pull})"
    )
    return {
        "name": EE_NAME,
        "description": f"dgxspark.cluster's execution environment (execution-environment.yml, make ee-image), {where}.",
        "organization": _org_key(),
        "image": image,
        "pull": pull,
        "natural_key": _ee_key(),
    }


def project(scm_url: str = SCM_URL, scm_branch: str = SCM_BRANCH, local_path: str | None = None) -> dict[str, Any]:
    """The project: this repository from git (scm_url, scm_branch; updated on launch), or, with local_path, a manual
    project, a folder of the checkout under AWX's PROJECTS_ROOT (/var/lib/awx/projects/<local_path>) that AWX never
    syncs. AWX takes a template's playbook only from a project that has synced (or, manual, whose folder holds it):
    "Playbook not found for project" otherwise, for every template."""
    fields: dict[str, Any] = {
        "name": PROJECT,
        "organization": _org_key(),
        "natural_key": _key("project", PROJECT),
    }
    if local_path is not None:
        if not local_path or "/" in local_path or local_path.startswith("."):
            raise ValueError(f"--local-path {local_path!r}: a folder's name directly under AWX's PROJECTS_ROOT")
        fields.update(
            description="The dgxspark.cluster repository, a manual project: a checkout put by hand in "
            f"PROJECTS_ROOT/{local_path} on every AWX node (never synced; update it there).",
            scm_type="",
            local_path=local_path,
        )
    else:
        fields.update(
            description=f"The dgxspark.cluster repository: its playbooks, roles and inventories ({scm_url}, "
            f"branch {scm_branch}).",
            scm_type="git",
            scm_url=scm_url,
            scm_branch=scm_branch,
            scm_clean=True,
            scm_update_on_launch=True,
        )
    fields["allow_override"] = False
    return {key: fields[key] for key in PROJECT_FIELDS if key in fields}


PROJECT_FIELDS = (
    "name",
    "description",
    "organization",
    "scm_type",
    "scm_url",
    "scm_branch",
    "scm_clean",
    "scm_update_on_launch",
    "local_path",
    "allow_override",
    "natural_key",
)


def resources(
    ee_image: str = EE_IMAGE,
    ee_pull: str = EE_PULL,
    scm_url: str = SCM_URL,
    scm_branch: str = SCM_BRANCH,
    local_path: str | None = None,
) -> dict[str, Any]:
    names = inventory_names()
    fleets = {name: members for name in names if (members := clusters(name))}
    job_templates = [job_template(t) for t in TEMPLATES]
    job_templates += [
        job_template(t, cluster) for members in fleets.values() for cluster in members for t in FLEET_TEMPLATES
    ]
    return {
        "organizations": [
            {
                "name": ORGANIZATION,
                "description": "Teams that run dgxspark.cluster's serving clusters.",
                "max_hosts": 0,
                "natural_key": _org_key(),
            }
        ],
        "projects": [project(scm_url, scm_branch, local_path)],
        "execution_environments": [execution_environment(ee_image, ee_pull)],
        "inventory": [inventory(name) for name in names],
        "job_templates": job_templates,
        "workflow_job_templates": [workflow()] + [fleet_workflow(name, members) for name, members in fleets.items()],
        "schedules": schedules(job_templates),
    }


def render(
    ee_image: str = EE_IMAGE,
    ee_pull: str = EE_PULL,
    scm_url: str = SCM_URL,
    scm_branch: str = SCM_BRANCH,
    local_path: str | None = None,
) -> str:
    credentials = [CREDENTIAL, *(cluster.credential for cluster in fleet())]
    header = [
        "# GENERATED by tools/awx/gen_resources.py (make awx-resources) - do not edit by hand.",
        "# dgxspark.cluster's AWX resources in awxkit's import format (docs/awx.md):",
        "#   awx import -f yaml < awx/resources.yml",
        f"# The machine credentials the templates name must exist first, type Machine, organization {ORGANIZATION!r}:",
        *(f"#   {name!r}" for name in credentials),
        f"# The templates run in the execution environment {EE_NAME!r} ({ee_image}, pull {ee_pull}); the schedules",
        "# are imported disabled (and every import disables them again: docs/awx.md).",
        f"# The project: the manual folder {local_path!r} under AWX's PROJECTS_ROOT"
        if local_path is not None
        else f"# The project: {scm_url} (branch {scm_branch}); AWX must reach it (or: --scm-url, --local-path).",
        "#",
        *(f"# {line}" if line else "#" for line in SURVEY_RULES.splitlines()),
    ]
    body = yaml.dump(
        resources(ee_image, ee_pull, scm_url, scm_branch, local_path),
        Dumper=_Dumper,
        sort_keys=False,
        width=120,
        allow_unicode=True,
    )
    return "\n".join(header) + "\n---\n" + body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if awx/resources.yml is not up to date")
    parser.add_argument("--ee-image", default=EE_IMAGE, help=f"the execution environment's image (default {EE_IMAGE})")
    parser.add_argument("--ee-pull", default=EE_PULL, choices=EE_PULL_CHOICES, help=f"its pull policy ({EE_PULL})")
    parser.add_argument(
        "--scm-url", default=SCM_URL, help=f"the project's git URL, one AWX reaches (default {SCM_URL})"
    )
    parser.add_argument("--scm-branch", default=SCM_BRANCH, help=f"the project's branch (default {SCM_BRANCH})")
    parser.add_argument(
        "--local-path",
        metavar="FOLDER",
        help="a manual project instead of git: the checkout's folder under AWX's PROJECTS_ROOT (/var/lib/awx/projects)",
    )
    parser.add_argument(
        "--output", default=str(OUTPUT), help="where to write (- for stdout; default awx/resources.yml)"
    )
    args = parser.parse_args()
    if args.local_path is not None and (args.scm_url, args.scm_branch) != (SCM_URL, SCM_BRANCH):
        parser.error("--local-path makes a manual project, which has no --scm-url or --scm-branch")
    site = (args.ee_image, args.ee_pull, args.scm_url, args.scm_branch, args.local_path)
    custom = site != (EE_IMAGE, EE_PULL, SCM_URL, SCM_BRANCH, None)
    if custom and args.output == str(OUTPUT):
        parser.error(
            "a site's own image or project goes to --output FILE or -, not into awx/resources.yml (the repository's)"
        )
    try:
        text = render(*site)
    except ValueError as error:
        parser.error(str(error))
    if args.check:
        if custom:
            parser.error("--check compares the repository's file, made with the default image and project")
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(OUTPUT), "generated")
            sys.stdout.writelines(diff)
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run make awx-resources", file=sys.stderr)
            return 1
        return 0
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    Path(args.output).write_text(text)
    print(f"wrote {args.output if args.output != str(OUTPUT) else OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
