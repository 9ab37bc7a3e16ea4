# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one redaction (plugin_utils/profile/secrets.py: redact_text, redact_argv, redact), rule by rule, each with
what it hides and what it leaves alone; then every place that prints through it: problems, the plan's scan of a
rank's whole argv, the redact filter (plan.yml's argv, the undo's log tails) and rank_container's result (issue 26)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.filter.serving import FilterModule
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import Problem, ProfileError, format_problems
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.secrets import (
    argv_secrets,
    redact,
    redact_argv,
    redact_text,
    redacted,
)
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, read
from ansible_collections.dgxspark.cluster.tests.unit.plugins.plugin_utils.test__plan import cluster

CANARY = "CanaryRedact5e1b77"
HIDDEN = redacted(CANARY)
REDACT = FilterModule().filters()["redact"]

# rule -> (text, what it shows): each rule's positive cases
HIDES: dict[str, list[tuple[str, str]]] = {
    "a secret's name, every spelling of an environment option": [
        (f"VLLM_API_KEY={CANARY}", f"VLLM_API_KEY={HIDDEN}"),
        (f"-e VLLM_API_KEY={CANARY}", f"-e VLLM_API_KEY={HIDDEN}"),
        (f"-eVLLM_API_KEY={CANARY}", f"-eVLLM_API_KEY={HIDDEN}"),
        (f"-e=VLLM_API_KEY={CANARY}", f"-e=VLLM_API_KEY={HIDDEN}"),
        (f"--env VLLM_API_KEY={CANARY}", f"--env VLLM_API_KEY={HIDDEN}"),
        (f"--env=VLLM_API_KEY={CANARY}", f"--env=VLLM_API_KEY={HIDDEN}"),
        (f"-eHF_AUTH={CANARY}", f"-eHF_AUTH={HIDDEN}"),
        (f"-teHF_AUTH={CANARY}", f"-teHF_AUTH={HIDDEN}"),  # glued to other short options
        (f"-xVLLM_API_KEY={CANARY}", f"-xVLLM_API_KEY={HIDDEN}"),  # an unknown option: refused as one, still hidden
        (f"KEY_ID={CANARY}", f"KEY_ID={HIDDEN}"),
        (f"MY_TOKEN_VALUE={CANARY}", f"MY_TOKEN_VALUE={HIDDEN}"),
        (f"db_password={CANARY}", f"db_password={HIDDEN}"),
    ],
    "a --log-opt or --label key": [
        (f"--log-opt=splunk-token={CANARY}", f"--log-opt=splunk-token={HIDDEN}"),
        (f"--log-opt splunk-token={CANARY}", f"--log-opt splunk-token={HIDDEN}"),
        (f"awslogs-credentials={CANARY}", f"awslogs-credentials={HIDDEN}"),
        (f"--label=com.example.auth={CANARY}", f"--label=com.example.auth={HIDDEN}"),
    ],
    "a secret flag's value": [
        (f"--api-key {CANARY}", f"--api-key {HIDDEN}"),
        (f"--api-key={CANARY}", f"--api-key={HIDDEN}"),
        (f"--api_key={CANARY}", f"--api_key={HIDDEN}"),  # vLLM reads _ for -
        (f"--api-k {CANARY}", f"--api-k {HIDDEN}"),  # and any prefix from the shortest unique one
        (f"--hf-token={CANARY}", f"--hf-token={HIDDEN}"),
        (f"vllm serve m --api-key {CANARY} --port 8000", f"vllm serve m --api-key {HIDDEN} --port 8000"),
    ],
    "another long option that takes a secret": [
        (f"--token={CANARY}", f"--token={HIDDEN}"),
        (f"--token {CANARY}", f"--token {HIDDEN}"),
        (f"--db-password={CANARY}", f"--db-password={HIDDEN}"),
        (f"--auth-header={CANARY}", f"--auth-header={HIDDEN}"),
    ],
    "a URL's userinfo": [
        (f"https://user:{CANARY}@proxy.example:3128", f"https://user:{HIDDEN}@proxy.example:3128"),
        (f"HTTPS_PROXY=http://u:{CANARY}@proxy", f"HTTPS_PROXY=http://u:{HIDDEN}@proxy"),
        (f"postgres://app:{CANARY}@db/app", f"postgres://app:{HIDDEN}@db/app"),
        (f"https://{CANARY}@github.com/x.git", f"https://{HIDDEN}@github.com/x.git"),  # a token as the user
    ],
    "an HTTP credential": [
        (f"curl -H 'Authorization: Bearer {CANARY}' x", f"curl -H 'Authorization: Bearer {HIDDEN}' x"),
        (f"curl -H 'Authorization: Token {CANARY}' x", f"curl -H 'Authorization: {redacted('Token ' + CANARY)}' x"),
        (f'curl -H "X-Api-Key: {CANARY}" x', f'curl -H "X-Api-Key: {HIDDEN}" x'),
        (f"Proxy-Authorization: Basic {CANARY}", f"Proxy-Authorization: {redacted('Basic ' + CANARY)}"),
        (f"wget --header=x bearer {CANARY}", f"wget --header=x bearer {HIDDEN}"),
    ],
    "a Hugging Face token anywhere": [
        ("a hf_" + "PlantedSecretValue0123456789ab b", "a " + redacted("hf_PlantedSecretValue0123456789ab") + " b"),
    ],
}
# rule -> texts it leaves alone: each rule's negative cases
LEAVES: dict[str, list[str]] = {
    "a secret's name, every spelling of an environment option": [
        "HF_TOKEN_PATH=/run/secrets/hf_token",  # names a file
        "MAX_TOKENS=8",
        "NCCL_IB_PKEY=0",
        "KEYBOARD=us",
        "GIT_AUTHOR_NAME=me",
        "-eNCCL_DEBUG=INFO",
        "VLLM_API_KEY=",  # no value
        '-c VLLM_API_KEY="$(cat /run/secrets/vllm_api_key)"',  # the head's wrapper names a file only
    ],
    "a --log-opt or --label key": [
        "--log-opt=max-size=10m",
        "--label=dgxspark.rank=0",
        "--mount=type=bind,source=/etc/dgxspark/secrets/hf_token,target=/run/secrets/hf_token,readonly",
    ],
    "a secret flag's value": ["--api-key", "--api-key --port 8000"],
    "another long option that takes a secret": [
        "--long-prefill-token-threshold 128",  # a number
        "--ssl-keyfile /run/secrets/tls_key",  # a path
        "--allow-credentials --port 8000",  # the next option
        "--allow-credentials=true",
        "--ssl-keyfile is rendered by the collection",  # prose: a lowercase word after a space
        "--max-num-batched-tokens=6144",
        "--ssl-keyfile=/run/secrets/tls_key",  # a long option's path, written with =
    ],
    "a URL's userinfo": [
        "https://github.com/christopherowen/spark-ds41f.git",
        "nvcr.io/nvidia/vllm@sha256:" + "a" * 64,
        "user@host",
    ],
    "an HTTP credential": [
        "curl -H 'Accept: application/json' x",
        "a bearer token is refused",  # prose
        "host spark-w1: dgxspark_overrides.container: bad",
    ],
    "a Hugging Face token anywhere": ["hf_token", "/run/secrets/hf_token", "hf_short"],
}


@pytest.mark.parametrize(("rule", "text", "shown"), [(r, t, s) for r, cases in HIDES.items() for t, s in cases])
def test_each_rule_hides(rule: str, text: str, shown: str) -> None:
    assert redact_text(text) == shown, rule
    assert CANARY not in redact_text(text)
    assert redact_text(shown) == shown  # idempotent: what is shown is left as it is


@pytest.mark.parametrize(("rule", "text"), [(r, t) for r, cases in LEAVES.items() for t in cases])
def test_each_rule_leaves_alone(rule: str, text: str) -> None:
    assert redact_text(text) == text, rule


def test_every_rule_has_both_kinds_of_case() -> None:
    assert set(HIDES) == set(LEAVES)


# ---------------------------------------------------------------- an argv: a value is the element after its flag
ARGV = [
    (["vllm", "serve", "--api-key", CANARY], ["vllm", "serve", "--api-key", HIDDEN]),
    (["--hf-token", CANARY, "--port", "8000"], ["--hf-token", HIDDEN, "--port", "8000"]),
    (["--token", CANARY], ["--token", HIDDEN]),
    (["-e", f"HF_AUTH={CANARY}"], ["-e", f"HF_AUTH={HIDDEN}"]),
    (["--log-opt", f"splunk-token={CANARY}"], ["--log-opt", f"splunk-token={HIDDEN}"]),
    (["--health-cmd", f"curl -H 'X-Api-Key: {CANARY}'"], ["--health-cmd", f"curl -H 'X-Api-Key: {HIDDEN}'"]),
]
ARGV_LEFT = [
    ["--api-key", "--port", "8000"],
    ["--long-prefill-token-threshold", "128"],
    ["--ssl-keyfile", "/run/secrets/tls_key"],
    ["--long-prefill-token-threshold=128", "deepseek-ai/DeepSeek-V4.1-Flash-1017"],  # a flag with its value takes none
    ["--allow-credentials", "--enable-auto-tool-choice"],
]


@pytest.mark.parametrize(("argv", "shown"), ARGV)
def test_an_argv_hides_the_value_after_its_flag(argv: list[str], shown: list[str]) -> None:
    assert redact_argv(argv) == shown
    assert argv_secrets(argv) == [i for i, (a, b) in enumerate(zip(argv, shown, strict=True)) if a != b]
    assert redact(argv) == shown


@pytest.mark.parametrize("argv", ARGV_LEFT)
def test_an_argv_without_a_secret_is_left_alone(argv: list[str]) -> None:
    assert redact_argv(argv) == argv and argv_secrets(argv) == []
    assert redact(argv) is argv  # the same object: a module's result keeps its own values


def test_a_mapping_hides_a_secret_names_value_whole() -> None:
    env = {"HF_AUTH": CANARY, "HF_TOKEN_PATH": "/run/secrets/hf_token", "NCCL_DEBUG": "INFO", "KEY": None}
    shown = redact({"container": {"Config": {"Env": [f"HF_AUTH={CANARY}"]}}, "env": env})
    assert shown["env"] == {**env, "HF_AUTH": HIDDEN}
    assert shown["container"]["Config"]["Env"] == [f"HF_AUTH={HIDDEN}"]
    nothing = {"env": {"NCCL_DEBUG": "INFO"}, "changed": True}
    assert redact(nothing) is nothing


# ---------------------------------------------------------------- every problem goes through it
def test_a_problem_never_shows_a_secret_wherever_it_is_written() -> None:
    problem = Problem(
        "$.x",
        f"message --api-key={CANARY}",
        found=["--token", CANARY, f"https://u:{CANARY}@h"],
        expected="",
        hint=f"Authorization: Bearer {CANARY}",
    )
    assert CANARY not in problem.render() and CANARY not in json.dumps(problem.as_dict())
    assert CANARY not in format_problems([problem]) and CANARY not in str(ProfileError([problem]))


# ---------------------------------------------------------------- refused where given, never printed
def refusal(profile: dict[str, Any]) -> list[Problem]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(profile, "p.json")
    shown = json.dumps([p.as_dict() for p in caught.value.problems + caught.value.warnings]) + str(caught.value)
    assert CANARY not in shown
    return caught.value.problems


@pytest.mark.parametrize(
    ("field", "value", "where", "said"),
    [
        # an option where a value belongs is refused first (issue 26's allow-lists), and never shown either
        ("entrypoint", ["vllm", f"--api-key={CANARY}"], "$.container.entrypoint[1]", "not starting with -"),
        ("entrypoint", ["vllm", "--api-key", CANARY], "$.container.entrypoint[1]", "not starting with -"),
        ("model_path", f"--api-key={CANARY}", "$.container.model_path", "not starting with -"),
        ("entrypoint", ["env", f"VLLM_API_KEY={CANARY}", "vllm"], "$.container.entrypoint[1]", "a secret"),
        ("model_path", f"https://u:{CANARY}@hub.example/model", "$.container.model_path", "a secret"),
    ],
)
def test_a_secret_in_the_engines_command_is_refused(field: str, value: Any, where: str, said: str) -> None:
    profile = read(SPARK3)
    profile["container"][field] = value
    problems = refusal(profile)  # the canary is in no problem, warning or message
    mine = [p for p in problems if p.where == where]
    assert mine, [p.render() for p in problems]
    if said == "a secret":
        assert "a secret in the engine's command" in mine[0].message, [p.render() for p in problems]
        assert "container.secrets" in mine[0].hint
    else:
        assert said in mine[0].expected, [p.render() for p in problems]


@pytest.mark.parametrize(
    "env",
    [
        {"HF_AUTH": CANARY},
        {"HTTPS_PROXY": f"http://proxyuser:{CANARY}@proxy.example:3128"},
        {"DATABASE_URL": f"postgres://app:{CANARY}@db/app"},
        {"EXTRA_HEADERS": f"Authorization: Bearer {CANARY}"},
    ],
)
def test_a_secret_value_in_the_environment_is_refused_whatever_its_name(env: dict[str, str]) -> None:
    profile = read(SPARK3)
    profile["shapes"]["tp3-triangle"]["environment"] = env
    (name,) = env
    problems = refusal(profile)
    assert [p.where for p in problems] == [f"$.shapes.tp3-triangle.environment.{name}"]
    assert problems[0].found == f"{name}={redacted(env[name])}" and "container.secrets" in problems[0].hint


@pytest.mark.parametrize(
    "args",
    [
        ["--log-driver=splunk", f"--log-opt=splunk-token={CANARY}"],
        ["--log-driver=splunk", "--log-opt", f"splunk-token={CANARY}"],
        [f"--health-cmd=curl -H 'Authorization: Bearer {CANARY}' localhost"],
        ["-e", f"HTTPS_PROXY=http://u:{CANARY}@proxy"],
        [f"-eVLLM_API_KEY=sk-{CANARY}"],
        [f"-xVLLM_API_KEY=sk-{CANARY}"],  # not a docker run option: refused as a secret first, never shown
        [f"--envVLLM_API_KEY=sk-{CANARY}"],
        [f"-eVLLM_API_KEY sk-{CANARY}"],  # a value after a space, in one element
        ["-e", f"VLLM_API_KEY sk-{CANARY}"],
    ],
)
def test_a_secret_in_a_docker_option_is_refused(args: list[str]) -> None:
    profile = read(SPARK3)
    profile["container"]["docker_run_args"] += args
    problems = refusal(profile)
    assert any("a secret in a docker run option" in p.message for p in problems), [p.render() for p in problems]


def test_the_plan_scans_each_ranks_whole_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever reached a rank's argv without a field's own check (here: an image reference no check reads as a
    secret, made to pass them), the plan's last look at the rendered argv refuses it, naming the host."""
    profile = validate_profile(read(SPARK3), "p.json")
    profile.data["container"]["image"] = f"https://u:{CANARY}@registry.example/img:1"
    with pytest.raises(ProfileError) as caught:
        build_plan(profile, "tp3-triangle", cluster(3))
    problems = caught.value.problems
    assert {p.where.split(":")[0] for p in problems} == {"host spark-head", "host spark-w1", "host spark-w2"}
    assert all("a secret in the rank's rendered argv" in p.message for p in problems)
    assert CANARY not in str(caught.value) and CANARY not in json.dumps([p.as_dict() for p in problems])


def test_a_shipped_plan_has_nothing_to_hide() -> None:
    plan = build_plan(validate_profile(read(SPARK3), "p.json"), "tp3-triangle", cluster(3))
    for rank in plan["ranks"]:
        assert redact_argv(rank["argv"]) == rank["argv"]


# ---------------------------------------------------------------- what playbooks print
def test_the_filter_is_the_one_redaction() -> None:
    assert REDACT is _secrets.redact or REDACT.__name__ == "redact"
    assert REDACT(["docker", "run", "--env", f"HF_AUTH={CANARY}"]) == ["docker", "run", "--env", f"HF_AUTH={HIDDEN}"]
    assert REDACT(f"INFO args: api_key={CANARY}") == f"INFO args: api_key={HIDDEN}"  # a log tail's line


def test_rank_container_shows_its_result_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible_collections.dgxspark.cluster.plugins.action.rank_container import ActionModule

    answer = {
        "changed": True,
        "container": {"Config": {"Env": [f"HF_AUTH={CANARY}"], "Cmd": ["serve", "--api-key", CANARY]}},
        "diff": {"before": {"env": {"HF_AUTH": "old"}}, "after": {"env": {"HF_AUTH": CANARY}}},
        "invocation": {"module_args": {"env": {"HF_AUTH": CANARY}, "name": "vllm"}},
    }
    action = ActionModule.__new__(ActionModule)
    monkeypatch.setattr(action, "_execute_module", lambda **_kwargs: answer, raising=False)
    result = action.act({"params": {"name": "vllm", "image": "x:1"}, "state": "created", "recreate": False}, {}, {})
    assert CANARY not in json.dumps(result) and result["changed"] is True
    assert result["container"]["Config"]["Cmd"] == ["serve", "--api-key", HIDDEN]
