# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule says which environment variables hold a secret (module_utils/_secret_names.py), and every part that
asks uses it: the plan refuses by it (less a path in a *_PATH/*_FILE variable), the preflight masks by it,
node_facts redacts by it, and the vllm_container role's no_log filter is the plan's check."""

from __future__ import annotations

import pathlib
import re
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.filter.serving import FilterModule
from ansible_collections.dgxspark.cluster.plugins.module_utils import _docker_engine, _secret_names
from ansible_collections.dgxspark.cluster.plugins.module_utils._docker_engine import REDACTED, redacted_environment
from ansible_collections.dgxspark.cluster.plugins.module_utils._secret_names import SECRET_NAME, is_secret_name
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import checks as _preflight
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import ROOT, SPARK3, read

SECRET_ENV_NAMES = FilterModule().filters()["secret_env_names"]

# name -> whether it holds a secret (the one rule, whatever the value)
NAMES = {
    "HF_TOKEN": True,
    "HUGGING_FACE_HUB_TOKEN": True,
    "hf_token": True,  # case aside
    "GITHUB_TOKEN": True,
    "GITHUBTOKEN": True,
    "TOKEN": True,
    "TOKEN2": True,
    "UPPER_TOKEN": True,  # ends in PER_TOKEN, but PER is not a word of it
    "HF_TOKEN_PATH": True,  # a secret's name; the plan lets it name a file (below)
    "OPENAI_API_KEY": True,
    "VLLM_API_KEY": True,
    "API_KEY": True,
    "APIKEY": True,
    "AWS_SECRET_ACCESS_KEY": True,
    "AWS_ACCESS_KEY_ID": True,
    "ACCESS_KEY": True,
    "PRIVATE_KEY": True,
    "SSH_KEY": True,
    "KEY": True,
    "DB_PASSWORD": True,
    "MY_PASSWD": True,
    "GPG_PASSPHRASE": True,
    "X_SECRET_Y": True,
    "MY_SECRET_FILE": True,
    "CREDENTIALS_FILE": True,
    "GOOGLE_APPLICATION_CREDENTIALS": True,
    "KEY_ID": True,  # KEY at the start
    "SSH_KEY_DATA": True,  # KEY in the middle
    "SIGNINGKEY": True,  # KEY glued to another word
    "MONKEY_COUNT": True,  # decided: the rule knows no English; rename such a variable
    "TOKEN_ID": True,
    "AUTHTOKENVALUE": True,
    "HF_AUTH": True,
    "AUTH_HEADER": True,
    "BASICAUTH": True,
    "PROXY_AUTHORIZATION": True,
    "SSL_PKEY": True,  # a private key: only InfiniBand's partition key (IB_PKEY) is not
    # not secrets
    "SIM_ENGINE_KV_BYTES_PER_TOKEN": False,  # a size per token
    "X_PER_TOKEN_LIMIT": False,
    "MAX_TOKENS": False,
    "VLLM_MAX_TOKENS": False,
    "SIM_ENGINE_PREFILL_TOKENS_PER_S": False,
    "TOKENIZERS_PARALLELISM": False,
    "NCCL_IB_HCA": False,
    "NCCL_IB_PKEY": False,  # an InfiniBand partition key index
    "KEYBOARD": False,
    "UCX_IB_PKEY": False,
    "GIT_AUTHOR_NAME": False,  # AUTHOR as a word
    "AUTHORS": False,
    "SIM_ENGINE_FILLER_TOKENS": False,
    "NCCL_NVLS_ENABLE": False,
    "VLLM_HOST_IP": False,
    "PYTHONPATH": False,
    "CUDA_VISIBLE_DEVICES": False,
}
# Each word of the rule, at a name's start, in its middle, at its end, glued to other letters and in lower case: a
# rule narrowed to one place (KEY at the end only, say) fails here, not only in the security doc's test.
WORDS = ["TOKEN", "KEY", "AUTH", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "PRIVATE"]
PLACES = {
    "start": "{}_ID",
    "middle": "MY_{}_VALUE",
    "end": "MY_{}",
    "alone": "{}",
    "glued start": "{}VALUE",
    "glued middle": "MY{}VALUE",
    "glued end": "MY{}",
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("word", WORDS)
def test_each_word_anywhere_in_a_name(word: str, place: str) -> None:
    name = PLACES[place].format(word)
    assert is_secret_name(name), name
    assert is_secret_name(name.lower()), name.lower()


# The exceptions, each with its neighbour that is a secret again: an exception that grew would fail the neighbour.
EXCEPTIONS = [
    ("MAX_TOKENS", "MAX_TOKEN"),  # a count of tokens; one token is a secret
    ("TOKENIZERS_PARALLELISM", "TOKENIZE_TOKEN"),
    ("SIM_ENGINE_KV_BYTES_PER_TOKEN", "SUPER_TOKEN"),  # a count per token; PER must be its own word
    ("PER_TOKEN_LIMIT", "HYPER_TOKEN_LIMIT"),
    ("NCCL_IB_PKEY", "NCCL_PKEY"),  # InfiniBand's partition key index, not any PKEY
    ("KEYBOARD", "KEYBOARD_KEY"),
    ("GIT_AUTHOR_NAME", "GIT_AUTHORIZATION"),  # AUTHOR as a word; AUTHORIZATION is a credential
    ("AUTHORS", "AUTHORSHIP_TOKEN"),
]


@pytest.mark.parametrize(("harmless", "secret"), EXCEPTIONS)
def test_each_exception_and_its_neighbour(harmless: str, secret: str) -> None:
    assert not is_secret_name(harmless), harmless
    assert is_secret_name(secret), secret


# name, value -> whether the plan refuses it: the rule, less a *_PATH/*_FILE variable naming an absolute path
REFUSED = [
    ("HF_TOKEN_PATH", "/run/secrets/hf_token", False),
    ("HF_TOKEN_PATH", "hf_token", True),
    ("CREDENTIALS_FILE", "/etc/dgxspark/secrets/creds", False),
    ("MY_SECRET_FILE", "inline-value", True),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/etc/gcp/service-account.json", False),
    ("GOOGLE_APPLICATION_CREDENTIALS", '{"type": "service_account"}', True),
    ("HF_TOKEN", "/run/secrets/hf_token", True),  # not a variable that names a file
    ("SIM_ENGINE_KV_BYTES_PER_TOKEN", "4096", False),
    ("MAX_TOKENS", "8", False),
]


@pytest.mark.parametrize(("name", "secret"), NAMES.items())
def test_the_one_rule(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
    assert bool(SECRET_NAME.search(name)) is secret
    assert _secrets.secret_env_name(name, "v") is secret  # a value that is no path: the plan refuses by the rule


@pytest.mark.parametrize(("name", "value", "refused"), REFUSED)
def test_the_plans_one_exception_a_variable_naming_a_file(name: str, value: str, refused: bool) -> None:
    assert _secrets.secret_env_name(name, value) is refused
    assert is_secret_name(name) or not refused  # the exception only ever lets a secret's name pass


# The three rules the one replaced, each matching more than the one before it, kept here to show what changed.
OLD_PLAN = re.compile(r"(?:^|(?<!PER)_)TOKEN$|(?:^|_)API_?KEY$|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
OLD_PREFLIGHT = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|(?:^|_)(?:API_?|ACCESS_?|PRIVATE_?)?KEY(?:_|$)", re.IGNORECASE
)
OLD_NODE = re.compile(r"TOKEN|SECRET|PASSW|PRIVATE|CREDENTIAL|API_?KEY|ACCESS_?KEY", re.IGNORECASE)
# Matched by an old redaction rule, deliberately not by the one: counts and tokenizers, never secrets.
NOT_SECRETS = {
    "SIM_ENGINE_KV_BYTES_PER_TOKEN",
    "X_PER_TOKEN_LIMIT",
    "MAX_TOKENS",
    "VLLM_MAX_TOKENS",
    "SIM_ENGINE_PREFILL_TOKENS_PER_S",
    "TOKENIZERS_PARALLELISM",
    "SIM_ENGINE_FILLER_TOKENS",
}


@pytest.mark.parametrize("name", NAMES)
def test_it_redacts_whatever_an_old_rule_did_but_counts_of_tokens(name: str) -> None:
    old = any(rule.search(name) for rule in (OLD_PLAN, OLD_PREFLIGHT, OLD_NODE))
    if name in NOT_SECRETS:
        assert old and not is_secret_name(name)
    else:
        assert is_secret_name(name) or not old, f"{name}: an old rule hid it, the one does not"


# ---------------------------------------------------------------- every former user asks the one rule
def test_the_plan_refuses_by_it() -> None:
    profile = read(SPARK3)
    profile["shapes"]["tp3-triangle"]["environment"] = dict.fromkeys(NAMES, "v")
    with pytest.raises(ProfileError) as caught:
        validate_profile(profile, "profile.json")
    refused = {
        p["where"].rsplit(".", 1)[1]
        for p in (problem.as_dict() for problem in caught.value.problems)
        if p["message"].startswith("a secret in the environment")
    }
    assert refused == {name for name, secret in NAMES.items() if secret}


def test_the_preflight_masks_by_it() -> None:
    running = dict.fromkeys(NAMES, "old")
    planned = dict.fromkeys(NAMES, "new")
    changes = _preflight._env_drift(running, planned)  # pylint: disable=protected-access
    assert changes == [f"env {name}: {'*** → ***' if secret else 'old → new'}" for name, secret in NAMES.items()]


def test_node_facts_redacts_by_it() -> None:
    env = redacted_environment([f"{name}=v" for name in NAMES])
    assert env == {name: REDACTED if secret else "v" for name, secret in NAMES.items()}


def test_the_filter_is_the_plans_check() -> None:
    env = dict.fromkeys(NAMES, "v")
    env["INNOCENT_NAME"] = "hf_" + "PlantedSecretValue0123456789ab"  # a token's value, under any name
    assert SECRET_ENV_NAMES(env) == sorted([*(name for name, secret in NAMES.items() if secret), "INNOCENT_NAME"])
    for name, value, refused in REFUSED:
        assert SECRET_ENV_NAMES({name: value, "NCCL_IB_HCA": "mlx5_0"}) == ([name] if refused else []), name
    mixed = {"HF_TOKEN_PATH": "/run/secrets/hf_token", "MAX_TOKENS": 8, "HF_TOKEN": "x"}
    assert SECRET_ENV_NAMES(mixed) == ["HF_TOKEN"]
    assert SECRET_ENV_NAMES({}) == [] and SECRET_ENV_NAMES(None) == []


def test_the_filter_wants_a_map() -> None:
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="needs an environment map"):
        SECRET_ENV_NAMES(["HF_TOKEN=x"])


@pytest.mark.parametrize("where", ["plan", "preflight", "node", "filter"])
def test_each_user_calls_it(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that says only NCCL_IB_HCA is a secret, put in place of the one: each user follows it."""

    def only_nccl_ib_hca(name: str) -> bool:
        return name == "NCCL_IB_HCA"

    for module in (_secrets, _preflight, _docker_engine):
        monkeypatch.setattr(module, "is_secret_name", only_nccl_ib_hca)
    env = {"NCCL_IB_HCA": "mlx5_0", "HF_TOKEN": "x"}
    if where == "plan":
        profile = read(SPARK3)
        profile["shapes"]["tp3-triangle"]["environment"] = env
        with pytest.raises(ProfileError) as caught:
            validate_profile(profile, "profile.json")
        assert [p.where for p in caught.value.problems] == ["$.shapes.tp3-triangle.environment.NCCL_IB_HCA"]
    elif where == "preflight":
        drift = _preflight._env_drift(env, dict.fromkeys(env, "y"))  # pylint: disable=protected-access
        assert drift == ["env NCCL_IB_HCA: *** → ***", "env HF_TOKEN: x → y"]
    elif where == "node":
        assert redacted_environment([f"{k}={v}" for k, v in env.items()]) == {"NCCL_IB_HCA": REDACTED, "HF_TOKEN": "x"}
    else:
        assert SECRET_ENV_NAMES(env) == ["NCCL_IB_HCA"]


def _copies(text: str) -> list[str]:
    return [fragment for fragment in ("PASSW", "API_?KEY", "SECRET|") if fragment in text]


def test_no_copy_of_the_rule_is_left() -> None:
    """The rule's words written as a pattern are in _secret_names.py only (its documentation aside)."""
    own = pathlib.Path(_secret_names.__file__).resolve()
    sources: list[Any] = [*(ROOT / "plugins").rglob("*.py"), *(ROOT / "roles").rglob("*.yml")]
    copies = {
        str(path.relative_to(ROOT)): found
        for path in sources
        if path.resolve() != own and (found := _copies(path.read_text(encoding="utf-8")))
    }
    assert copies == {}
