"""awx/resources.yml's inventories, its fleet, its execution environment and its schedules, against the repository.

- Every inventory as an AWX job sees it (the inventory script AWX writes from the database, read by Ansible) has
  the hosts, groups and variables the repository's inventory has as Ansible reads it; the paths that started from
  inventory_dir name the same files in the job's checkout; the key file is left to the machine credential.
- A fleet (inventories/fleet: clusters side by side) gets templates limited to one cluster, with its own machine
  credential, none of that asked at launch, and surveys without a question for what the cluster's group sets
  (AWX gives every launch its survey's defaults as extra variables, which would replace the cluster's own).
  Run as AWX runs them (that inventory, that limit, those defaults), the plan covers one cluster and nothing else;
  without the limit it refuses the run; the single-cluster templates' defaults cannot plan a fleet's cluster.
- The fleet workflow: one node per cluster, none after another, each its cluster's boot template.
- The execution environment is the image `make ee-image` builds, never pulled; every template runs in it.
- The schedules are on templates that exist, disabled, and ask nothing a schedule cannot answer.

awxkit's own import of the same file is tests/awx (make awx-check).
"""

from __future__ import annotations

import ast
import json
import os
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible import constants as C
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.manager import VariableManager

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "awx"))
import gen_resources  # noqa: E402 - tools/awx is not a package
import runner_job  # noqa: E402

RESOURCES = yaml.safe_load((ROOT / "awx" / "resources.yml").read_text())
INVENTORIES = sorted(p.parent.name for p in (ROOT / "inventories").glob("*/hosts.yml"))
FLEET = ROOT / "inventories" / "fleet"
# the playbooks a fleet cluster has its own template for, and what the workflow runs on every cluster
FLEET_PLAYBOOKS = ("preflight", "boot", "stop", "bench", "recover")
KEY_VARS = {"ansible_ssh_private_key_file", "ansible_private_key_file"}
BIN = Path(sys.executable).parent
NO_CONTACT = "UNREACHABLE"


def _templates() -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in RESOURCES["job_templates"]}


def _fleet_clusters() -> dict[str, dict[str, Any]]:
    """inventories/fleet's clusters, read here: the groups whose own variables name a head and a workers group."""
    found = {}
    for path in sorted((FLEET / "group_vars").glob("*.yml")):
        variables = yaml.safe_load(path.read_text()) or {}
        if "dgxspark_cluster_groups" in variables:
            found[path.stem] = variables
    return found


CLUSTERS = _fleet_clusters()


def test_the_fleet_has_two_clusters() -> None:
    assert set(CLUSTERS) == {"sim3", "sim4"}


# ------------------------------------------------------------------------------------------- inventories
def _ansible_view(source: str) -> dict[str, tuple[set[str], dict[str, Any]]]:
    """host -> (its groups, its variables) as Ansible reads the inventory (ansible-inventory --host's view)."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[source])
    manager = VariableManager(loader=loader, inventory=inventory)
    view = {}
    for host in inventory.get_hosts():
        variables = manager.get_vars(host=host, include_hostvars=False, stage="all")
        view[host.name] = (
            {group.name for group in host.get_groups()},
            {k: v for k, v in variables.items() if k not in C.INTERNAL_STATIC_VARS},
        )
    return view


def _awx_script(tmp_path: Path, name: str) -> Path:
    """The inventory as an AWX job gets it: the script AWX writes from the database (runner_job's restatement of
    Inventory.get_script_data)."""
    script = tmp_path / f"{name}-inventory"
    script.write_text(
        f"#!{sys.executable}\nimport json\nprint(json.dumps({runner_job.inventory_script_data(name)!r}))\n"
    )
    script.chmod(0o700)
    return script


def _resolved(value: Any, variable: str, directory: Path) -> Any:
    """A variable's value with `{{ variable }}` given (a path: normalised), as a job would template it."""
    if isinstance(value, dict):
        return {k: _resolved(v, variable, directory) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolved(v, variable, directory) for v in value]
    if not isinstance(value, str) or variable not in value:
        return value
    return os.path.normpath(re.sub(r"\{\{\s*" + variable + r"\s*\}\}", str(directory), value))


@pytest.mark.parametrize("name", INVENTORIES)
def test_an_awx_job_sees_the_repositorys_inventory(name: str, tmp_path: Path) -> None:
    """Same hosts, same groups, same variables; a path from inventory_dir (the repository's inventory folder) names
    the same file from playbook_dir in the job's checkout (its playbooks/); no key file (the credential's)."""
    repository = _ansible_view(str(ROOT / "inventories" / name))
    awx = _ansible_view(str(_awx_script(tmp_path, name)))
    assert set(awx) == set(repository)
    problems = []
    for host, (groups, variables) in repository.items():
        awx_groups, awx_variables = awx[host]
        if awx_groups != groups:
            problems.append(f"{host}: groups {sorted(awx_groups)} in AWX, {sorted(groups)} in the repository")
        expected = {
            k: _resolved(v, "inventory_dir", ROOT / "inventories" / name)
            for k, v in variables.items()
            if k not in KEY_VARS
        }
        got = {k: _resolved(v, "playbook_dir", ROOT / "playbooks") for k, v in awx_variables.items()}
        if got != expected:
            differ = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
            problems.append(f"{host}: {', '.join(f'{k}: {got.get(k)!r} != {expected.get(k)!r}' for k in differ)}")
        if any("inventory_dir" in json.dumps(v) for v in awx_variables.values()):
            problems.append(f"{host}: a variable still uses inventory_dir, which is not the checkout in a job")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{{ inventory_dir }}/serving-profile.json", "{{ playbook_dir }}/../inventories/sim3/serving-profile.json"),
        (
            "{{inventory_dir}}/../sim4/serving-profile.json",
            "{{ playbook_dir }}/../inventories/sim4/serving-profile.json",
        ),
        ("{{ inventory_dir }}", "{{ playbook_dir }}/../inventories/sim3"),
        (
            ["{{ inventory_dir }}/a", {"b": "{{ inventory_dir }}/./b"}],
            ["{{ playbook_dir }}/../inventories/sim3/a", {"b": "{{ playbook_dir }}/../inventories/sim3/b"}],
        ),
        ("/etc/dgxspark/profile.json", "/etc/dgxspark/profile.json"),
        (3, 3),
    ],
)
def test_checkout_path(value: Any, expected: Any) -> None:
    assert gen_resources.checkout_path(value, "sim3") == expected


@pytest.mark.parametrize(
    "value",
    [
        "{{ inventory_dir ~ '/profile.json' }}",  # an expression: no AWX job has that folder
        "/srv/{{ inventory_dir }}/profile.json",
        "{{ inventory_dir }}/../../../etc/profile.json",  # outside the checkout
        "{{ inventory_dir }}/{{ cluster }}.json",
    ],
)
def test_checkout_path_refuses_what_it_cannot_place(value: str) -> None:
    with pytest.raises(ValueError, match="inventory_dir|leaves the checkout"):
        gen_resources.checkout_path(value, "sim3")


# ------------------------------------------------------------------------------------------- the fleet's templates
@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
@pytest.mark.parametrize("playbook", FLEET_PLAYBOOKS)
def test_a_fleet_template_runs_on_its_cluster_only(cluster: str, playbook: str) -> None:
    templates = _templates()
    generic = templates[f"dgxspark {playbook}"]
    template = templates[f"dgxspark {playbook} (fleet {cluster})"]
    assert template["playbook"] == generic["playbook"]
    assert template["inventory"]["name"] == "fleet"
    assert template["limit"] == cluster
    asked = [k for k in ("ask_inventory_on_launch", "ask_limit_on_launch", "ask_credential_on_launch") if template[k]]
    assert not asked, f"a fleet template asks {asked} at launch: a launch could run it elsewhere"
    assert [c["name"] for c in template["related"]["credentials"]] == [f"dgxspark {cluster} machine"]
    assert template["execution_environment"] == generic["execution_environment"]
    assert template["allow_simultaneous"] is False, "one job at a time on a cluster (AWX queues the next)"
    # the survey: the single-cluster template's, less the questions for what the cluster's group sets (none: the
    # cluster's groups, dgxspark_cluster_groups, are a dict, a question of no survey)
    sets = set(CLUSTERS[cluster])
    expected = [q for q in generic["related"]["survey_spec"]["spec"] if q["variable"] not in sets]
    assert template["related"]["survey_spec"]["spec"] == expected
    asked = {q["variable"] for q in generic["related"]["survey_spec"]["spec"]}
    assert not asked & (sets | {"dgxspark_cluster_groups", "boot_head_group", "boot_workers_group"}), asked & sets
    # the description says what a run without the limit would do
    said = {"stop": "stop every cluster", "recover": "plan refused"}.get(playbook, "refuses")
    assert said in template["description"], template["description"]


def test_every_fleet_cluster_has_its_templates_and_no_other_has() -> None:
    fleet = {n for n in _templates() if n.endswith(")")}
    assert fleet == {f"dgxspark {p} (fleet {c})" for p in FLEET_PLAYBOOKS for c in CLUSTERS}


def _plan(tmp_path: Path, template: dict[str, Any], *limit: str) -> subprocess.CompletedProcess[str]:
    """plan.yml (the plan every boot, preflight and bench starts with; it contacts no node) as an AWX job of the
    template would run it: the fleet inventory's script, the limit, the survey's defaults as extra variables."""
    extra = tmp_path / "extravars.json"
    extra.write_text(json.dumps(runner_job.survey_defaults(template)))
    command = [
        str(BIN / "ansible-playbook"),
        "playbooks/plan.yml",
        "-i",
        str(_awx_script(tmp_path, "fleet")),
        *limit,
        "-e",
        f"@{extra}",
        # every host's SSH at a closed port on loopback: a task that reached a node would fail UNREACHABLE
        "-e",
        '{"ansible_host": "127.0.0.1", "ansible_port": 1}',
    ]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env, check=False, timeout=300)


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
def test_an_awx_job_of_a_fleet_template_plans_its_cluster_alone(cluster: str, tmp_path: Path) -> None:
    template = _templates()[f"dgxspark preflight (fleet {cluster})"]
    run = _plan(tmp_path, template, "--limit", template["limit"])
    assert run.returncode == 0, run.stdout + run.stderr
    ranks = re.findall(r"- rank (\d+) \((?:head|worker)\) on (\S+), fabric", run.stdout)
    hosts = yaml.safe_load((FLEET / "hosts.yml").read_text())["dgxspark"]["children"][cluster]["children"]
    members = [h for group in (f"{cluster}_head", f"{cluster}_workers") for h in hosts[group]["hosts"]]
    assert [host for _rank, host in ranks] == members
    assert [int(rank) for rank, _host in ranks] == list(range(len(members)))
    assert f"shape={CLUSTERS[cluster]['dgxspark_shape']}" in run.stdout
    assert NO_CONTACT not in run.stdout + run.stderr


def test_a_fleet_run_without_a_limit_is_refused_before_any_contact(tmp_path: Path) -> None:
    run = _plan(tmp_path, _templates()["dgxspark preflight (fleet sim3)"])
    assert run.returncode == 2, run.stdout + run.stderr
    assert "the inventory holds more than one cluster, and a run acts on one" in " ".join(run.stdout.split())
    assert NO_CONTACT not in run.stdout + run.stderr


def test_a_single_cluster_templates_defaults_leave_a_fleet_cluster_its_groups(tmp_path: Path) -> None:
    """No survey asks for the cluster's groups (dgxspark_cluster_groups is a dict; the deprecated boot_head_group
    and boot_workers_group are asked by none): a launch's survey defaults never take the place of a fleet cluster's
    own groups, so even the single-cluster template, limited to sim3, plans sim3 alone. (Before, its
    boot_head_group default, dgxspark_head, replaced sim3_head, and the plan saw both clusters and refused.)"""
    generic = _templates()["dgxspark preflight"]
    asked = {q["variable"] for q in generic["related"]["survey_spec"]["spec"]}
    assert not asked & {"dgxspark_cluster_groups", "boot_head_group", "boot_workers_group"}, asked
    run = _plan(tmp_path, generic, "--limit", "sim3")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "head: sim3-head" in run.stdout and "sim4-" not in run.stdout
    assert NO_CONTACT not in run.stdout + run.stderr


# ------------------------------------------------------------------------------------------- the fleet workflow
def test_the_fleet_workflow_starts_every_cluster_at_once() -> None:
    (workflow,) = [w for w in RESOURCES["workflow_job_templates"] if w["name"] == "dgxspark fleet boot"]
    nodes = workflow["related"]["workflow_nodes"]
    assert [n["identifier"] for n in nodes] == sorted(CLUSTERS)
    templates = _templates()
    for node in nodes:
        cluster = node["identifier"]
        template = templates[node["unified_job_template"]["name"]]
        assert template["name"] == f"dgxspark boot (fleet {cluster})"
        assert node["limit"] == template["limit"] == cluster
        assert node["inventory"] == template["inventory"]
        links = {sub: node["related"][sub] for sub in ("success_nodes", "failure_nodes", "always_nodes")}
        assert not any(links.values()), f"{cluster}: {links} (a node after another waits for it)"
        assert not node["related"]["credentials"], "the template has the cluster's credential; AWX refuses it twice"
    assert workflow["inventory"]["name"] == "fleet"
    asked = [k for k in ("ask_inventory_on_launch", "ask_limit_on_launch", "ask_variables_on_launch") if workflow[k]]
    assert not asked, f"the fleet workflow asks {asked}: a workflow's answer goes to every node"


# ------------------------------------------------------------------------------------------- execution environment
def _ee_image_constants() -> dict[str, str]:
    tree = ast.parse((ROOT / "tools" / "packaging" / "ee_image.py").read_text())
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_the_execution_environment_is_the_image_make_ee_image_builds() -> None:
    (ee,) = RESOURCES["execution_environments"]
    built = _ee_image_constants()
    assert ee["image"] == f"{built['REPOSITORY']}:{built['STABLE_TAG']}"
    assert ee["pull"] == "never", "a pull of this name would ask Docker Hub, which does not hold this image"
    assert ee["organization"]["name"] == RESOURCES["organizations"][0]["name"]
    for template in RESOURCES["job_templates"]:
        assert template["execution_environment"] == ee["natural_key"], template["name"]


def test_a_sites_own_image_goes_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--ee-image and --ee-pull write a site's variant, never the repository's file."""
    out = tmp_path / "site.yml"
    site = ["gen_resources.py", "--ee-image", "registry.example.com/dgxspark/ee:1", "--ee-pull", "missing"]
    monkeypatch.setattr(sys, "argv", site)
    with pytest.raises(SystemExit) as refused:
        gen_resources.main()
    assert refused.value.code == 2 and "--output" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", [*site, "--output", str(out)])
    assert gen_resources.main() == 0
    (ee,) = yaml.safe_load(out.read_text())["execution_environments"]
    assert (ee["image"], ee["pull"]) == ("registry.example.com/dgxspark/ee:1", "missing")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (
            ["--scm-url", "https://git.example.internal/dgxspark.git", "--scm-branch", "release"],
            {"scm_type": "git", "scm_url": "https://git.example.internal/dgxspark.git", "scm_branch": "release"},
        ),
        (["--local-path", "dgxspark-cluster"], {"scm_type": "", "local_path": "dgxspark-cluster"}),
    ],
    ids=["site-git", "manual"],
)
def test_a_sites_own_project_goes_elsewhere(
    options: list[str],
    expected: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--scm-url and --scm-branch (git), or --local-path (a manual project, for an AWX without git access), write a
    site's variant, never the repository's file; a manual project has no URL, branch or update on launch."""
    out = tmp_path / "site.yml"
    monkeypatch.setattr(sys, "argv", ["gen_resources.py", *options])
    with pytest.raises(SystemExit) as refused:
        gen_resources.main()
    assert refused.value.code == 2 and "--output" in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["gen_resources.py", *options, "--output", str(out)])
    assert gen_resources.main() == 0
    (project,) = yaml.safe_load(out.read_text())["projects"]
    assert {key: project[key] for key in expected} == expected
    if expected["scm_type"] == "":
        assert not {"scm_url", "scm_branch", "scm_update_on_launch"} & set(project), project
    else:
        assert "local_path" not in project and project["scm_update_on_launch"] is True
    monkeypatch.setattr(sys, "argv", ["gen_resources.py", "--local-path", "x", "--scm-url", "https://a/b.git"])
    with pytest.raises(SystemExit):
        gen_resources.main()


# ------------------------------------------------------------------------------------------- schedules
def test_the_schedules_are_on_existing_templates_and_disabled() -> None:
    templates = _templates()
    scheduled = set()
    for schedule in RESOURCES["schedules"]:
        template = templates[schedule["unified_job_template"]["name"]]
        scheduled.add(template["name"])
        assert schedule["enabled"] is False, f"{schedule['name']}: an import must start nothing"
        assert schedule["natural_key"]["unified_job_template"] == template["natural_key"]
        assert re.fullmatch(r"DTSTART:\d{8}T\d{6}Z RRULE:FREQ=(DAILY|MINUTELY);INTERVAL=\d+", schedule["rrule"])
        # a schedule launches with the survey's defaults: a required question without one would stop it
        unanswered = [
            q["variable"] for q in template["related"]["survey_spec"]["spec"] if q["required"] and "default" not in q
        ]
        assert not unanswered, f"{template['name']}: a schedule cannot answer {unanswered}"
    bench_and_recover = {"dgxspark bench", "dgxspark recover"}
    assert scheduled == bench_and_recover | {f"{n} (fleet {c})" for n in bench_and_recover for c in CLUSTERS}


def test_no_exported_path_points_into_the_inventory_script_folder() -> None:
    """AWX's inventory_dir is the job's inventory/ folder: nothing exported may still start from it."""
    text = json.dumps(RESOURCES["inventory"])
    assert "inventory_dir" not in text
    for match in re.findall(r"\{\{ playbook_dir \}\}/\.\./([^'\"\\]+)", text):
        assert posixpath.normpath(match) == match and not match.startswith(".."), match


# ------------------------------------------------------------------------------------------- runner_job
def test_runner_job_launches_a_fleet_template_as_awx_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tools/awx/runner_job.py (the sim tests' AWX) gives a fleet cluster's job the template's limit on the command
    line (as AWX's RunJob.build_args), the fleet inventory, and no survey answer for the cluster's groups."""
    monkeypatch.setattr(runner_job, "_project_files", list)  # the project is not what this checks
    key = tmp_path / "id"
    key.write_text("not a key\n")
    template = runner_job.template("dgxspark boot (fleet sim4)")
    pdd = runner_job.private_data_dir(tmp_path / "pdd", template, runner_job.template_inventory(template), key)
    assert (pdd / "env/cmdline").read_text() == "-u root -l sim4"
    extravars = json.loads((pdd / "env/extravars").read_text())
    assert not {"dgxspark_cluster_groups", "boot_head_group", "boot_workers_group"} & set(extravars)
    assert extravars["awx_inventory_name"] == "fleet"
    printed = json.loads(
        subprocess.run([str(pdd / "inventory/hosts")], capture_output=True, text=True, check=True).stdout
    )
    assert printed["sim4"]["vars"]["dgxspark_cluster_groups"] == {"head": "sim4_head", "workers": "sim4_workers"}
    with pytest.raises(ValueError, match="does not ask for a limit"):
        runner_job.private_data_dir(tmp_path / "other", template, "fleet", key, limit="sim3")
    generic = runner_job.template("dgxspark boot")
    pdd = runner_job.private_data_dir(tmp_path / "generic", generic, "sim3", key, limit="sim3")
    assert (pdd / "env/cmdline").read_text() == "-u root -l sim3"
