# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each action plugin whose stub passes a spec to AnsibleModule takes that spec from module_utils/_specs.py:
what validate-modules holds to the documentation is what the action validates the task's arguments with."""

from __future__ import annotations

import importlib
import runpy

import pytest

from ansible_collections.dgxspark.cluster.plugins.module_utils import _specs
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import inventory as _inventory

ACTIONS = {
    "boot_preflight": _specs.BOOT_PREFLIGHT,
    "image_stream": _specs.IMAGE_STREAM,
    "memguard_plan": _specs.MEMGUARD_PLAN,
    "rank_container": _specs.RANK_CONTAINER,
    "serving_profile": _specs.SERVING_PROFILE,
}
PLUGINS = "ansible_collections.dgxspark.cluster.plugins."


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_the_action_validates_with_the_spec_its_stub_documents(name: str) -> None:
    action = importlib.import_module(PLUGINS + "action." + name)
    spec = getattr(action, "ARGUMENT_SPEC", None) or action.ActionModule.ARGUMENT_SPEC
    assert spec is ACTIONS[name]


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_the_stub_passes_the_spec_and_refuses_to_run_on_a_host(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ansible.module_utils import basic

    taken: dict = {}

    class Stop(Exception):
        pass

    def fake_init(self, **kwargs):
        taken.update(kwargs)

    def fake_fail(self, **kwargs):
        raise Stop(kwargs["msg"])

    monkeypatch.setattr(basic.AnsibleModule, "__init__", fake_init)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fake_fail)
    with pytest.raises(Stop, match=f"dgxspark.cluster.{name} runs on the controller as an action plugin"):
        runpy.run_module(PLUGINS + "modules." + name, run_name="__main__")  # as validate-modules runs it
    assert taken["argument_spec"] is ACTIONS[name] and taken["supports_check_mode"] is True


def test_the_default_groups_are_the_inventorys() -> None:
    assert (_specs.HEAD_GROUP, _specs.WORKERS_GROUP) == (_inventory.HEAD_GROUP, _inventory.WORKERS_GROUP)
