# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/secrets.yml's decisions (plugin_utils/profile/secrets.py) through its filters: the values given refused or
taken, the files they go to and their directories. No message repeats a value."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.secrets import FilterModule

FILTERS = FilterModule().filters()
SECRETS = {"vllm_api_key": "/etc/dgxspark/api/vllm_api_key", "hf_token": "/etc/dgxspark/secrets/hf_token"}
TOKEN = "hf_" + "PlantedBySecretsFilters0123456789"
DIRECTORY = "/etc/dgxspark/secrets"


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"hf_token": TOKEN, "vllm_api_key": "k"}, ""),
        ({}, ""),
        ({"hf_token": ""}, ""),  # a credential's field left blank: no value, not a refusal
        (
            None,
            "give dgxspark_secret_values, a mapping of secret name to its text (from Ansible Vault or an AWX "
            "credential)",
        ),
        ([TOKEN], "give dgxspark_secret_values, a mapping"),
        (
            {"hf_token": TOKEN, "hf_tokn": TOKEN, "api": TOKEN},
            "not secrets of the profile: api, hf_tokn (its secrets: hf_token, vllm_api_key). A secret is written only "
            'where the profile names its file: name each in the profile\'s container.secrets first ("api": '
            '"/etc/dgxspark/secrets/api", "hf_tokn": "/etc/dgxspark/secrets/hf_tokn"), or point the playbook at the '
            "profile that names them with -e dgxspark_profile=PATH",
        ),
        ({"hf_token": ["a", "list"], "vllm_api_key": 12}, "values that are not text: hf_token, vllm_api_key"),
    ],
)
def test_the_values_given_are_refused_naming_secrets_never_a_value(values: object, said: str) -> None:
    refused = FILTERS["secret_values_refused"](values, SECRETS)
    assert refused == said if not said.endswith("mapping") else refused.startswith(said)
    assert TOKEN not in refused


def test_a_profile_without_secrets_says_so_and_names_the_fix() -> None:
    """Issue 29: secrets.yml as documented refused "not secrets of the profile: hf_token (its secrets: none)" without
    saying that the profile must name the secret first, nor how to point the playbook at another profile."""
    refused = FILTERS["secret_values_refused"](
        {"hf_token": TOKEN}, {}, "inventories/sim3/serving-profile.json", "/srv/s"
    )
    assert refused == (
        "not secrets of the profile: hf_token (its secrets: none). A secret is written only where the profile names "
        'its file: name each in the profile\'s container.secrets first ("hf_token": "/srv/s/hf_token"), or point the '
        "playbook at the profile that names them with -e dgxspark_profile=PATH (this run read "
        "inventories/sim3/serving-profile.json)"
    )
    api = FILTERS["secret_values_refused"]({"vllm_api_key": TOKEN}, {})
    assert "give the API's key and TLS files in the profile's container.api first (api_key_file" in api
    assert "container.secrets" not in api
    with pytest.raises(AnsibleFilterError, match="secret_values_refused: needs the plan's secrets"):
        FILTERS["secret_values_refused"]({}, None)


def test_the_files_given_are_the_profile_s_secrets_with_a_value_in_its_order() -> None:
    secrets = {"vllm_api_key": "/etc/dgxspark/secrets/vllm_api_key", "hf_token": "/etc/dgxspark/secrets/hf_token"}
    given = FILTERS["secret_files_given"](secrets, {"hf_token": TOKEN, "vllm_api_key": "k"}, DIRECTORY)
    assert given == [
        {"key": "vllm_api_key", "value": "/etc/dgxspark/secrets/vllm_api_key"},
        {"key": "hf_token", "value": "/etc/dgxspark/secrets/hf_token"},
    ]
    assert FILTERS["secret_files_given"](secrets, {"hf_token": "", "vllm_api_key": "k"}, DIRECTORY) == [given[0]]
    assert FILTERS["secret_files_given"](secrets, {}, DIRECTORY) == []
    assert FILTERS["secret_directories"](given) == [DIRECTORY]
    with pytest.raises(AnsibleFilterError, match="secret_files_given: the values given are not a mapping"):
        FILTERS["secret_files_given"](secrets, [TOKEN], DIRECTORY)


@pytest.mark.parametrize(
    "path",
    [
        "/etc/ssh/ssh_host_ed25519_key",  # issue 26: secrets.yml would overwrite the node's SSH host key as root
        "/etc/dgxspark-memguard/config.json",  # the guard's configuration (its key)
        "/etc/dgxspark/api/vllm_api_key",  # another directory of the collection's
        "/etc/dgxspark/secrets/sub/hf_token",  # below the directory, not in it
        "/etc/dgxspark/secrets",  # the directory itself
        "/etc/dgxspark/secrets/../../sudoers.d/x",
        "/etc/dgxspark/secrets//hf_token",
    ],
)
def test_a_file_outside_the_one_secrets_directory_is_never_written(path: str) -> None:
    secrets = {"hf_token": "/etc/dgxspark/secrets/hf_token", "evil": path}
    with pytest.raises(AnsibleFilterError, match="outside the secrets directory /etc/dgxspark/secrets: evil"):
        FILTERS["secret_files_given"](secrets, {"hf_token": TOKEN, "evil": "x"}, DIRECTORY)
    with pytest.raises(AnsibleFilterError, match="needs the plan's secrets_dir"):
        FILTERS["secret_files_given"](secrets, {"hf_token": TOKEN}, None)


def test_the_directories_are_those_of_the_files_given_once_each_sorted() -> None:
    given = [
        {"key": "c", "value": "/etc/dgxspark/secrets/c"},
        {"key": "a", "value": "/etc/dgxspark/api/a"},
        {"key": "b", "value": "/etc/dgxspark/secrets/b"},
    ]
    assert FILTERS["secret_directories"](given) == ["/etc/dgxspark/api", "/etc/dgxspark/secrets"]
    assert FILTERS["secret_directories"]([]) == []
    with pytest.raises(AnsibleFilterError, match="secret_directories: needs secret_files_given's list"):
        FILTERS["secret_directories"]("/etc/dgxspark/secrets/c")
    with pytest.raises(AnsibleFilterError, match="secret_directories: an item lacks 'value'"):
        FILTERS["secret_directories"]([{"key": "c"}])
