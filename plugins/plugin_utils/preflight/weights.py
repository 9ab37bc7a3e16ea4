# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's ``weights-identity`` check: every node holds the same weights, file for file.

It reads node_facts' ``weights`` section (a manifest: each file's name relative to the weights path, its
size and its SHA-256, null where the node's hash budget has not reached it yet) and compares the nodes'
manifests. What a file should be is what most nodes have (the presence of the file, then its size, then
its hash among the nodes with that size); a tie goes to the head, then to the lowest rank. A node that
differs FAILs, naming each file and what differs: missing, present on this node only, its size, its hash.
A file one of the two nodes has not hashed yet is compared by size alone, and the PASS line says how many
were. A node without a manifest is SKIPped (node_facts was not asked for ``weights``, or the weights path
does not exist there: the ``weights`` check FAILs that).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

CHECK = "weights-identity"
# The preflight's statuses (_preflight imports this module, so it cannot import them from there).
PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
GIB = 1024**3
SHOWN = 6
"""Differences named per node; the rest are counted."""


def _majority(values: Mapping[str, Any], order: Sequence[str]) -> Any:
    """The value most hosts have; a tie goes to the value of the host that comes first in ``order`` (the
    head, then the ranks in order)."""
    counts = Counter(values.values())
    first = {}
    for host in order:
        if host in values:
            first.setdefault(values[host], order.index(host))
    return max(counts, key=lambda value: (counts[value], -first[value]))


def _holders(hosts: Sequence[str], exclude: str) -> str:
    """``spark-head and 6 others`` / ``spark-w1`` / ``spark-w1 and spark-w2``: where the expected value is."""
    others = [h for h in hosts if h != exclude]
    if len(others) <= 2:
        return " and ".join(others)
    return f"{others[0]} and {len(others) - 1} others"


def _size(value: int) -> str:
    return f"{value:,} bytes"


Verdict = tuple[str, str]
"""(status, message) for one host."""


def _manifest(node: Any) -> tuple[Mapping[str, Any] | None, Verdict]:
    """The node's manifest, or None and why it cannot be compared."""
    if not isinstance(node, Mapping):
        return None, (SKIP, "no node facts: nothing to compare")
    weights = node.get("weights")
    if not isinstance(weights, Mapping):
        return None, (SKIP, "no manifest gathered (node_facts sections: [weights], with weights_path)")
    if not weights.get("exists"):
        where = weights.get("path")
        return None, (SKIP, f"no manifest: {where} does not exist on this node (the weights check fails it)")
    if weights.get("error"):
        return None, (WARN, f"no manifest to compare: {weights['error']}")
    if not isinstance(weights.get("files"), Mapping):
        return None, (WARN, "the manifest lists no files (node_facts from another version of the collection?)")
    return weights, (PASS, "")


def identity(facts: Mapping[str, Any], hosts: Sequence[str], path: str | None) -> dict[str, Verdict]:
    """Host to its ``weights-identity`` verdict, for every host of ``hosts`` (the ranks', head first)."""
    if not path:
        return dict.fromkeys(hosts, (SKIP, "the profile names no host.weights_path"))
    manifests: dict[str, Mapping[str, Any]] = {}
    verdicts: dict[str, Verdict] = {}
    for host in hosts:
        manifest, why = _manifest(facts.get(host))
        if manifest is None:
            verdicts[host] = why
        else:
            manifests[host] = manifest
    if len(manifests) == 1:
        verdicts.update(dict.fromkeys(manifests, (SKIP, "the only node with a manifest: nothing to compare it with")))
    elif manifests:
        verdicts.update(_compare(manifests, [h for h in hosts if h in manifests], path))
    return {host: verdicts[host] for host in hosts}


def _compare(manifests: Mapping[str, Mapping[str, Any]], order: Sequence[str], path: str) -> dict[str, dict[str, str]]:
    files = {host: manifest["files"] for host, manifest in manifests.items()}
    names = sorted({name for listing in files.values() for name in listing})
    differences: dict[str, list[str]] = {host: [] for host in order}
    by_hash: dict[str, int] = dict.fromkeys(order, 0)
    by_size: dict[str, int] = dict.fromkeys(order, 0)
    for name in names:
        present = {host: name in files[host] for host in order}
        expected_present = _majority(present, order)
        having = [host for host in order if present[host] == expected_present]
        for host in order:
            if present[host] == expected_present:
                continue
            if expected_present:
                differences[host].append(f"{name}: missing (on {_holders(having, host)})")
            else:
                differences[host].append(f"{name}: present here, not on {_holders(having, host)}")
        if not expected_present:
            continue
        sizes = {host: files[host][name].get("size") for host in order if present[host]}
        expected_size = _majority(sizes, order)
        same_size = [host for host in order if host in sizes and sizes[host] == expected_size]
        for host, size in sizes.items():
            if size != expected_size:
                differences[host].append(
                    f"{name}: size {_size(size)}, expected {_size(expected_size)} (as on {_holders(same_size, host)})"
                )
        hashes = {host: files[host][name].get("sha256") for host in same_size}
        known = {host: digest for host, digest in hashes.items() if digest}
        expected_hash = _majority(known, order) if known else None
        agreeing = [host for host in order if host in known and known[host] == expected_hash]
        for host in same_size:
            digest = hashes[host]
            if digest and expected_hash and digest != expected_hash:
                differences[host].append(
                    f"{name}: sha256 {digest[:16]}..., expected {expected_hash[:16]}... "
                    f"(as on {_holders(agreeing, host)})"
                )
            elif digest and len(known) > 1:
                by_hash[host] += 1
            else:
                by_size[host] += 1
    matching = [host for host in order if not differences[host]]
    return {
        host: _verdict(manifests[host], differences[host], by_hash[host], by_size[host], len(order), matching, path)
        for host in order
    }


def _verdict(
    manifest: Mapping[str, Any],
    found: Sequence[str],
    by_hash: int,
    by_size: int,
    compared: int,
    matching: Sequence[str],
    path: str,
) -> Verdict:
    if found:
        shown = "; ".join(found[:SHOWN]) + (f"; and {len(found) - SHOWN} more" if len(found) > SHOWN else "")
        fix = f" (such as {matching[0]})" if matching else ""
        return (
            FAIL,
            f"{path}: {len(found)} file(s) differ from the other nodes: {shown}; copy the weights again from a node "
            f"that matches{fix} with playbooks/weights.yml (-e weights_source=HOST), then run the preflight again",
        )
    count, total = manifest.get("file_count", len(manifest["files"])), manifest.get("total_bytes", 0)
    how = (
        "every one compared by SHA-256"
        if not by_size
        else f"{by_hash} compared by SHA-256, {by_size} by size only (not hashed yet on this node or the others: "
        "a later preflight goes on hashing, or run node_facts with a larger weights_hash_seconds)"
    )
    return PASS, f"{count} files, {total / GIB:.1f} GiB, the same as on the other {compared - 1} node(s); {how}"
