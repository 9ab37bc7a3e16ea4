# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""On the other ranks: their guards were told (policy stop-all) and tripped too, with nothing of theirs to stop."""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://dgxspark_workers"]

COMMAND = "/usr/local/sbin/dgxspark-memguard"


def test_tripped_because_rank0_tripped(host, inventory):
    head = inventory["groups"]["dgxspark_head"][0]
    state = json.loads(host.check_output("%s status", COMMAND))["state"]
    tripped = state["tripped"]
    assert tripped, state
    assert tripped["from_peer"] == head, state
    assert tripped["reason"].startswith(f"peer {head} tripped"), state
    assert tripped["stop"]["outcome"] == "no such container", state
