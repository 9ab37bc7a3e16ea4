#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the fabric_plan action plugin (it runs on the controller)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fabric_plan
short_description: Plan one DGX Spark's fabric ports, addresses, routes and checks from the serving profile
version_added: 0.1.0
description:
  - Reads the cabling of the selected shape (C(fabric.transport) or C(fabric.topology) - triangle, ring or switch),
    its MTU and expected link speed from the serving profile, and every fabric host of the inventory (their
    C(dgxspark_rank), C(dgxspark_fabric_address) and optional C(dgxspark_fabric_cabling)), then returns this host's
    share of the plan, with every file the fabric role writes for it.
  - On direct cables every port gets the host's one fabric address as a /32 with the neighbour as its peer; a
    ring's non-neighbours are reached with /32 routes through a neighbour that forwards. On a switch the host's port
    gets its address in the switch's prefix. The checks list every other rank, with the port the packet leaves on,
    the far port, the path and the do-not-fragment ping payload that fills one frame.
  - Every problem in the inventory (ranks, addresses, cabling that does not pair up, a fabric that is not connected)
    is reported at once, before any host is contacted. Runs on the controller only; safe under C(--check).
  - Hosts are read and checked by the same code as C(dgxspark.cluster.serving_profile)'s plan (ranks 0..N-1 once
    each; one IPv4 fabric address per host, not loopback, multicast or reserved), so both give the same problem.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  host:
    description: The host to return the share of. Defaults to the task's C(inventory_hostname).
    type: str
  topology:
    description: Cabling, instead of the one the shape's fabric implies.
    type: str
    choices: [triangle, ring, switch]
  mtu:
    description: Fabric MTU, instead of the shape's C(fabric.mtu) (default 9000).
    type: int
  prefix:
    description: Prefix length of the switch's subnet (switch topology only).
    type: int
    default: 24
  link_speed_mbps:
    description: Expected link speed, instead of the shape's C(fabric.link_speed_mbps) (default 200000).
    type: int
extends_documentation_fragment:
  - dgxspark.cluster.cluster
  - dgxspark.cluster.cluster.profile
  - dgxspark.cluster.attributes.read_only
  - dgxspark.cluster.attributes.controller
seealso:
  - module: dgxspark.cluster.fabric_verify
"""

EXAMPLES = r"""
- name: Plan this host's fabric from the profile
  dgxspark.cluster.fabric_plan:
    src: "{{ dgxspark_profile }}"
    shape: "{{ dgxspark_shape | default(omit) }}"
    cluster_groups: "{{ lookup('dgxspark.cluster.cluster_groups') }}"  # dgxspark_cluster_groups, or its default
  register: plan

- name: Show the systemd-networkd files this host gets
  ansible.builtin.debug:
    var: plan.networkd
"""

RETURN = r"""
fabric:
  description:
    - This host's plan, C(host), C(rank), C(address), C(mtu), C(ping_payload), C(ip_forward), C(interfaces) (each
      C(name), C(mtu), C(address), C(peer), C(peer_host), C(peer_port)), C(routes) (each C(destination), C(gateway),
      C(interface), C(destination_host), C(via_host)) and C(checks) (each C(source_host), C(source_rank),
      C(destination_host), C(destination_rank), C(destination_address), C(interface), C(peer_interface),
      C(via_host), C(via_address), C(path), C(payload) and C(description)).
  returned: success
  type: dict
networkd:
  description: systemd-networkd files for this host, file name to contents.
  returned: success
  type: dict
netplan:
  description: The same configuration as one netplan file (renderer networkd).
  returned: success
  type: str
sysctl:
  description: The sysctl.d file (loose reverse-path filtering on the fabric ports, forwarding where needed).
  returned: success
  type: str
sysctls:
  description: The same settings as a map of sysctl name to value.
  returned: success
  type: dict
interfaces:
  description: The host's fabric ports.
  returned: success
  type: list
  elements: str
settings:
  description: C(transport), C(topology), C(mtu), C(link_speed_mbps), C(nccl_net), C(nodes), C(shape), C(hosts) and
    C(prefix) of the plan.
  returned: success
  type: dict
management_waiver:
  description: The reason the profile gives for waiving C(fabric-not-management) (C(waivers)), null without one; the
    fabric role's check of its ports against the management interface then WARNs instead of failing.
  returned: success
  type: str
problems:
  description: Every problem found, each with C(path), C(message), C(found), C(expected) and C(hint).
  returned: failure
  type: list
  elements: dict
"""
