# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs that more than one of the collection's plugins takes, each written here once.

- The specs of the action plugins whose stub in ``plugins/modules/`` passes them to ``AnsibleModule``.
  ansible-test's validate-modules runs a module file and holds the argument spec its ``AnsibleModule`` gets to
  the module's documentation (names, types, defaults, choices); a stub that only holds documentation is not
  checked that way. The action plugin (controller) and its stub both import the spec from here.
- :data:`ENDPOINT`, the OpenAI endpoint's options that ``bench_run`` (an action) takes and passes on to each
  ``bench_load`` step (a module); the ``dgxspark.cluster.endpoint`` doc fragment documents them.

Here because a module may import module_utils only, and the controller may import module_utils too. Only dicts
and one small function: importing this costs the controller nothing worth measuring (plugin_utils/_lazy.py says
why that matters). No Ansible imports.
"""

from __future__ import annotations

from typing import Any

# The inventory groups of a cluster's head and workers: the one default of the variable that names them,
# dgxspark_cluster_groups, which every role, playbook and plugin reads (plugin_utils/plan/inventory.py re-exports these
# for the controller; modules cannot import plugin_utils). The actions take the variable as cluster_groups.
HEAD_GROUP = "dgxspark_head"
WORKERS_GROUP = "dgxspark_workers"
DEFAULT_GROUPS = {"head": HEAD_GROUP, "workers": WORKERS_GROUP}
GROUPS_ARGUMENT_SPEC: dict[str, Any] = {
    "type": "dict",
    "default": {},
    "options": {key: {"type": "str", "default": group} for key, group in DEFAULT_GROUPS.items()},
}
GROUPS = {"cluster_groups": GROUPS_ARGUMENT_SPEC}

BOOT_PREFLIGHT = {
    "planned": {"type": "dict", "required": True},
    "facts": {"type": "dict", "required": True},
    "replace": {"type": "bool", "default": False},
    "skip": {"type": "list", "elements": "str", "default": []},
    "clear_trip": {"type": "bool", "default": False},
    "candidate": {"type": "bool", "default": False},
    "release": {"type": "str"},
    "by": {"type": "str"},
    "fabric_settings": {"type": "dict", "default": {}},
    # the memory guard's role's settings (its vars/main.yml memguard_plan_settings) and the peers' key: what the role
    # would change on each node is worked out here, from the facts, with the rest
    "memguard": {
        "type": "dict",
        "options": {
            "settings": {"type": "dict", "required": True},
            "key": {"type": "str", "default": "", "no_log": True},
            "key_file": {"type": "path", "required": True},
        },
    },
    **GROUPS,
}

IMAGE_STREAM = {
    "source": {"type": "str"},
    "image_id": {"type": "str", "required": True},
    "names": {"type": "list", "elements": "str", "default": []},
    "pull": {"type": "str", "default": ""},
    "size": {"type": "int"},
    "timeout": {"type": "int", "default": 3600},
    "idle_timeout": {"type": "int", "default": 300},
    "progress_every": {"type": "float", "default": 10},
    "docker": {"type": "str", "default": "docker"},
}

WEIGHTS_SYNC = {
    "source": {"type": "str", "required": True},
    "source_address": {"type": "str", "required": True},
    "address": {"type": "str", "required": True},
    "weights_path": {"type": "str", "required": True},
    "files": {"type": "list", "elements": "dict", "required": True},
    "cache_dir": {"type": "str", "default": "/var/cache/dgxspark-cluster"},
    "ranks": {"type": "dict"},
    "timeout": {"type": "int", "default": 86400},
    "idle_timeout": {"type": "int", "default": 300},
    "progress_every": {"type": "float", "default": 10},
}

MEMGUARD_PLAN = {
    "host_section": {"type": "dict", "required": True},
    "container_name": {"type": "str", "default": ""},
    "settings": {"type": "dict", "required": True},
    "hosts": {"type": "list", "elements": "str"},
    "key": {"type": "str", "default": "", "no_log": True},
    "key_file": {"type": "path", "required": True},
    "key_create": {"type": "bool", "default": True},
    "node_facts": {"type": "dict", "default": {}},
    "node_facts_by_host": {"type": "dict", "default": {}},
}

RANK_CONTAINER = {
    "params": {"type": "dict", "required": True},
    "state": {"type": "str", "choices": ["created", "started"], "default": "started"},
    "recreate": {"type": "bool", "default": False},
}

SERVING_PROFILE = {
    "src": {"type": "path"},
    "content": {"type": "str"},
    "shape": {"type": "str"},
    "hosts": {"type": "list", "elements": "str"},
    **GROUPS,
    "discovered": {"type": "dict"},
    "show_warnings": {"type": "bool", "default": True},
    # the fabric role's settings (its vars/main.yml fabric_fact_settings): given, the plan also names what node_facts
    # reads of each host for the role's converge-from-facts
    "fabric_settings": {
        "type": "dict",
        "options": {
            "backend": {"type": "str", "default": "auto"},
            "networkd_dir": {"type": "path"},
            "netplan_dir": {"type": "path"},
            "sysctl_dir": {"type": "path"},
        },
    },
}
# what the action checks itself (its own message), and the stub declares for validate-modules
SERVING_PROFILE_ONE_OF = {"required_one_of": [("src", "content")], "mutually_exclusive": [("src", "content")]}

# the OpenAI endpoint a benchmark sends to, and how (bench_run passes these to every bench_load step)
ENDPOINT = {
    "url": {"type": "str", "required": True},
    "model": {"type": "str", "required": True},
    "api": {"type": "str", "choices": ["chat", "completions"], "default": "chat"},
    "api_key": {"type": "str", "no_log": True},
    "api_key_file": {"type": "str", "no_log": False},
    "ca_file": {"type": "str"},
    "validate_certs": {"type": "bool", "default": True},
}


def refuse_on_host(module: Any, name: str) -> None:
    """A stub's ``main``, once its ``AnsibleModule`` took the spec: fail, for the action plugin ``name`` runs on
    the controller only. ``module`` is that AnsibleModule."""
    module.fail_json(
        msg=f"dgxspark.cluster.{name} runs on the controller as an action plugin; it cannot run as a module on a host"
    )
