# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A planted token: a Hugging Face token in a secret's file on the "node" (a 0600 file here), named in the
profile's container.secrets. The token must appear in none of what the collection renders or writes from that
profile: the serving_profile action's result (the plan, every rank's argv and docker_container parameters, the
profile's text), node_facts' facts of the file, the preflight's report, the release record, the memory guard's
configuration, the boot's reports and the benchmark's results.json and report.md. Then the same token put where a
careless profile or inventory would put it is refused, and no problem, message or result repeats it."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import Options, gather
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.bench import report as _bench_report
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import config_text, memguard_config
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.boot import release_record
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.boot_report import boot_report, boot_undo_report
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, read
from ansible_collections.dgxspark.cluster.tests.unit.plugins.action.test_serving_profile import GROUPS, HOSTVARS, run
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__memguard import KEY, PEERS, settings
from ansible_collections.dgxspark.cluster.tests.unit.plugins.test_bench import document, steady

TOKEN = "hf_" + "PlantedTokenNeverShown9876543210"
TASK_VARS = {"ansible_play_hosts_all": list(HOSTVARS), "groups": GROUPS, "hostvars": HOSTVARS}


@pytest.fixture
def secret_file(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "secrets" / "hf_token"
    path.parent.mkdir()
    path.write_text(TOKEN + "\n", encoding="utf-8")
    os.chmod(path, 0o600)
    return str(path)


def profile_text(secret_path: str, **container: Any) -> str:
    data = read(SPARK3)
    data["host"]["secrets_dir"] = os.path.dirname(secret_path)
    data["container"]["secrets"] = {"hf_token": secret_path}
    data["container"].update(container)
    return json.dumps(data, indent=2)


def everything(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def test_the_token_in_a_secret_file_reaches_no_output(secret_file: str, tmp_path: pathlib.Path) -> None:
    # the plan, as the boot's first task makes it
    planned = run({"content": profile_text(secret_file)}, TASK_VARS)
    assert not planned.get("failed"), planned.get("msg")
    plan = planned["plan"]
    assert plan["ranks"][0]["environment"]["HF_TOKEN_PATH"] == "/run/secrets/hf_token"
    assert any(m["source"] == secret_file for m in plan["ranks"][0]["container"]["mounts"])
    outputs: dict[str, str] = {"serving_profile result": everything(planned)}

    # the node's facts of the file (stat only) and the preflight's report over them
    facts = gather(Options(sections=("secrets",), secret_files=(secret_file,)), run=lambda argv: None)  # type: ignore[arg-type,return-value]
    assert facts["secrets"]["paths"][secret_file]["mode"] == "0600"
    outputs["node_facts"] = everything(facts)
    nodes = {r["host"]: {"memory": {"mem_available_bytes": 200 * 1024**3}, **facts} for r in plan["ranks"]}
    verdict = preflight(nodes, plan, planned["profile"])
    assert {line["status"] for line in verdict["lines"] if line["check"] == "secret-files"} == {"PASS"}
    outputs["preflight"] = everything(verdict)

    # what the head keeps, and what the guards are given
    decision = {"decision": "first"}
    record = release_record(planned, plan, decision, {r["host"]: "sha256:1" for r in plan["ranks"]}, "me", 0.0)
    outputs["release record"] = everything(record)
    data = planned["profile"]
    guard = memguard_config(data["host"], data["container"]["name"], settings(), "spark-w1", PEERS, KEY)
    outputs["guard configuration"] = config_text(guard)

    # the boot's last words, served and failed
    hosts = [
        {
            "inventory_hostname": r["host"],
            "boot_rank": r,
            "boot_steadied": {"guard": {"phase": "steady"}, "rank": {"status": "running"}},
            "boot_served": {"models": [data["model"]], "seconds": 1.0},
            "boot_smoke": {"json": {"choices": [{"text": "1, 2, 3"}]}},
            "boot_failure": f"rank {r['rank']} exited",
        }
        for r in plan["ranks"]
    ]
    outputs["boot report"] = "\n".join(boot_report(hosts, plan, "Count:"))
    outputs["boot undo report"] = "\n".join(boot_undo_report(hosts, [h["inventory_hostname"] for h in hosts], []))

    # the benchmark's run folder, with the identity bench.yml builds from the plan (and the plan itself)
    results = document(steady({1: 0.02, 2: 0.025}))
    results["identity"].update(
        profile=plan["source"],
        profile_hash=plan["profile_sha256"],
        shape=plan["shape"],
        model=data["model"],
        hosts=[r["host"] for r in plan["ranks"]],
        containers={r["host"]: plan["container_name"] for r in plan["ranks"]},
    )
    results["plan"] = plan
    folder = tmp_path / "run"
    original = _bench_report.write_charts
    _bench_report.write_charts = lambda summary, out_dir: []  # no PNGs: a token would not be text there anyway
    try:
        _bench_report.write_run(str(folder), results)
    finally:
        _bench_report.write_charts = original
    for name in ("results.json", "report.md"):
        outputs[name] = (folder / name).read_text(encoding="utf-8")
    assert "HF_TOKEN_PATH" in outputs["results.json"]  # the plan is there, with the path only

    leaked = [name for name, text in outputs.items() if TOKEN in text or TOKEN[3:] in text]
    assert leaked == []
    assert pathlib.Path(secret_file).read_text(encoding="utf-8").strip() == TOKEN  # the file was left as it was


CARELESS = [
    ("environment HF_TOKEN", {"shapes": {"tp3-triangle": {"environment": {"HF_TOKEN": TOKEN}}}}),
    ("environment, another name", {"shapes": {"tp3-triangle": {"environment": {"MODEL_ACCESS": TOKEN}}}}),
    ("docker -e", {"container": {"docker_run_args": ["-e", f"HF_TOKEN={TOKEN}"]}}),
    ("docker --env=", {"container": {"docker_run_args": [f"--env=HUGGING_FACE_HUB_TOKEN={TOKEN}"]}}),
    ("vllm --api-key", {"container": {"serve_args": ["--api-key", TOKEN]}}),
    ("vllm --hf-token", {"container": {"serve_args": [f"--hf-token={TOKEN}"]}}),
    ("vllm VLLM_API_KEY", {"shapes": {"tp3-triangle": {"environment": {"VLLM_API_KEY": TOKEN}}}}),
]


def _merged(data: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    for key, value in change.items():
        if isinstance(value, dict):
            data[key] = _merged(dict(data.get(key) or {}), value)
        elif isinstance(value, list):
            data[key] = [*(data.get(key) or []), *value]
        else:
            data[key] = value
    return data


@pytest.mark.parametrize("where,change", CARELESS, ids=[c[0] for c in CARELESS])
def test_a_token_put_inline_is_refused_and_never_repeated(where: str, change: dict[str, Any]) -> None:
    data = _merged(json.loads(profile_text("/etc/dgxspark/secrets/hf_token")), change)
    result = run({"content": json.dumps(data)}, TASK_VARS)
    assert result["failed"] is True, where
    assert "container.secrets" in result["msg"]
    assert f"<redacted, {len(TOKEN)} chars>" in result["msg"]
    assert TOKEN not in everything(result) and TOKEN[3:] not in everything(result)


def test_a_token_in_a_host_override_is_refused_and_never_repeated() -> None:
    hostvars = {
        **HOSTVARS,
        "spark-w1": {**HOSTVARS["spark-w1"], "dgxspark_overrides": {"environment": {"HF_TOKEN": TOKEN}}},
    }
    result = run({"content": profile_text("/etc/dgxspark/secrets/hf_token")}, {**TASK_VARS, "hostvars": hostvars})
    assert result["failed"] is True
    assert "host spark-w1: dgxspark_overrides.environment.HF_TOKEN" in result["msg"]
    assert TOKEN not in everything(result)
