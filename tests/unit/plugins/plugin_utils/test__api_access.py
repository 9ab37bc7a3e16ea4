# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The served API's access in the plan (container.api): bind address, key from a file, TLS files."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.inventory import Host
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.plan import build_plan
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import api_access as _api_access
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.profile import load_profile, validate_profile
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, edited

KEY_FILE = "/etc/dgxspark/secrets/vllm_api_key"
CERT = "/etc/dgxspark/secrets/api.crt"
TLS_KEY = "/etc/dgxspark/secrets/api.key"


def hosts(management: Any = "192.0.2.10") -> list[Host]:
    return [
        Host(
            "spark-head" if i == 0 else f"spark-w{i}",
            rank=i,
            head=i == 0,
            fabric_address=f"198.51.100.{10 + i}",
            management_address=management if i == 0 else f"192.0.2.{10 + i}",
        )
        for i in range(3)
    ]


def profile(**api: Any) -> Any:
    raw = json.loads(SPARK3.read_text())
    return validate_profile(edited(raw, {"container/api": api}) if api else raw, "p.json")


def plan(api: dict[str, Any] | None = None, management: Any = "192.0.2.10") -> dict[str, Any]:
    return build_plan(profile(**(api or {})), "tp3-triangle", hosts(management))


def problems(api: dict[str, Any], management: Any = "192.0.2.10") -> list[str]:
    with pytest.raises(ProfileError) as caught:
        plan(api, management)
    return [p.render() for p in caught.value.problems]


def head_command(result: dict[str, Any]) -> list[str]:
    return result["ranks"][0]["command"]


def test_by_default_the_head_binds_its_management_address_and_the_boot_connects_there() -> None:
    result = plan()
    command = head_command(result)
    assert command[command.index("--host") + 1] == "192.0.2.10"
    assert "--host" not in result["ranks"][1]["command"]  # workers serve no API
    assert result["api"]["url"] == "http://192.0.2.10:8000"
    assert result["api_url"] == "http://192.0.2.10:8000/v1"
    assert result["api"]["api_key_file"] is None and result["api"]["ca_file"] is None
    assert result["ranks"][0]["entrypoint"] == "vllm"
    assert result["ranks"][0]["container"]["command"] == command


def test_the_default_keeps_the_profiles_hash() -> None:
    assert profile().sha256 == load_profile(str(SPARK3)).sha256
    assert "api" not in profile().data["container"]


def test_a_head_without_an_address_falls_back_to_loopback_and_says_so() -> None:
    result = plan(management="spark-head.example")
    command = head_command(result)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert any("listens on loopback (127.0.0.1) only" in w for w in result["warnings"])


@pytest.mark.parametrize(
    "bind,host,url",
    [
        ("loopback", "127.0.0.1", "http://127.0.0.1:8000"),
        ("all", "0.0.0.0", "http://127.0.0.1:8000"),
        ("198.51.100.10", "198.51.100.10", "http://198.51.100.10:8000"),
        ("192.0.2.10", "192.0.2.10", "http://192.0.2.10:8000"),
        ("127.0.0.1", "127.0.0.1", "http://127.0.0.1:8000"),
    ],
)
def test_an_explicit_bind(bind: str, host: str, url: str) -> None:
    result = plan({"bind": bind})
    command = head_command(result)
    assert command[command.index("--host") + 1] == host
    assert result["api"]["url"] == url
    if bind == "all":
        assert any("every interface" in w for w in result["warnings"])


@pytest.mark.parametrize("bind", ["192.0.2.11", "203.0.113.7", "0.0.0.0", "::"])
def test_a_bind_address_that_is_not_the_heads_fails_the_plan(bind: str) -> None:
    found = problems({"bind": bind})
    assert any("$.container.api.bind: not an address of the head spark-head" in p for p in found), found


@pytest.mark.parametrize("bind", ["every", "192.0.2.10; rm -rf /", "host name"])
def test_a_bind_that_is_no_choice_nor_address_fails_validation(bind: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profile(bind=bind)
    assert any("$.container.api.bind" in p.render() for p in caught.value.problems)


def test_a_key_file_is_bound_as_a_secret_and_read_by_a_wrapper_never_rendered() -> None:
    result = plan({"api_key_file": KEY_FILE})
    head = result["ranks"][0]
    assert head["entrypoint"] == "/bin/sh"
    assert head["command"][:3] == ["-c", _api_access.KEY_WRAPPER, "vllm"]
    assert head["command"][3] == "serve"
    assert "/run/secrets/vllm_api_key" in _api_access.KEY_WRAPPER
    mount = f"--mount=type=bind,source={KEY_FILE},target=/run/secrets/vllm_api_key,readonly"
    assert all(mount in rank["docker_run_args"] for rank in result["ranks"])
    assert "--api-key" not in head["command"]
    assert not any(k == "VLLM_API_KEY" for k in head["environment"])
    assert result["secrets"] == {"vllm_api_key": KEY_FILE}
    assert result["api"]["api_key_file"] == KEY_FILE
    assert result["ranks"][1]["entrypoint"] == "vllm"  # workers serve no API and read no key
    assert head["container"]["entrypoint"] == ["/bin/sh"]


def test_tls_files_are_bound_as_secrets_and_given_to_vllm() -> None:
    result = plan({"tls": {"certfile": CERT, "keyfile": TLS_KEY}, "bind": "loopback"})
    command = head_command(result)
    assert command[command.index("--ssl-certfile") + 1] == "/run/secrets/vllm_tls_certfile"
    assert command[command.index("--ssl-keyfile") + 1] == "/run/secrets/vllm_tls_keyfile"
    assert "--ssl-certfile" not in result["ranks"][1]["command"]
    assert result["api"]["url"] == "https://127.0.0.1:8000"
    assert result["api"]["ca_file"] == CERT  # a self-signed certificate trusts itself
    assert result["secrets"] == {"vllm_tls_certfile": CERT, "vllm_tls_keyfile": TLS_KEY}


def test_a_ca_file_is_what_the_clients_trust() -> None:
    result = plan({"tls": {"certfile": CERT, "keyfile": TLS_KEY, "ca_file": "/etc/dgxspark/secrets/ca.crt"}})
    assert result["api"]["ca_file"] == "/etc/dgxspark/secrets/ca.crt"


@pytest.mark.parametrize(
    "api,where",
    [
        ({"api_key_file": "etc/key"}, "$.container.api.api_key_file"),
        ({"api_key_file": "/etc/../key"}, "$.container.api.api_key_file"),
        ({"tls": {"certfile": "cert.pem", "keyfile": TLS_KEY}}, "$.container.api.tls.certfile"),
        ({"tls": {"certfile": CERT, "keyfile": "/etc/tls/a,b"}}, "$.container.api.tls.keyfile"),
        ({"tls": {"certfile": CERT}}, "$.container.api.tls.keyfile"),
        ({"tls": {"certfile": CERT, "keyfile": TLS_KEY, "ca_file": "ca.pem"}}, "$.container.api.tls.ca_file"),
    ],
)
def test_a_tls_or_key_path_that_is_not_absolute_and_plain_fails_validation(api: dict[str, Any], where: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profile(**api)
    assert any(where in p.render() for p in caught.value.problems), [p.render() for p in caught.value.problems]


def test_a_secret_named_like_the_apis_own_files_is_refused() -> None:
    raw = edited(json.loads(SPARK3.read_text()), {"container/secrets": {"vllm_api_key": KEY_FILE}})
    with pytest.raises(ProfileError) as caught:
        validate_profile(raw, "p.json")
    assert any("$.container.secrets.vllm_api_key" in p.render() for p in caught.value.problems)


@pytest.mark.parametrize("flag", ["--host", "--ssl-certfile", "--ssl-keyfile"])
def test_the_flags_the_api_renders_are_refused_in_serve_args(flag: str) -> None:
    raw = json.loads(SPARK3.read_text())
    raw["container"]["serve_args"] = [*raw["container"].get("serve_args", []), flag, "/x"]
    with pytest.raises(ProfileError) as caught:
        validate_profile(raw, "p.json")
    assert any(f"{flag} is rendered by the collection" in p.render() for p in caught.value.problems)
