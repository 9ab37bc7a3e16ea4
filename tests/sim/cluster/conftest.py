# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for the simulated-cluster tests: a cluster started once per module and always removed.

The clusters are containers on this machine's Docker engine (sim/README.md); these tests contact
only them and loopback. They need root and build the images on first use (a couple of minutes
cold, seconds warm).
"""

from __future__ import annotations

import pytest
from simcluster import simctl, start_cluster


@pytest.fixture(scope="module")
def sim3():
    """sim3 with the engine image, removed at the end of the module whatever happened."""
    info = start_cluster("sim3")
    try:
        yield info
    finally:
        simctl("down", "sim3")


@pytest.fixture(scope="module")
def sim4():
    """sim4 (the tp4 ring) with the engine image, removed at the end of the module whatever happened."""
    info = start_cluster("sim4")
    try:
        yield info
    finally:
        simctl("down", "sim4")


@pytest.fixture(scope="module")
def sim8():
    """sim8 with the engine image (its switch is checked, then it boots TP8), removed at the end."""
    info = start_cluster("sim8")
    try:
        yield info
    finally:
        simctl("down", "sim8")
