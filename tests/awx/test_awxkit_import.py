"""awx/resources.yml through awxkit's own import code (`awx import`), offline, against tests/awx/fake_awx.py.

Run in .venv-awx (awxkit 24.6.1 from PyPI): make awx-check.
"""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

awxkit_api = pytest.importorskip("awxkit.api.pages.api", reason="awxkit is in .venv-awx (make awx-check)")
from awxkit import exceptions as awxkit_exceptions  # noqa: E402
from awxkit import yaml_file  # noqa: E402 - after the importorskip
from awxkit.api.mixins import has_status  # noqa: E402
from awxkit.api.pages.api import EXPORTABLE_RESOURCES, ApiV2  # noqa: E402
from fake_awx import ATTACH_SUBLISTS, CREATE_SUBLISTS, POST_FIELDS, ROOT_ENDPOINTS, FakeAWX  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "awx"))
import gen_resources  # noqa: E402 - tools/awx is not a package

RESOURCES = ROOT / "awx" / "resources.yml"
# The file before issue 28 (required questions with defaults, the project at github.com only): what a real AWX
# 24.6.1 refused on a second import, on an API launch without answers, and without a way to github.com.
OLD_COMMIT = "dc86be5"
# What a project's checkout holds: AWX takes a template's playbook only among these, once the project synced.
PLAYBOOK_FILES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "playbooks").glob("*.yml"))
SITE_GIT = "https://git.example.internal/platform/dgxspark-cluster.git"
CREDENTIAL = "dgxspark nodes (SSH)"
# the fleet (inventories/fleet): its clusters, each with its own machine credential, made by hand like CREDENTIAL
FLEET = {"sim3": "dgxspark sim3 machine", "sim4": "dgxspark sim4 machine"}
EE = "dgxspark.cluster EE"
PLAYBOOKS = (
    "preflight",
    "boot",
    "stop",
    "bench",
    "compare",
    "releases",
    "rollback",
    "promote",
    "images",
    "weights",
    "recover",
    "status",
    "window",
)
FLEET_PLAYBOOKS = ("preflight", "boot", "stop", "bench", "recover")


def load(text: str | None = None) -> dict[str, Any]:
    # the loader `awx import -f yaml` uses (awxkit/cli/custom.py: Import.handle)
    if text is not None:
        stream = io.StringIO(text)
        stream.name = str(RESOURCES)  # the loader resolves !include from the file's folder
        return yaml.load(stream, Loader=yaml_file.Loader)
    with RESOURCES.open() as stream:
        return yaml.load(stream, Loader=yaml_file.Loader)


def load_old() -> dict[str, Any]:
    """awx/resources.yml as it was at OLD_COMMIT."""
    proc = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:awx/resources.yml"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip(f"no git history with {OLD_COMMIT} here: {proc.stderr.strip()}")
    return load(proc.stdout)


def seeded(reachable: tuple[str, ...] = (gen_resources.SCM_URL,), local_paths: tuple[str, ...] = ()) -> FakeAWX:
    """An AWX that has what an operator makes by hand before the import: the machine credentials. Its project
    updates reach the git URLs `reachable`, and PROJECTS_ROOT holds a checkout in each folder of `local_paths`."""
    awx = FakeAWX(
        reachable=dict.fromkeys(reachable, PLAYBOOK_FILES), local_paths=dict.fromkeys(local_paths, PLAYBOOK_FILES)
    )
    machine = awx.add("credential_types", name="Machine", kind="ssh", managed=True)
    org = awx.add("organizations", name="DGX Spark")
    for name in (CREDENTIAL, *FLEET.values()):
        awx.add("credentials", name=name, organization=org["id"], credential_type=machine["id"])
    return awx


def run_import(awx: FakeAWX, data: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    api = ApiV2(awx, endpoint="/api/v2/").get()
    with caplog.at_level(logging.WARNING, logger="awxkit"):
        api.import_assets(data)
    problems = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not getattr(api, "_has_error", False) and not problems, "awxkit's import reported:\n" + "\n".join(problems)


def test_top_level_keys_are_awxkit_resources() -> None:
    data = load()
    assert set(data) <= set(EXPORTABLE_RESOURCES), set(data) - set(EXPORTABLE_RESOURCES)
    assert set(ROOT_ENDPOINTS) == set(EXPORTABLE_RESOURCES), "fake_awx.ROOT_ENDPOINTS lags awxkit"


def _unknown_fields(path: str, assets: list[dict[str, Any]], where: str) -> list[str]:
    """Fields awxkit would drop without a word (not POST fields of the endpoint)."""
    problems = []
    for asset in assets:
        for field in set(asset) - set(POST_FIELDS[path]) - {"natural_key", "related"}:
            problems.append(
                f"{where} {asset.get('name', asset.get('identifier'))!r}: {field!r} is not a field AWX takes"
            )
        for sub, children in (asset.get("related") or {}).items():
            if (path, sub) in CREATE_SUBLISTS and children:
                child = CREATE_SUBLISTS[(path, sub)][0]
                problems += _unknown_fields(child, children, f"{where} {asset.get('name')!r} {sub}")
            elif (path, sub) not in ATTACH_SUBLISTS and not (path == "job_templates" and sub == "survey_spec"):
                problems.append(f"{where} {asset.get('name')!r}: related {sub!r} is not one awxkit imports here")
    return problems


def test_every_field_is_one_awx_takes() -> None:
    data = load()
    problems = []
    for resource, assets in data.items():
        problems += _unknown_fields(ROOT_ENDPOINTS[resource], assets, resource)
    assert not problems, "\n".join(problems)


def test_awx_import_creates_everything(caplog: pytest.LogCaptureFixture) -> None:
    awx = seeded()
    data = load()
    run_import(awx, data, caplog)

    org = awx.find("organizations", name="DGX Spark")[0]
    (project,) = awx.find("projects", name="dgxspark.cluster")
    assert project["organization"] == org["id"]
    credentials = {c["name"]: c["id"] for c in awx.find("credentials")}
    assert len(credentials) == 1 + len(FLEET), "the import must not create credentials (no secret in the repo)"
    (ee,) = awx.find("execution_environments")
    assert (ee["name"], ee["image"], ee["pull"], ee["organization"]) == (
        EE,
        "dgxspark-ee/ee:latest",
        "never",
        org["id"],
    )

    inventories = {i["name"]: i for i in awx.find("inventories")}
    assert {"spark3", "sim3", "fleet"} <= set(inventories)
    for name, inv in inventories.items():
        groups = {g["name"]: g for g in awx.find("groups", inventory=inv["id"])}
        assert {"dgxspark", "dgxspark_head", "dgxspark_workers"} <= set(groups), name
        children = {g["name"] for g in awx.linked("groups", groups["dgxspark"]["id"], "children")}
        if name == "fleet":
            continue  # below
        assert children == {"dgxspark_head", "dgxspark_workers"}, name
        heads = awx.linked("groups", groups["dgxspark_head"]["id"], "hosts")
        assert len(heads) == 1, f"{name}: the head group holds one host, found {heads}"

    templates = {t["name"]: t for t in awx.find("job_templates")}
    expected = {f"dgxspark {t}": f"playbooks/{t}.yml" for t in PLAYBOOKS}
    expected |= {f"dgxspark {t} (fleet {c})": f"playbooks/{t}.yml" for t in FLEET_PLAYBOOKS for c in FLEET}
    assert {n: t["playbook"] for n, t in templates.items()} == expected
    for name, template in templates.items():
        assert template["project"] == project["id"], name
        assert template["execution_environment"] == ee["id"], name
        assert awx.surveys[template["id"]]["spec"], f"{name}: no survey stored"
        linked = [c["id"] for c in awx.linked("job_templates", template["id"], "credentials")]
        cluster = name.rpartition(" ")[2].rstrip(")") if name.endswith(")") else None
        if cluster is None:
            assert template["inventory"] == inventories["spark3"]["id"], name
            assert linked == [credentials[CREDENTIAL]], name
            assert template.get("limit", "") == "" and template["ask_limit_on_launch"], name
        else:  # a fleet cluster's own: its inventory, limit and credential, none of them asked at launch
            assert template["inventory"] == inventories["fleet"]["id"], name
            assert template["limit"] == cluster, name
            assert linked == [credentials[FLEET[cluster]]], name
            asked = [
                k for k in ("ask_inventory_on_launch", "ask_limit_on_launch", "ask_credential_on_launch") if template[k]
            ]
            assert not asked, f"{name} asks {asked} at launch"
            questions = {q["variable"] for q in awx.surveys[template["id"]]["spec"]}
            assert not questions & {"dgxspark_cluster_groups", "boot_head_group", "boot_workers_group"}, name

    (workflow,) = awx.find("workflow_job_templates", name="dgxspark preflight, boot, bench")
    nodes = {n["identifier"]: n for n in awx.find("workflow_job_template_nodes", workflow_job_template=workflow["id"])}
    assert {k: n["unified_job_template"] for k, n in nodes.items()} == {
        step: templates[f"dgxspark {step}"]["id"] for step in ("preflight", "boot", "bench", "promote")
    }
    chain = {
        k: [s["identifier"] for s in awx.linked("workflow_job_template_nodes", n["id"], "success_nodes")]
        for k, n in nodes.items()
    }
    assert chain == {"preflight": ["boot"], "boot": ["bench"], "bench": ["promote"], "promote": []}


def test_the_fleet_inventory_keeps_each_cluster_apart(caplog: pytest.LogCaptureFixture) -> None:
    """In AWX, the fleet is one inventory whose clusters are groups of their own, each with its head and workers
    groups and its own variables; the playbooks' dgxspark_head and dgxspark_workers hold every cluster's."""
    awx = seeded()
    run_import(awx, load(), caplog)
    (fleet,) = awx.find("inventories", name="fleet")
    groups = {g["name"]: g for g in awx.find("groups", inventory=fleet["id"])}

    def children(group: str) -> set[str]:
        return {g["name"] for g in awx.linked("groups", groups[group]["id"], "children")}

    def hosts(group: str) -> set[str]:
        found = {h["name"] for h in awx.linked("groups", groups[group]["id"], "hosts")}
        return found.union(*(hosts(child) for child in children(group)))

    assert children("dgxspark") == {*FLEET, "dgxspark_head", "dgxspark_workers"}
    assert children("dgxspark_head") == {f"{c}_head" for c in FLEET}
    assert children("dgxspark_workers") == {f"{c}_workers" for c in FLEET}
    sizes = {"sim3": 3, "sim4": 4}
    for cluster in FLEET:
        assert children(cluster) == {f"{cluster}_head", f"{cluster}_workers"}
        assert len(hosts(f"{cluster}_head")) == 1 and len(hosts(cluster)) == sizes[cluster]
        assert all(h.startswith(f"{cluster}-") for h in hosts(cluster)), hosts(cluster)
        variables = yaml.safe_load(groups[cluster]["variables"])
        assert variables["dgxspark_cluster_groups"] == {"head": f"{cluster}_head", "workers": f"{cluster}_workers"}
        assert variables["dgxspark_profile"] == f"{{{{ playbook_dir }}}}/../inventories/{cluster}/serving-profile.json"
        assert "ansible_ssh_private_key_file" not in variables, "the machine credential gives the key"
        assert not any("inventory_dir" in str(value) for value in variables.values()), variables
    assert not hosts("sim3") & hosts("sim4")


def test_the_fleet_workflow_boots_every_cluster_at_once(caplog: pytest.LogCaptureFixture) -> None:
    """Two nodes, no link between them (AWX starts every node without a parent at once), each its cluster's boot
    template, limit and inventory; the workflow asks nothing at launch (its answers would go to both nodes)."""
    awx = seeded()
    run_import(awx, load(), caplog)
    (workflow,) = awx.find("workflow_job_templates", name="dgxspark fleet boot")
    (fleet,) = awx.find("inventories", name="fleet")
    assert workflow["inventory"] == fleet["id"]
    asked = [k for k in ("ask_inventory_on_launch", "ask_limit_on_launch", "ask_variables_on_launch") if workflow[k]]
    assert not asked, f"the fleet workflow asks {asked}"
    nodes = {n["identifier"]: n for n in awx.find("workflow_job_template_nodes", workflow_job_template=workflow["id"])}
    assert set(nodes) == set(FLEET)
    for cluster, node in nodes.items():
        template = awx.objects["job_templates"][node["unified_job_template"]]
        assert template["name"] == f"dgxspark boot (fleet {cluster})"
        assert (
            (node["limit"], node["inventory"]) == (cluster, fleet["id"]) == (template["limit"], template["inventory"])
        )
        for sub in ("success_nodes", "failure_nodes", "always_nodes"):
            assert not awx.linked("workflow_job_template_nodes", node["id"], sub), f"{cluster}: {sub}"
        # the node's credential is its template's own (AWX refuses to attach that one to the node)
        assert not awx.linked("workflow_job_template_nodes", node["id"], "credentials")
        machine = awx.linked("job_templates", template["id"], "credentials")
        assert [c["name"] for c in machine] == [FLEET[cluster]]
    # nothing starts any node after another: every node is a root
    targets = [
        child["id"]
        for node in nodes.values()
        for sub in ("success_nodes", "failure_nodes", "always_nodes")
        for child in awx.linked("workflow_job_template_nodes", node["id"], sub)
    ]
    assert not targets


def test_the_schedules_are_imported_disabled(caplog: pytest.LogCaptureFixture) -> None:
    """A nightly bench and a recover check on every cluster's bench and recover templates, none of them on until a
    team turns it on; each rrule passes AWX's own checks (the stand-in's)."""
    awx = seeded()
    run_import(awx, load(), caplog)
    templates = {t["id"]: t["name"] for t in awx.find("job_templates")}
    found = {s["name"]: (templates[s["unified_job_template"]], s["enabled"]) for s in awx.find("schedules")}
    expected = {}
    for suffix in ("", *(f" (fleet {c})" for c in FLEET)):
        expected[f"dgxspark nightly bench{suffix}"] = (f"dgxspark bench{suffix}", False)
        expected[f"dgxspark recover check{suffix}"] = (f"dgxspark recover{suffix}", False)
    assert found == expected
    rules = {s["name"]: s["rrule"] for s in awx.find("schedules")}
    assert rules["dgxspark nightly bench"].endswith("RRULE:FREQ=DAILY;INTERVAL=1")
    assert rules["dgxspark recover check"].endswith("RRULE:FREQ=MINUTELY;INTERVAL=5")


def test_a_second_import_changes_nothing_it_should_not(caplog: pytest.LogCaptureFixture) -> None:
    awx = seeded()
    run_import(awx, load(), caplog)
    counts = {path: len(objs) for path, objs in awx.objects.items()}
    run_import(awx, load(), caplog)
    assert {path: len(objs) for path, objs in awx.objects.items()} == counts


def test_a_missing_credential_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Without the hand-made machine credential, awxkit says so (the file holds only its name)."""
    awx = FakeAWX(reachable={gen_resources.SCM_URL: PLAYBOOK_FILES})
    awx.add("credential_types", name="Machine", kind="ssh", managed=True)
    with pytest.raises(AssertionError, match="Could not find matching object"):
        run_import(awx, load(), caplog)


def test_the_fake_rejects_what_awx_rejects(caplog: pytest.LogCaptureFixture) -> None:
    """The stand-in is strict where it matters: a bad survey and an unknown field fail the import."""
    data = load()
    data["job_templates"][0]["related"]["survey_spec"]["spec"][0]["type"] = "boolean"
    with pytest.raises(Exception, match="not one of"):
        run_import(seeded(), data, caplog)


def _fleet_node(data: dict[str, Any], cluster: str) -> dict[str, Any]:
    (workflow,) = [w for w in data["workflow_job_templates"] if w["name"] == "dgxspark fleet boot"]
    (node,) = [n for n in workflow["related"]["workflow_nodes"] if n["identifier"] == cluster]
    return node


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        # a node cannot widen its template's fixed limit, nor move it to another inventory
        (lambda data: _fleet_node(data, "sim3").update(limit="sim3:sim4"), "not configured to prompt on launch"),
        (lambda data: _fleet_node(data, "sim3").update(inventory=data["inventory"][-1]["natural_key"]), "prompt"),
        # nor carry a credential: its template has its own and does not ask for one
        (
            lambda data: _fleet_node(data, "sim4")["related"]["credentials"].append(
                data["job_templates"][-1]["related"]["credentials"][0]
            ),
            "association failed",
        ),
        (
            lambda data: data["schedules"][0].update(rrule="DTSTART:20260101T020000 RRULE:FREQ=DAILY;INTERVAL=1"),
            "naive",
        ),
        (lambda data: data["schedules"][1].update(rrule="DTSTART:20260101T000000Z RRULE:FREQ=MINUTELY"), "INTERVAL"),
        (lambda data: data["execution_environments"][0].update(pull="sometimes"), "not a valid choice"),
    ],
    ids=["node-limit", "node-inventory", "node-credential", "naive-dtstart", "no-interval", "pull-choice"],
)
def test_the_fake_refuses_what_awx_refuses_of_the_fleet_and_schedules(
    change: Any, refusal: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A workflow node's prompts and credentials, a schedule's rrule and the EE's pull are checked as AWX checks
    them: the same file, changed in one place, fails the import with AWX's reason."""
    data = load()
    change(data)
    with pytest.raises(AssertionError, match=refusal):
        run_import(seeded(), data, caplog)


def test_a_node_credential_is_taken_where_the_template_asks_for_one(caplog: pytest.LogCaptureFixture) -> None:
    """The other side of the refusal above: the generic workflow's templates ask for credentials, so a node of it
    may carry a fleet cluster's (the stand-in does not refuse every node credential)."""
    data = load()
    node = data["workflow_job_templates"][0]["related"]["workflow_nodes"][0]
    node["related"]["credentials"].append(
        next(t for t in data["job_templates"] if t["name"] == "dgxspark boot (fleet sim3)")["related"]["credentials"][0]
    )
    awx = seeded()
    run_import(awx, data, caplog)
    (preflight,) = awx.find("workflow_job_template_nodes", identifier=node["identifier"])
    assert [c["name"] for c in awx.linked("workflow_job_template_nodes", preflight["id"], "credentials")] == [
        FLEET["sim3"]
    ]


# ------------------------------------------------------------------- issue 28: what a real AWX 24.6.1 refused
def _snapshot(awx: FakeAWX) -> Any:
    return repr((awx.objects, awx.links, awx.surveys))


def test_a_second_and_a_third_import_succeed_and_change_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """awxkit's re-import PUTs every object it finds by its natural key (a schedule too), and AWX checks a
    schedule's PUT against its template's required questions: the file's questions with a default are not
    required, so the PUTs pass, and they leave every object as the first import left it."""
    awx = seeded()
    run_import(awx, load(), caplog)
    first = _snapshot(awx)
    for _again in range(2):
        run_import(awx, load(), caplog)
        assert _snapshot(awx) == first
    puts = [url for method, url in awx.requests if method == "put" and "/schedules/" in url]
    assert len(puts) == 2 * len(awx.find("schedules")) == 12, puts


def test_the_old_file_fails_its_second_import_on_every_schedule(caplog: pytest.LogCaptureFixture) -> None:
    """What AWX 24.6.1 answered: the first import passes (the schedules are made before the surveys), the second
    fails on all 6 schedules with variables_needed_to_start."""
    awx = seeded()
    run_import(awx, load_old(), caplog)
    caplog.clear()
    with pytest.raises(AssertionError, match="variables_needed_to_start") as failed:
        run_import(awx, load_old(), caplog)
    refused = [line for line in str(failed.value).splitlines() if "variables_needed_to_start" in line]
    assert len(refused) == 6, refused
    assert all("value missing" in line for line in refused), refused


def test_a_reimport_turns_an_enabled_schedule_off(caplog: pytest.LogCaptureFixture) -> None:
    """docs/awx.md, section 5: the file sets enabled false and awxkit's re-import PUTs it, so a schedule turned on
    in AWX is off again after every import (the schedules a team keeps outside the file are left alone)."""
    awx = seeded()
    run_import(awx, load(), caplog)
    (schedule,) = awx.find("schedules", name="dgxspark recover check (fleet sim3)")
    template = schedule["unified_job_template"]
    own = awx.add("schedules", name="sim3 recover, ours", unified_job_template=template, rrule="x", enabled=True)
    awx.objects["schedules"][schedule["id"]]["enabled"] = True
    run_import(awx, load(), caplog)
    assert awx.objects["schedules"][schedule["id"]]["enabled"] is False
    assert awx.objects["schedules"][own["id"]]["enabled"] is True


def _launch(awx: FakeAWX, name: str, extra_vars: dict[str, Any] | None = None) -> Any:
    api = ApiV2(awx, endpoint="/api/v2/").get()
    (template,) = api.job_templates.get(name=name).results
    return template.related.launch.post({"extra_vars": extra_vars} if extra_vars is not None else {})


REQUIRED = {"dgxspark promote": {"dgxspark_candidate"}, "dgxspark window": {"window_image", "window_command"}}


def test_every_template_launches_from_the_api_without_extra_vars(caplog: pytest.LogCaptureFixture) -> None:
    """`awx job_templates launch NAME` with no extra_vars (the launch endpoint): every template starts a job with its
    survey's defaults, but for the questions no default fits (REQUIRED), which AWX refuses by name and whose
    question says what to pass."""
    awx = seeded()
    run_import(awx, load(), caplog)
    data = {t["name"]: t for t in load()["job_templates"]}
    for name, template in data.items():
        spec = template["related"]["survey_spec"]["spec"]
        required = {q["variable"] for q in spec if q["required"]}
        assert required == REQUIRED.get(name, set()), name
        for question in spec:
            if question["required"]:
                assert "default" not in question, name
                assert "Required, no default: pass" in question["question_description"], (name, question)
        if required:
            with pytest.raises(awxkit_exceptions.BadRequest) as refused:
                _launch(awx, name)
            assert sorted(refused.value.msg["variables_needed_to_start"]) == sorted(
                f"'{v}' value missing" for v in required
            )
            continue
        _launch(awx, name)
        job = awx.jobs[-1]
        assert job["extra_vars"] == {q["variable"]: q["default"] for q in spec if "default" in q}, name


def test_promote_launches_with_its_candidate(caplog: pytest.LogCaptureFixture) -> None:
    awx = seeded()
    run_import(awx, load(), caplog)
    _launch(awx, "dgxspark promote", {"dgxspark_candidate": "/runner/project/profiles/next.json"})
    assert awx.jobs[-1]["extra_vars"]["dgxspark_candidate"] == "/runner/project/profiles/next.json"
    assert awx.jobs[-1]["extra_vars"]["boot_timeout"] == 900


def test_the_old_file_refuses_an_api_launch_without_answers(caplog: pytest.LogCaptureFixture) -> None:
    """What AWX 24.6.1 answered the old file's templates: 400 variables_needed_to_start for every required
    question, default or not."""
    awx = seeded()
    run_import(awx, load_old(), caplog)
    with pytest.raises(awxkit_exceptions.BadRequest) as refused:
        _launch(awx, "dgxspark preflight")
    assert "'boot_timeout' value missing" in refused.value.msg["variables_needed_to_start"]


def test_the_old_file_fails_every_template_where_github_is_out_of_reach(caplog: pytest.LogCaptureFixture) -> None:
    """An AWX that reaches only its site's git server: the old file's project (github.com) fails its update, and
    AWX refuses all 21 templates ("Playbook not found for project")."""
    with pytest.raises(AssertionError, match="Playbook not found for project") as failed:
        run_import(seeded(reachable=(SITE_GIT,)), load_old(), caplog)
    refused = [line for line in str(failed.value).splitlines() if "Playbook not found for project" in line]
    assert len(refused) == 21, refused


def test_a_site_git_project_imports(caplog: pytest.LogCaptureFixture) -> None:
    """gen_resources.py --scm-url SITE_GIT --scm-branch release: the project syncs from the site's git server, every
    template takes its playbook, and a re-import changes nothing."""
    awx = seeded(reachable=(SITE_GIT,))
    text = gen_resources.render(scm_url=SITE_GIT, scm_branch="release")
    run_import(awx, load(text), caplog)
    (project,) = awx.find("projects", name="dgxspark.cluster")
    assert (project["scm_type"], project["scm_url"], project["scm_branch"]) == ("git", SITE_GIT, "release")
    assert len(awx.find("job_templates")) == 23  # with dgxspark status (issue 29) and dgxspark weights (issue 30)
    first = _snapshot(awx)
    run_import(awx, load(text), caplog)
    assert _snapshot(awx) == first
    _launch(awx, "dgxspark preflight")


def test_a_manual_project_imports(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """gen_resources.py --local-path dgxspark-cluster: a manual project (no git), the checkout in PROJECTS_ROOT's
    folder; every template takes its playbook from it. A manual project never updates, so awxkit's wait for its first
    update after creating it (5 minutes on a real AWX) times out and the import goes on: cut short here."""
    monkeypatch.setattr(has_status, "poll_until", lambda function, interval=5, timeout=0: _poll_once(function))
    awx = seeded(reachable=(), local_paths=("dgxspark-cluster",))
    text = gen_resources.render(local_path="dgxspark-cluster")
    run_import(awx, load(text), caplog)
    (project,) = awx.find("projects", name="dgxspark.cluster")
    assert (project["scm_type"], project["local_path"]) == ("", "dgxspark-cluster")
    assert "scm_url" not in project
    assert len(awx.find("job_templates")) == 23  # with dgxspark status (issue 29) and dgxspark weights (issue 30)
    first = _snapshot(awx)
    run_import(awx, load(text), caplog)
    assert _snapshot(awx) == first
    _launch(awx, "dgxspark boot")
    # a folder that PROJECTS_ROOT does not hold is refused with the project, and so then is every template
    with pytest.raises(AssertionError, match="Invalid path choice"):
        run_import(seeded(reachable=(), local_paths=("elsewhere",)), load(text), caplog)


def _poll_once(function: Any) -> Any:
    value = function()
    if not value:
        raise awxkit_exceptions.WaitUntilTimeout(None, "Timeout after 0 seconds.")
    return value


def test_the_generator_refuses_a_manual_project_with_a_url() -> None:
    with pytest.raises(ValueError, match="PROJECTS_ROOT"):
        gen_resources.render(local_path="a/b")
