# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of playbooks/secrets.yml (logic in plugin_utils/profile/secrets.py). Documentation: each filter's .yml file.

No error here repeats a value given: a secret's value is never shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._lazy import lazy

# imported when first called (plugin_utils/_lazy.py says why)
_values_refused = lazy("plugin_utils.profile.secrets", "values_refused")
_files_given = lazy("plugin_utils.profile.secrets", "files_given")
_directories = lazy("plugin_utils.profile.secrets", "directories")


def _secrets(name: str, secrets: Any) -> Mapping[str, str]:
    if not isinstance(secrets, Mapping):
        raise AnsibleFilterError(
            f"dgxspark.cluster.{name}: needs the plan's secrets (name: file), found {type(secrets).__name__}"
        )
    return secrets


def secret_values_refused(values: Any, secrets: Any, profile: Any = "", secrets_dir: Any = "") -> str:
    return _values_refused(
        values, _secrets("secret_values_refused", secrets), str(profile or ""), str(secrets_dir or "")
    )


def secret_files_given(secrets: Any, values: Any, directory: Any) -> list[dict[str, str]]:
    if not isinstance(values, Mapping):
        raise AnsibleFilterError("dgxspark.cluster.secret_files_given: the values given are not a mapping")
    if not isinstance(directory, str) or not directory.startswith("/"):
        raise AnsibleFilterError("dgxspark.cluster.secret_files_given: needs the plan's secrets_dir, an absolute path")
    try:
        return _files_given(_secrets("secret_files_given", secrets), values, directory)
    except ValueError as error:
        raise AnsibleFilterError(f"dgxspark.cluster.secret_files_given: {error}; nothing was written") from None


def secret_directories(given: Any) -> list[str]:
    if isinstance(given, str) or not isinstance(given, Sequence) or not all(isinstance(i, Mapping) for i in given):
        raise AnsibleFilterError("dgxspark.cluster.secret_directories: needs secret_files_given's list")
    try:
        return _directories(given)
    except KeyError as error:
        raise AnsibleFilterError(f"dgxspark.cluster.secret_directories: an item lacks {error}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {
            "secret_values_refused": secret_values_refused,
            "secret_files_given": secret_files_given,
            "secret_directories": secret_directories,
        }
