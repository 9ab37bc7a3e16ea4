"""awx/resources.yml through awxkit's own import code (`awx import`), offline, against tests/awx/fake_awx.py.

Run in .venv-awx (awxkit 24.6.1 from PyPI): make awx-check.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

awxkit_api = pytest.importorskip("awxkit.api.pages.api", reason="awxkit is in .venv-awx (make awx-check)")
from awxkit import yaml_file  # noqa: E402 - after the importorskip
from awxkit.api.pages.api import EXPORTABLE_RESOURCES, ApiV2  # noqa: E402
from fake_awx import ATTACH_SUBLISTS, CREATE_SUBLISTS, POST_FIELDS, ROOT_ENDPOINTS, FakeAWX  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESOURCES = ROOT / "awx" / "resources.yml"
CREDENTIAL = "dgxspark nodes (SSH)"


def load() -> dict[str, Any]:
    # the loader `awx import -f yaml` uses (awxkit/cli/custom.py: Import.handle)
    with RESOURCES.open() as stream:
        return yaml.load(stream, Loader=yaml_file.Loader)


def seeded() -> FakeAWX:
    """An AWX that has what an operator makes by hand before the import: the machine credential."""
    awx = FakeAWX()
    machine = awx.add("credential_types", name="Machine", kind="ssh", managed=True)
    org = awx.add("organizations", name="DGX Spark")
    awx.add("credentials", name=CREDENTIAL, organization=org["id"], credential_type=machine["id"])
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
    (credential,) = awx.find("credentials", name=CREDENTIAL)
    assert len(awx.objects["credentials"]) == 1, "the import must not create credentials (no secret in the repo)"

    inventories = {i["name"]: i for i in awx.find("inventories")}
    assert {"spark3", "sim3"} <= set(inventories)
    for name, inv in inventories.items():
        groups = {g["name"]: g for g in awx.find("groups", inventory=inv["id"])}
        assert {"dgxspark", "dgxspark_head", "dgxspark_workers"} <= set(groups), name
        children = {g["name"] for g in awx.linked("groups", groups["dgxspark"]["id"], "children")}
        assert children == {"dgxspark_head", "dgxspark_workers"}, name
        heads = awx.linked("groups", groups["dgxspark_head"]["id"], "hosts")
        assert len(heads) == 1, f"{name}: the head group holds one host, found {heads}"

    templates = {t["name"]: t for t in awx.find("job_templates")}
    names = (
        "preflight",
        "boot",
        "stop",
        "bench",
        "compare",
        "releases",
        "rollback",
        "promote",
        "images",
        "recover",
        "window",
    )
    expected = {f"dgxspark {t}": f"playbooks/{t}.yml" for t in names}
    assert {n: t["playbook"] for n, t in templates.items()} == expected
    for name, template in templates.items():
        assert template["project"] == project["id"], name
        assert template["inventory"] == inventories["spark3"]["id"], name
        assert [c["id"] for c in awx.linked("job_templates", template["id"], "credentials")] == [credential["id"]], name
        assert awx.surveys[template["id"]]["spec"], f"{name}: no survey stored"

    (workflow,) = awx.find("workflow_job_templates")
    nodes = {n["identifier"]: n for n in awx.find("workflow_job_template_nodes", workflow_job_template=workflow["id"])}
    assert {k: n["unified_job_template"] for k, n in nodes.items()} == {
        step: templates[f"dgxspark {step}"]["id"] for step in ("preflight", "boot", "bench", "promote")
    }
    chain = {
        k: [s["identifier"] for s in awx.linked("workflow_job_template_nodes", n["id"], "success_nodes")]
        for k, n in nodes.items()
    }
    assert chain == {"preflight": ["boot"], "boot": ["bench"], "bench": ["promote"], "promote": []}


def test_a_second_import_changes_nothing_it_should_not(caplog: pytest.LogCaptureFixture) -> None:
    awx = seeded()
    run_import(awx, load(), caplog)
    counts = {path: len(objs) for path, objs in awx.objects.items()}
    run_import(awx, load(), caplog)
    assert {path: len(objs) for path, objs in awx.objects.items()} == counts


def test_a_missing_credential_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    """Without the hand-made machine credential, awxkit says so (the file holds only its name)."""
    awx = FakeAWX()
    awx.add("credential_types", name="Machine", kind="ssh", managed=True)
    with pytest.raises(AssertionError, match="Could not find matching object"):
        run_import(awx, load(), caplog)


def test_the_fake_rejects_what_awx_rejects(caplog: pytest.LogCaptureFixture) -> None:
    """The stand-in is strict where it matters: a bad survey and an unknown field fail the import."""
    data = load()
    data["job_templates"][0]["related"]["survey_spec"]["spec"][0]["type"] = "boolean"
    with pytest.raises(Exception, match="not one of"):
        run_import(seeded(), data, caplog)
