#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verify a node's fabric against its plan (logic in module_utils/_fabric_verify.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_verify
short_description: Check a DGX Spark's fabric ports against the plan and ping every peer with jumbo frames
version_added: 0.1.0
description:
  - Compares the node's fabric ports with the plan made by M(dgxspark.cluster.fabric_plan) (its C(fabric) result)
    and reports, without changing anything, three things.
  - RV(drift), how the configuration differs from the plan (a port administratively down, another MTU, a missing
    address or route) - what reapplying the configuration would change.
  - RV(failures), what would stop NCCL, each naming the ranks, hosts and ports involved (a port missing or without
    carrier, the wrong MTU or link speed, no RoCE v2 IPv4 GID where RDMA is required, and every peer that does not
    answer a do-not-fragment ping filling one frame of the fabric MTU).
  - RV(nccl), the names NCCL needs, discovered on the node (RDMA devices of the fabric ports, the ports, the GID
    index), which the fabric role hands to the serving plan.
  - Reads sysfs through the same code as M(dgxspark.cluster.node_facts), runs C(ip -j addr) and C(ip -j -4 route)
    once each, and the pings at the same time, one thread per peer.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  plan:
    description:
      - This host's plan, the RV(dgxspark.cluster.fabric_plan#module:fabric) result of
        M(dgxspark.cluster.fabric_plan) (host, rank, address, mtu, interfaces, routes, checks).
    type: dict
    required: true
  link_speed_mbps:
    description:
      - Expected link speed of every fabric port in Mb/s (200000 on a DGX Spark's ConnectX-7). V(0) does not check.
    type: int
    default: 0
  require_rdma:
    description:
      - Every fabric port must have an RDMA device with a RoCE v2 GID for the host's fabric address (a shape whose
        C(fabric.nccl_net) is C(IB)).
    type: bool
    default: false
  ping:
    description: Ping every peer of the plan. V(false) checks the ports only.
    type: bool
    default: true
  ping_count:
    description: Pings per peer; a peer passes when at least one is answered (fewer is a warning).
    type: int
    default: 3
  ping_deadline:
    description: Seconds each peer's pings may take in all (C(ping -w)).
    type: int
    default: 3
  wait:
    description:
      - Seconds to wait for the configuration to match the plan before checking (after it was just reapplied).
    type: float
    default: 0
  fail_on_problems:
    description:
      - Fail the task when there are failures. V(false) returns them for a report across hosts (the fabric role).
    type: bool
    default: true
  sys_root:
    description: Where sysfs is read (a test points it at a fixture tree).
    type: path
    default: /sys
extends_documentation_fragment:
  - dgxspark.cluster.attributes.read_only
attributes:
  platform:
    support: full
    platforms: posix
    description: Linux with iproute2 and iputils ping.
requirements:
  - iproute2 (C(ip) with JSON output) and iputils C(ping) on the node.
seealso:
  - module: dgxspark.cluster.fabric_plan
  - module: dgxspark.cluster.node_facts
"""

EXAMPLES = r"""
- name: Plan this host's fabric
  dgxspark.cluster.fabric_plan:
    src: "{{ dgxspark_profile }}"
  register: plan

- name: Check the ports and ping every peer with a full jumbo frame
  dgxspark.cluster.fabric_verify:
    plan: "{{ plan.fabric }}"
    link_speed_mbps: "{{ plan.settings.link_speed_mbps }}"
    require_rdma: "{{ plan.settings.nccl_net == 'IB' }}"
"""

RETURN = r"""
drift:
  description: How the configuration differs from the plan, one line each.
  returned: always
  type: list
  elements: str
  sample: ["enp1s0f1np1: MTU 1500 (plan: 9000)"]
failures:
  description: What stops NCCL, one line each, naming ranks, hosts and ports.
  returned: always
  type: list
  elements: str
  sample:
    - "rank 0 (sim3-head) -> rank 1 (sim3-worker1, 10.99.3.2) on enp1s0f1np1 -> enp1s0f0np0 direct: no reply to 3
      do-not-fragment ping(s)"
notices:
  description: Doubts that do not fail the check (unknown link speed, partial ping loss).
  returned: always
  type: list
  elements: str
pings:
  description: Every peer's ping, with C(description), C(destination_host), C(sent), C(received), C(rtt_avg_ms),
    C(ok) and C(error).
  returned: always
  type: list
  elements: dict
links:
  description: Each planned port's facts (present, operstate, carrier, speed_mbps, mtu, rdma_device, gid_ipv4, up,
    addresses).
  returned: always
  type: dict
nccl:
  description: What the node offers NCCL, C(hca) (list), C(socket_ifname) and C(gid_index) (null without RoCE).
  returned: always
  type: dict
  sample: {"hca": ["rocep1s0f0", "rocep1s0f1"], "socket_ifname": "=enp1s0f0np0,enp1s0f1np1", "gid_index": 3}
waited_s:
  description: Seconds spent waiting for the configuration to match the plan.
  returned: always
  type: float
problems:
  description: Read errors that left a sysfs value unknown.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils._fabric_verify import Plan, Settings, Verifier
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import make_runner

ARGUMENT_SPEC = {
    "plan": {"type": "dict", "required": True},
    "link_speed_mbps": {"type": "int", "default": 0},
    "require_rdma": {"type": "bool", "default": False},
    "ping": {"type": "bool", "default": True},
    "ping_count": {"type": "int", "default": 3},
    "ping_deadline": {"type": "int", "default": 3},
    "wait": {"type": "float", "default": 0},
    "fail_on_problems": {"type": "bool", "default": True},
    "sys_root": {"type": "path", "default": "/sys"},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        plan = Plan.from_dict(params["plan"])
    except (KeyError, TypeError, ValueError) as error:
        module.fail_json(msg=f"plan is not a fabric_plan result's 'fabric' (missing or bad {error})")
    if params["ping_count"] < 1 or params["ping_deadline"] < 1:
        module.fail_json(msg="ping_count and ping_deadline must be at least 1")
    settings = Settings(
        link_speed_mbps=params["link_speed_mbps"] or None,
        require_rdma=params["require_rdma"],
        ping=params["ping"],
        ping_count=params["ping_count"],
        ping_deadline=params["ping_deadline"],
        wait=max(0.0, params["wait"]),
        sys_root=params["sys_root"],
        ip=module.get_bin_path("ip", required=True),
        ping_bin=module.get_bin_path("ping", required=params["ping"]) or "ping",
    )

    def run_command(argv: list[str]) -> tuple[int, str, str]:
        return module.run_command(argv, handle_exceptions=False, errors="surrogate_then_replace")

    runner = make_runner(run_command, module.get_bin_path("timeout"), float(params["ping_deadline"] + 5))
    result = Verifier(plan, settings, runner).verify()
    if result["failures"] and params["fail_on_problems"]:
        module.fail_json(
            msg=f"{plan.host}: {len(result['failures'])} fabric problem(s): " + "; ".join(result["failures"]), **result
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
