# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the files the roles write. Documentation: the .yml file of each filter."""

from __future__ import annotations

import pathlib
import re
import shlex
from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import files as _file_checks

KINDS = ("networkd", *(f"sysctl-{role}" for role in _file_checks.SYSCTL_KEYS))
PYTHON = re.compile(r"/[A-Za-z0-9_.+/-]+")


def file_check(kind: Any, python: Any = "/usr/bin/python3") -> str:
    """The ``validate`` command that checks a file of ``kind`` on the node: ``python -c <source> kind %s``."""
    if kind not in KINDS:
        raise AnsibleFilterError(f"dgxspark.cluster.file_check: {kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(python, str) or not PYTHON.fullmatch(python):
        raise AnsibleFilterError(f"dgxspark.cluster.file_check: python must be an absolute path, got {python!r}")
    source = pathlib.Path(_file_checks.__file__).read_text(encoding="utf-8")
    if "%" in source or any(mark in source for mark in ("{{", "{%", "{#")):
        raise AnsibleFilterError("dgxspark.cluster.file_check: the check's source holds % or a Jinja delimiter")
    return f"{python} -c {shlex.quote(source)} {kind} %s"


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"file_check": file_check}
