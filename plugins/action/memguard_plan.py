# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: one node's memory guard, planned on the controller (plugin_utils/plan/memguard.py)."""

from __future__ import annotations

import os
import secrets
import string
import tempfile
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import MEMGUARD_PLAN
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.memguard import (
    SETTINGS,
    MemguardConfigError,
    differences_by_host,
    expectation,
    key_if_any,
    memguard_config,
    peers_of,
    read_key,
    script_sha256,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.converge import difference

KEY_LENGTH = 40
KEY_CHARS = string.ascii_letters + string.digits


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = MEMGUARD_PLAN

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        host = str(task_vars.get("inventory_hostname"))
        settings = args["settings"]
        missing = [name for name in SETTINGS if name not in settings]
        if missing:
            result.update(failed=True, msg=f"dgxspark.cluster.memguard_plan: settings lacks {', '.join(missing)}")
            return result
        hosts = args["hosts"] if args["hosts"] is not None else list(task_vars.get("ansible_play_hosts_all") or [host])
        hostvars = task_vars.get("hostvars") or {}
        peers = peers_of(hosts, hostvars, settings)
        by_host = args["node_facts_by_host"]
        try:
            key = args["key"] or self._key(args["key_file"], create=args["key_create"] and not self._task.check_mode)
            script_sha = script_sha256()
            if by_host:  # every host at once (run_once): what would change on each, from its facts
                differences = differences_by_host(
                    hosts, hostvars, settings, args["host_section"], args["container_name"], key, by_host, script_sha
                )
                result.update(differences=differences, key_missing=key is None)
                return result
            config = memguard_config(args["host_section"], args["container_name"], settings, host, peers, key)
        except (MemguardConfigError, OSError) as error:
            result.update(failed=True, msg=f"dgxspark.cluster.memguard_plan: {error}")
            return result
        texts, expected = expectation(config, settings, script_sha)
        result.update(
            config=config,
            texts=texts,
            expected=expected,
            container=config["container"],
            watchdog_s=config["watchdog_s"],
            key_missing=key is None,
            difference=difference(args["node_facts"], expected) if args["node_facts"] else [],
        )
        return result

    @staticmethod
    def _key(path: str, create: bool) -> str | None:
        """The guards' shared key from ``path``; made there (0600, letters and digits) when it does not exist and
        ``create`` is true, once: a host that loses the race to make it reads the winner's. None when it does
        not exist and may not be made (a preflight, check mode). The format is ansible.builtin.password's."""
        found = key_if_any("", path)
        if found is not None or not create:
            return found
        key = "".join(secrets.choice(KEY_CHARS) for _index in range(KEY_LENGTH))
        # written whole to a file of its own, then linked into place: the link fails when another host made the
        # key first, and no host ever reads a key half-written
        descriptor, staged = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".dgxspark-memguard-key.")
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(key + "\n")
            os.link(staged, path)
        except FileExistsError:
            return read_key(path)
        finally:
            os.unlink(staged)
        return key
