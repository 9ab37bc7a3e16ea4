# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""After the cut cable was mended: no cut rule is left on any node (the fabric scenario's tests, run with these,
find the fabric whole again)."""

from __future__ import annotations

testinfra_hosts = ["ansible://dgxspark"]

# the comment on the DROP rules that cut the cable (converge.yml, as `make sim-cut` does)
CUT_COMMENT = "dgxspark-sim-cut"


def test_no_cut_rule_left(host):
    assert CUT_COMMENT not in host.check_output("iptables -w -S")
