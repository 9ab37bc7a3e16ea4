# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets as files (container.secrets): the field, its binds and HF_TOKEN_PATH in the plan, the refusal of
secrets given inline (without their value), and the preflight's secret-files check."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.checks import (
    FAIL,
    PASS,
    WARN,
    preflight,
    secret_files,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import (
    inline_secret,
    redact_text,
    redacted,
    secret_env_name,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, edited, read
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan import cluster

TOKEN = "hf_" + "PlantedSecretValue0123456789ab"  # 33 characters, the shape of a User Access Token
KEY = "sk-planted-api-key-0123456789"
SECRET_PATH = "/etc/dgxspark/secrets/hf_token"
SHAPE = "tp3-triangle"


def with_secrets(**edits: Any) -> dict[str, Any]:
    return edited(read(SPARK3), {"container/secrets": {"hf_token": SECRET_PATH}, **edits})


def refused(profile: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(profile, "profile.json")
    return [p.as_dict() for p in caught.value.problems]


def shown(problems: Any) -> str:
    return json.dumps(problems)


# ---------------------------------------------------------------- the field, rendered
def test_a_secret_is_a_read_only_bind_and_only_its_path_is_in_the_environment() -> None:
    plan = build_plan(validate_profile(with_secrets(), "profile.json"), SHAPE, cluster(3))
    for rank in plan["ranks"]:
        bind = f"--mount=type=bind,source={SECRET_PATH},target=/run/secrets/hf_token,readonly"
        assert bind in rank["argv"] and bind in rank["docker_run_args"]
        assert rank["environment"]["HF_TOKEN_PATH"] == "/run/secrets/hf_token"
        assert "--env" in rank["argv"] and "HF_TOKEN_PATH=/run/secrets/hf_token" in rank["argv"]
        mounts = rank["container"]["mounts"]
        assert {"type": "bind", "source": SECRET_PATH, "target": "/run/secrets/hf_token", "read_only": True} in mounts
        assert rank["container"]["env"]["HF_TOKEN_PATH"] == "/run/secrets/hf_token"


def test_another_secret_is_bound_without_a_variable() -> None:
    profile = edited(read(SPARK3), {"container/secrets": {"proxy.key": "/etc/dgxspark/secrets/proxy.key"}})
    rank = build_plan(validate_profile(profile, "profile.json"), SHAPE, cluster(3))["ranks"][0]
    assert any(m["target"] == "/run/secrets/proxy.key" and m["read_only"] for m in rank["container"]["mounts"])
    assert "HF_TOKEN_PATH" not in rank["environment"]


def test_a_profile_without_secrets_keeps_its_digest() -> None:
    """No default is filled in: a profile that names no secret hashes as before (releases compare the hash)."""
    assert "secrets" not in validate_profile(read(SPARK3), "p").data["container"]


@pytest.mark.parametrize(
    "secrets,fragment",
    [
        ({"hf_token": "etc/hf_token"}, "an absolute path"),
        ({"hf_token": "/etc/../root/hf_token"}, "an absolute path"),
        ({"hf_token": "/etc/./hf_token"}, "an absolute path"),
        ({"hf_token": "/etc/hf token"}, "an absolute path"),
        ({"hf_token": "/etc/hf_token;reboot"}, "an absolute path"),
        ({"hf_token": "/etc/hf,token"}, "an absolute path"),
        ({"hf_token": "/etc/hf:token"}, "an absolute path"),
        ({"hf_token": "/etc/$HOME/t"}, "an absolute path"),
        ({"hf_token": "/etc/'t'"}, "an absolute path"),
        ({"hf_token": "/etc/hf_token/"}, "an absolute path"),
        ({"../x": "/etc/x"}, "invalid key"),
        ({"-x": "/etc/x"}, "invalid key"),
        ({"a/b": "/etc/x"}, "invalid key"),
        ({".hidden": "/etc/x"}, "invalid key"),
        ({"hf_token": 1}, "wrong type"),
    ],
)
def test_secret_names_and_paths_have_allow_lists(secrets: dict[str, Any], fragment: str) -> None:
    problems = refused(edited(read(SPARK3), {"container/secrets": secrets}))
    assert any(fragment in p["text"] and "$.container.secrets" in p["where"] for p in problems), problems


def test_a_secret_bound_where_another_mount_is_refused() -> None:
    profile = with_secrets(**{"container/docker_run_args": [*read(SPARK3)["container"]["docker_run_args"]]})
    profile["container"]["docker_run_args"].append("--volume=/srv/token:/run/secrets/hf_token:ro")
    problems = refused(profile)
    assert any("mounted twice" in p["text"] and p["where"] == "$.container.secrets.hf_token" for p in problems)


def test_hf_token_path_is_the_secrets_to_set() -> None:
    profile = with_secrets(**{"shapes/tp3-triangle/environment/HF_TOKEN_PATH": "/tmp/elsewhere"})
    problems = refused(profile)
    assert [p["where"] for p in problems] == ["$.shapes.tp3-triangle.environment.HF_TOKEN_PATH"]
    # without a hf_token secret the variable is a path like any other
    alone = edited(read(SPARK3), {"shapes/tp3-triangle/environment/HF_TOKEN_PATH": "/models/token"})
    assert validate_profile(alone, "p")


def test_hf_token_without_a_value_is_allowed() -> None:
    profile = with_secrets(**{"container/serve_args": [*read(SPARK3)["container"].get("serve_args", []), "--hf-token"]})
    assert validate_profile(profile, "p")


# ---------------------------------------------------------------- secrets given inline: refused, never repeated
INLINE = [
    ("shapes/tp3-triangle/environment/HF_TOKEN", TOKEN, "$.shapes.tp3-triangle.environment.HF_TOKEN"),
    ("shapes/tp3-triangle/environment/HUGGING_FACE_HUB_TOKEN", TOKEN, "environment.HUGGING_FACE_HUB_TOKEN"),
    ("shapes/tp3-triangle/environment/VLLM_API_KEY", KEY, "environment.VLLM_API_KEY"),
    ("shapes/tp3-triangle/environment/OPENAI_API_KEY", KEY, "environment.OPENAI_API_KEY"),
    ("shapes/tp3-triangle/environment/DB_PASSWORD", KEY, "environment.DB_PASSWORD"),
    ("shapes/tp3-triangle/environment/AWS_SECRET_ACCESS_KEY", KEY, "environment.AWS_SECRET_ACCESS_KEY"),
    ("shapes/tp3-triangle/environment/GITHUB_TOKEN", KEY, "environment.GITHUB_TOKEN"),
    ("shapes/tp3-triangle/environment/INNOCENT_NAME", TOKEN, "environment.INNOCENT_NAME"),
]


@pytest.mark.parametrize("key,value,where", INLINE)
def test_a_secret_in_the_environment_is_refused_without_its_value(key: str, value: str, where: str) -> None:
    problems = refused(edited(read(SPARK3), {key: value}))
    mine = [p for p in problems if p["where"].endswith(where)]
    assert mine and "container.secrets" in mine[0]["hint"]
    name = key.rsplit("/", 1)[1]
    assert mine[0]["found"] == f"{name}=<redacted, {len(value)} chars>"
    assert value not in shown(problems)


@pytest.mark.parametrize(
    "args",
    [
        ["-e", f"HF_TOKEN={TOKEN}"],
        [f"--env=HF_TOKEN={TOKEN}"],
        ["--env", f"HUGGING_FACE_HUB_TOKEN={TOKEN}"],
        ["-e", f"SOME_VAR={TOKEN}"],
        [f"-eHF_TOKEN={TOKEN}"],
        [f"-e=HF_TOKEN={TOKEN}", "--ipc=host"],  # pflag's -e=VALUE: the next element is not its value
        [f"--label=leak={TOKEN}"],
    ],
)
def test_a_secret_in_docker_run_args_is_refused_without_its_value(args: list[str]) -> None:
    profile = read(SPARK3)
    profile["container"]["docker_run_args"] += args
    problems = refused(profile)
    index = len(read(SPARK3)["container"]["docker_run_args"])
    mine = [p for p in problems if p["where"] == f"$.container.docker_run_args[{index}]"]
    assert mine and "a secret in a docker run option" in mine[0]["message"], problems
    assert f"<redacted, {len(TOKEN)} chars>" in mine[0]["found"]
    assert TOKEN not in shown(problems)


def test_an_env_option_naming_a_secret_without_a_value_is_refused() -> None:
    profile = read(SPARK3)
    profile["container"]["docker_run_args"] += ["-e", "HF_TOKEN"]
    problems = refused(profile)
    assert any("a secret in a docker run option" in p["message"] and p["found"] == "-e HF_TOKEN" for p in problems)


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--api-key", KEY], "--api-key"),
        ([f"--api-key={KEY}"], "--api-key"),
        (["--api-key", KEY, "second-key"], "--api-key"),
        (["--hf-token", TOKEN], "--hf-token"),
        ([f"--hf-token={TOKEN}"], "--hf-token"),
        (["--tokenizer", TOKEN], "--tokenizer"),
    ],
)
def test_a_secret_in_serve_args_is_refused_without_its_value(args: list[str], flag: str) -> None:
    profile = read(SPARK3)
    profile["container"]["serve_args"] = [*profile["container"].get("serve_args", []), *args]
    problems = refused(profile)
    mine = [p for p in problems if "in vllm serve's arguments" in p["message"]]
    assert mine and mine[0]["found"].startswith(f"{flag}=<redacted, "), problems
    assert "container.secrets" in mine[0]["hint"]
    for value in args[1:] or [args[0].split("=", 1)[1]]:
        assert value not in shown(problems)


def test_a_host_override_with_a_secret_is_refused_without_its_value() -> None:
    profile = validate_profile(read(SPARK3), "p")
    hosts = cluster(
        3,
        **{
            "spark-w1": {"overrides": {"environment": {"HF_TOKEN": TOKEN}}},
            "spark-w2": {"overrides": {"container": {"docker_run_args": ["-e", f"X={TOKEN}"]}}},
        },
    )
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, SHAPE, hosts)
    problems = [p.as_dict() for p in caught.value.problems]
    wheres = {p["where"] for p in problems}
    assert "host spark-w1: dgxspark_overrides.environment.HF_TOKEN" in wheres
    assert "host spark-w2: dgxspark_overrides.container.docker_run_args[0]" in wheres
    assert TOKEN not in shown(problems) and TOKEN not in str(caught.value)


def test_names_and_redaction() -> None:
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "X_API_KEY", "API_KEY", "MY_SECRET", "PASSWORD", "TOKEN"):
        assert secret_env_name(name, "v"), name
    for name in ("HF_TOKEN_PATH", "NCCL_IB_HCA", "VLLM_MAX_TOKENS", "MAX_TOKENS", "KEYBOARD"):
        assert not secret_env_name(name, "/run/secrets/x"), name
    assert secret_env_name("MY_SECRET_FILE", "inline-value") and not secret_env_name("MY_SECRET_FILE", "/run/x")
    assert redact_text(f"HF_TOKEN={TOKEN}") == f"HF_TOKEN={redacted(TOKEN)}"
    assert redact_text(redact_text(f"HF_TOKEN={TOKEN}")) == f"HF_TOKEN={redacted(TOKEN)}"  # idempotent
    assert redact_text(f"--api-key {KEY}") == f"--api-key {redacted(KEY)}"
    assert redact_text(f"a {TOKEN} b") == f"a {redacted(TOKEN)} b"
    assert not inline_secret("HF_TOKEN_PATH=/run/secrets/hf_token") and inline_secret(TOKEN)


# ---------------------------------------------------------------- the preflight's secret-files
def node(paths: dict[str, dict[str, Any]], uid: int = 0) -> dict[str, Any]:
    return {"secrets": {"uid": uid, "paths": paths}}


def stat(**changes: Any) -> dict[str, Any]:
    return {"exists": True, "type": "file", "mode": "0600", "owner": 0, "group": 0, "error": None, **changes}


SECRETS = {"hf_token": SECRET_PATH}


def test_secret_files_pass_for_root_0600_and_0400() -> None:
    assert secret_files("n1", node({SECRET_PATH: stat()}), SECRETS)["status"] == PASS
    assert secret_files("n1", node({SECRET_PATH: stat(mode="0400")}), SECRETS)["status"] == PASS


def test_a_secret_of_the_ssh_user_passes_without_become() -> None:
    line = secret_files("n1", node({SECRET_PATH: stat(owner=1000)}, uid=1000), SECRETS)
    assert line["status"] == PASS and "root or uid 1000" in line["message"]


@pytest.mark.parametrize(
    "facts,fragment",
    [
        (stat(exists=False, type=None, mode=None, owner=None), "does not exist"),
        (stat(mode="0644"), "has mode 0644, more than 0600"),
        (stat(mode="0640"), "has mode 0640"),
        (stat(mode="0700"), "has mode 0700"),
        (stat(owner=1000), "is owned by uid 1000, not uid 0"),
        (stat(type="directory", mode="0700"), "is a directory, not a regular file"),
        (stat(exists=None, type=None, mode=None, owner=None, error="Permission denied"), "cannot be looked at"),
    ],
)
def test_secret_files_fail_naming_the_node_and_the_path(facts: dict[str, Any], fragment: str) -> None:
    line = secret_files("spark-w1", node({SECRET_PATH: facts}), SECRETS)
    assert line["status"] == FAIL and line["host"] == "spark-w1" and line["check"] == "secret-files"
    assert f"hf_token ({SECRET_PATH})" in line["message"] and fragment in line["message"], line


def test_the_api_key_must_be_readable_by_the_login_the_boot_reads_it_as() -> None:
    """The boot's wait and smoke completion read the API's key on the head, as the login: a root file passes a
    root login, fails a non-root one; the login's own file passes it."""
    key = {"vllm_api_key": "/etc/dgxspark/api_key"}
    assert secret_files("n1", node({"/etc/dgxspark/api_key": stat()}), key)["status"] == PASS
    line = secret_files("n1", node({"/etc/dgxspark/api_key": stat()}, uid=1000), key)
    assert line["status"] == FAIL and "read by the boot's wait and smoke completion as uid 1000" in line["message"]
    assert secret_files("n1", node({"/etc/dgxspark/api_key": stat(owner=1000)}, uid=1000), key)["status"] == PASS
    # another secret is only bound into the rank (by root's dockerd): root's file is fine for a non-root login
    assert secret_files("n1", node({SECRET_PATH: stat()}, uid=1000), SECRETS)["status"] == PASS


def test_secret_files_without_the_section_warn() -> None:
    assert secret_files("n1", {"memory": {}}, SECRETS)["status"] == WARN


def test_the_preflight_checks_secrets_on_every_rank_only_when_the_profile_names_them() -> None:
    profile = validate_profile(with_secrets(), "p")
    plan = build_plan(profile, SHAPE, cluster(3))
    facts = {
        r["host"]: {"memory": {"mem_available_bytes": 200 * 1024**3}, **node({SECRET_PATH: stat()})}
        for r in plan["ranks"]
    }
    facts["spark-w2"] = {**facts["spark-w2"], **node({SECRET_PATH: stat(mode="0644")})}
    lines = [line for line in preflight(facts, plan, profile.data)["lines"] if line["check"] == "secret-files"]
    assert [(line["host"], line["status"]) for line in lines] == [
        ("spark-head", PASS),
        ("spark-w1", PASS),
        ("spark-w2", FAIL),
    ]
    plain = validate_profile(read(SPARK3), "p")
    plain_plan = build_plan(plain, SHAPE, cluster(3))
    assert not [line for line in preflight(facts, plain_plan, plain.data)["lines"] if line["check"] == "secret-files"]
    skipped = preflight(facts, plan, profile.data, skip=["secret-files"])["lines"]
    assert {line["status"] for line in skipped if line["check"] == "secret-files"} == {"SKIP"}


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("HF_TOKEN", "x", True),
        ("GITHUB_TOKEN", "x", True),
        ("TOKEN", "x", True),
        ("HF_TOKEN_PATH", "/run/secrets/hf_token", False),
        ("MAX_TOKENS", "8", False),
        # a size per token (the sim engine's KV-cache override in tests/sim), not a token
        ("SIM_ENGINE_KV_BYTES_PER_TOKEN", "4096", False),
        ("VLLM_API_KEY", "x", True),
        ("DB_PASSWORD", "x", True),
    ],
)
def test_which_names_hold_a_secret(name: str, value: str, secret: bool) -> None:
    assert secret_env_name(name, value) is secret
