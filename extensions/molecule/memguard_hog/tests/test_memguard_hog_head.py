# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""On the head, where the hog grew: the target was stopped, the bystander was not, and the guard's decision log
says why."""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://dgxspark_head"]

TARGET = "memguard-hog-target"
BYSTANDER = "memguard-bystander"
LOG = "/var/log/dgxspark-memguard/decisions.jsonl"


def test_target_stopped_bystander_running(host):
    inspected = json.loads(host.check_output("docker inspect %s %s", TARGET, BYSTANDER))
    state = {container["Name"].lstrip("/"): container["State"] for container in inspected}
    assert not state[TARGET]["Running"], state
    assert state[TARGET]["Status"] == "exited", state
    assert state[BYSTANDER]["Running"], state


def test_last_trip_recorded_with_its_samples(host):
    # the guard's last decision to trip, as `grep '"decision": "trip"' | tail -n 1` finds it
    trips = [line for line in host.file(LOG).content_string.splitlines() if '"decision": "trip"' in line]
    assert trips, f"no trip in {LOG}"
    decision = json.loads(trips[-1])
    assert decision["phase"] == "steady", decision
    assert "MemAvailable under the steady floor" in decision["reason"], decision
    assert "grace 1 s" in decision["reason"], decision
    assert decision["stop"]["outcome"] == "stopped", decision
    assert decision["from_peer"] is None, decision
    # the record holds the samples that led to it: low ones at the end, under the floor
    assert len([sample for sample in decision["samples"] if sample["low"]]) >= 4, decision
    assert decision["samples"][-1]["low"], decision
