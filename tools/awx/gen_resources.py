#!/usr/bin/env python
"""Write awx/resources.yml: the AWX resources of dgxspark.cluster in awxkit's import format.

    make awx-resources        # or: .venv/bin/python tools/awx/gen_resources.py [--check]

What the file holds (load it with `awx import -f yaml < awx/resources.yml`, README "AWX"):
  - the organization and the project (this repository);
  - one inventory per cluster in inventories/ with the same hosts, groups and variables, except two
    variables that point into the checkout: dgxspark_profile (AWX gives the playbooks no inventory_dir
    in the repository, so the path starts from playbook_dir) and ansible_ssh_private_key_file (the
    machine credential gives the key);
  - job templates for the playbooks named in TEMPLATES, each with a survey made from the argument specs
    of what the playbook runs (SURVEY_RULES below), and the machine credential referred to by name;
  - the workflow preflight -> boot -> bench.

The machine credential itself is not in the file: it holds a secret. Create it in AWX first (README).
The surveys are generated, never edited: tests/unit/awx/ checks that the file is this script's output
and, independently, that every question matches its spec.
"""

from __future__ import annotations

import argparse
import difflib
import sys
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
    "recover": (
        "playbooks/recover.yml",
        ((PLAYBOOK_SPEC, "recover"), BOOT_SPEC),
        "After a guard trip or a rank exit: state the cause from every node, and boot the promoted release again "
        "when it is not memory, a bounded number of times with backoff (fit for a schedule).",
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
  The spec's default is the question's default and the question is required (the form starts filled
  in); a question whose default is empty is optional, with no default (left blank, the playbook's
  default applies); a required option without a default (promote.yml's dgxspark_candidate) is a
  required question with no default. Options without a literal default (computed from the inventory or the plan: a
  Jinja default or none) and dict-valued options have no question: give them as extra variables
  (every template prompts for them). Nor has a variable the playbook sets itself (set_fact: rollback.yml
  sets the boot's boot_release, boot_profile_content, boot_replace and boot_shape): an extra variable
  would take its place."""


def _org_key() -> dict[str, Any]:
    return {"name": ORGANIZATION, "type": "organization"}


def _key(kind: str, name: str) -> dict[str, Any]:
    return {"organization": _org_key(), "name": name, "type": kind}


def _credential_key() -> dict[str, Any]:
    return {
        "organization": _org_key(),
        "name": CREDENTIAL,
        "credential_type": {"name": "Machine", "kind": "ssh", "type": "credential_type"},
        "type": "credential",
    }


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
        q["required"] = bool(given)
        q.pop("default", None)
    return q


def survey(template: str, spec: dict[str, dict[str, Any]]) -> dict[str, Any]:
    questions = [q for name, option in spec.items() if (q := question(name, option)) is not None]
    return {
        "name": f"{PREFIX} {template}",
        "description": "Made from the argument specs of what the playbook runs (tools/awx/gen_resources.py).",
        "spec": questions,
    }


def inventory(name: str) -> dict[str, Any]:
    """One AWX inventory from inventories/<name>: hosts, groups and variables as the repository has them."""
    source = ROOT / "inventories" / name
    tree = yaml.safe_load((source / "hosts.yml").read_text())
    inv_key = _key("inventory", name)
    hosts: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}

    def walk(group: str, body: dict[str, Any]) -> None:
        body = body or {}
        entry = groups.setdefault(group, {"hosts": [], "children": [], "vars": dict(body.get("vars") or {})})
        for host, host_vars in (body.get("hosts") or {}).items():
            hosts[host] = dict(host_vars or {})
            entry["hosts"].append(host)
        for child, child_body in (body.get("children") or {}).items():
            entry["children"].append(child)
            walk(child, child_body)

    for group, body in tree.items():
        walk(group, body)
    for vars_file in sorted((source / "group_vars").glob("*.yml")):
        group = vars_file.stem
        group_vars = yaml.safe_load(vars_file.read_text()) or {}
        if "dgxspark_profile" in group_vars:
            group_vars["dgxspark_profile"] = f"{{{{ playbook_dir }}}}/../inventories/{name}/serving-profile.json"
        group_vars.pop("ansible_ssh_private_key_file", None)
        groups.setdefault(group, {"hosts": [], "children": [], "vars": {}})["vars"].update(group_vars)

    def host_key(host: str) -> dict[str, Any]:
        return {"name": host, "inventory": inv_key, "type": "host"}

    def group_key(group: str) -> dict[str, Any]:
        return {"name": group, "inventory": inv_key, "type": "group"}

    return {
        "name": name,
        "description": f"The cluster of inventories/{name} (hosts, groups and variables as in the repository).",
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
                    "variables": _dump_vars(host_vars),
                    "inventory": inv_key,
                    "natural_key": host_key(host),
                }
                for host, host_vars in hosts.items()
            ],
            "groups": [
                {
                    "name": group,
                    "description": "",
                    "variables": _dump_vars(body["vars"]),
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


def job_template(template: str) -> dict[str, Any]:
    playbook, _specs, description = TEMPLATES[template]
    name = f"{PREFIX} {template}"
    return {
        "name": name,
        "description": description,
        "job_type": "run",
        "project": _key("project", PROJECT),
        "playbook": playbook,
        "inventory": _key("inventory", DEFAULT_INVENTORY),
        "ask_inventory_on_launch": True,
        "ask_credential_on_launch": True,
        "ask_limit_on_launch": True,
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
            "credentials": [_credential_key()],
            "survey_spec": survey(template, template_options(template)),
        },
    }


def workflow() -> dict[str, Any]:
    name = f"{PREFIX} preflight, boot, bench"
    wf_key = _key("workflow_job_template", name)

    def node_key(step: str) -> dict[str, Any]:
        return {"workflow_job_template": wf_key, "identifier": step, "type": "workflow_job_template_node"}

    nodes = []
    for index, step in enumerate(WORKFLOW):
        following = WORKFLOW[index + 1 : index + 2]
        nodes.append(
            {
                "identifier": step,
                "unified_job_template": _key("job_template", f"{PREFIX} {step}"),
                "workflow_job_template": wf_key,
                "all_parents_must_converge": False,
                "natural_key": node_key(step),
                "related": {
                    "success_nodes": [node_key(s) for s in following],
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


def resources() -> dict[str, Any]:
    inventories = sorted(p.parent.name for p in (ROOT / "inventories").glob("*/hosts.yml"))
    return {
        "organizations": [
            {
                "name": ORGANIZATION,
                "description": "Teams that run dgxspark.cluster's serving clusters.",
                "max_hosts": 0,
                "natural_key": _org_key(),
            }
        ],
        "projects": [
            {
                "name": PROJECT,
                "description": "The dgxspark.cluster repository: its playbooks, roles and inventories.",
                "organization": _org_key(),
                "scm_type": "git",
                "scm_url": SCM_URL,
                "scm_branch": SCM_BRANCH,
                "scm_clean": True,
                "scm_update_on_launch": True,
                "allow_override": False,
                "natural_key": _key("project", PROJECT),
            }
        ],
        "inventory": [inventory(name) for name in inventories],
        "job_templates": [job_template(t) for t in TEMPLATES],
        "workflow_job_templates": [workflow()],
    }


def render() -> str:
    header = [
        "# GENERATED by tools/awx/gen_resources.py (make awx-resources) - do not edit by hand.",
        "# dgxspark.cluster's AWX resources in awxkit's import format:",
        "#   awx import -f yaml < awx/resources.yml",
        "# The machine credential the templates name must exist first (README, AWX):",
        f"#   {CREDENTIAL!r}, type Machine, organization {ORGANIZATION!r}.",
        "#",
        *(f"# {line}" if line else "#" for line in SURVEY_RULES.splitlines()),
    ]
    body = yaml.dump(resources(), Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    return "\n".join(header) + "\n---\n" + body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if awx/resources.yml is not up to date")
    args = parser.parse_args()
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(OUTPUT), "generated")
            sys.stdout.writelines(diff)
            print(f"{OUTPUT.relative_to(ROOT)} is out of date: run make awx-resources", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
