# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weights sync's plan (issue 30): which files go from the source node to which node, before anything moves.

Worked out on the controller from every node's ``node_facts`` answer: its ``weights`` section (the manifest of
``host.weights_path``: each file's name relative to it, its size and SHA-256, null where not hashed yet;
``module_utils/_weights_manifest.py``) and its ``disk`` section (the free space where the weights path is). The
source is the head unless another node is named. For every other node (a target) the plan says:

- the files it gets: ``missing`` (not on the target), ``truncated`` (shorter there than on the source), ``size``
  (longer), ``sha256`` (the same size, another hash); a file of the same size that the source or the target has not
  hashed yet is compared by size alone and counted as ``unverified`` (it is not sent: the manifest cannot tell);
- the bytes it gets, and whether its free space holds them (the disk's ``available_bytes`` less ``reserve_bytes``).
  The space counted is every byte sent: what the files replace and what a delete removes is freed only after,
  so it is not counted;
- the files it holds that the source lacks (``extra``): listed always, deleted only with ``delete`` (``delete``
  names them then, and is empty otherwise);
- the address the transfer uses: the plan's fabric address where both ends have one (``network: fabric``), else
  the inventory's management address (``network: management``).

Refusals (``refusal``, with ``problems`` one each), before anything moves: a source that is not one of the nodes,
a source without the weights (no manifest, the path missing there, an unusable manifest, no files), a manifest of
another path than the profile's, a name that is not a plain relative path under the weights path (absolute, with
``..``, empty or ``.`` components, control characters), a target whose manifest cannot be used, a target whose
free space is unknown, read-only or too small (naming the node, the bytes needed and free), a name that is a file
on one side and a directory on the other. The manifest says nothing of symlinks but that it followed a file's
(and never a directory's): where one points is the transfer's concern, which must write regular files under the
target's weights path and never through a link. When every target matches, nothing moves. Plain data in and out,
no Ansible imports.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release.images import human

GIB = 1024**3
DEFAULT_RESERVE_BYTES = GIB
"""Left free on a target's weights disk after the transfer: a node with a full root filesystem cannot boot."""
SHOWN = 6
"""Files named per target in the plan's lines; the rest are counted (the plan's data holds them all)."""
REASONS = ("missing", "truncated", "size", "sha256")
NETWORKS = ("fabric", "management")


def _quoted(name: str) -> str:
    return repr(name) if not name.isprintable() else name


def name_problem(name: Any) -> str:
    """Why ``name`` is not a plain path relative to the weights path (empty when it is one)."""
    if not isinstance(name, str) or not name:
        return "an empty name"
    if not name.isprintable():
        return f"{_quoted(name)}: a control character in the name"
    if name.startswith("/"):
        return f"{name}: an absolute path"
    if "\\" in name:
        return f"{name}: a backslash in the name"
    parts = name.split("/")
    if ".." in parts:
        return f"{name}: '..' leads outside the weights path"
    if "" in parts or "." in parts:
        return f"{name}: not a plain relative path (an empty or '.' component)"
    return ""


def _node(facts: Mapping[str, Any], host: str) -> Mapping[str, Any] | None:
    node = facts.get(host)
    return node if isinstance(node, Mapping) else None


def _manifest(node: Mapping[str, Any] | None, path: str) -> tuple[Mapping[str, Any] | None, bool, str]:
    """(files by name or None, whether the weights path exists, why there are no files to use)."""
    if node is None:
        return None, False, "its facts were not read (not in this run? --limit must include it)"
    weights = node.get("weights")
    if not isinstance(weights, Mapping) or "exists" not in weights:
        return None, False, "no manifest gathered (node_facts sections: [weights], with weights_path)"
    if weights.get("path") not in (None, path):
        return None, False, f"the manifest is of {weights.get('path')}, not of the profile's weights path {path}"
    if not weights.get("exists"):
        return {}, False, f"{path} does not exist"
    if weights.get("error"):
        return None, True, f"its manifest cannot be used: {weights['error']}"
    files = weights.get("files")
    if not isinstance(files, Mapping):
        return None, True, "its manifest lists no files (node_facts from another version of the collection?)"
    return files, True, ""


def _free(node: Mapping[str, Any] | None) -> tuple[int | None, str]:
    """The bytes a writer can use where the weights path is, or None and why not known."""
    disk = (node or {}).get("disk")
    if not isinstance(disk, Mapping) or not isinstance(disk.get("available_bytes"), int):
        return None, "its free space is unknown (node_facts sections: [disk], with weights_path)"
    if disk.get("read_only"):
        return None, f"its weights path is on a read-only filesystem ({disk.get('checked_path') or disk.get('path')})"
    return int(disk["available_bytes"]), ""


def _address(
    host: str, fabric: Mapping[str, Any], management: Mapping[str, Any], network: str
) -> tuple[str | None, str | None]:
    share = fabric.get(host)
    own = share.get("fabric") if isinstance(share, Mapping) else None
    address = own.get("address") if isinstance(own, Mapping) else None
    if network == "fabric" and address:
        return str(address), "fabric"
    managed = management.get(host)
    return (str(managed) if managed else host), "management"


def _conflicts(source: Mapping[str, Any], target: Mapping[str, Any]) -> list[str]:
    """Names that are a file on one side and a directory on the other: no copy can put one over the other."""
    found = []
    for first, second, layout in (
        (source, target, "a directory on the source, a file here"),
        (target, source, "a file on the source, a directory here"),
    ):
        for name in first:
            parent = posixpath.dirname(name)
            while parent:
                if parent in second:
                    found.append(f"{parent}: {layout}")
                    break
                parent = posixpath.dirname(parent)
    return sorted(set(found))


def _send(name: str, wanted: Mapping[str, Any], held: Mapping[str, Any] | None) -> tuple[str, str]:
    """(reason, detail) a file is sent for; ("", "") when the target's copy matches, ("unverified", "") when it
    matches by size alone."""
    if held is None:
        return "missing", ""
    size, have = wanted.get("size"), held.get("size")
    if isinstance(have, int) and isinstance(size, int) and have < size:
        return "truncated", f"{have:,} of {size:,} bytes"
    if have != size:
        return "size", f"{have:,} bytes, the source's {size:,}" if isinstance(have, int) else "size unknown"
    digest, theirs = wanted.get("sha256"), held.get("sha256")
    if digest and theirs:
        return ("sha256", f"{theirs[:16]}..., the source's {digest[:16]}...") if digest != theirs else ("", "")
    return "unverified", ""


def plan(
    facts: Mapping[str, Any],
    hosts: Sequence[str],
    head: str,
    weights_path: str | None,
    source: str = "",
    fabric: Mapping[str, Any] | None = None,
    management: Mapping[str, Any] | None = None,
    delete: bool = False,
    network: str = "fabric",
    reserve_bytes: int = DEFAULT_RESERVE_BYTES,
) -> dict[str, Any]:
    """The weights sync's plan: from ``source`` (``head`` when empty) to every other of ``hosts``.

    ``facts``: host to its node_facts answer (``weights`` and ``disk``, gathered with the profile's weights path).
    ``weights_path``: the profile's ``host.weights_path`` (the plan's ``preflight[host].weights_path``).
    ``fabric``: the plan's ``fabric`` (host to its share, whose ``fabric.address`` is the host's fabric address);
    ``management``: host to its management address (``ansible_host``; the inventory name where none).
    ``network``: ``fabric`` (where both ends have a fabric address) or ``management``.
    ``delete``: the files a target holds that the source lacks are deleted (else listed and kept).

    The answer: ``refusal`` (empty, or why nothing moves, before anything does), ``problems``, ``source`` (host,
    address, network, file count, bytes), ``targets`` (one each: host, address, network, ``source_address`` (the
    source's on that network), ``send`` (name, size, sha256 (the source manifest's, null where not hashed yet),
    reason, detail), ``bytes``, ``unverified``, ``extra``, ``delete``, ``free_bytes``, ``needed_bytes``, ``fits``,
    ``moves``), ``moving`` and ``matching`` hosts, ``bytes`` and ``files`` in all, ``warnings``, ``lines`` (a few
    lines a node) and ``summary``."""
    fabric, management = dict(fabric or {}), dict(management or {})
    hosts = list(dict.fromkeys(str(h) for h in hosts))
    source = str(source or head)
    out: dict[str, Any] = {
        "weights_path": weights_path,
        "delete": bool(delete),
        "network": network,
        "reserve_bytes": int(reserve_bytes),
        "source": {"host": source, "address": None, "network": None, "files": 0, "bytes": 0, "unhashed": 0},
        "targets": [],
        "moving": [],
        "matching": [],
        "bytes": 0,
        "files": 0,
        "warnings": [],
        "problems": [],
        "lines": [],
        "summary": "",
        "refusal": "",
        "report": [],
    }

    def refuse(*why: str) -> dict[str, Any]:
        out["problems"].extend(why)
        out["refusal"] = "weights.yml: nothing was moved: " + "; ".join(out["problems"])
        out["summary"] = f"refused ({len(out['problems'])} problem(s)): nothing moves"
        return out

    if network not in NETWORKS:
        return refuse(f"network must be one of {', '.join(NETWORKS)}, not {network!r}")
    if not isinstance(weights_path, str) or not weights_path:
        return refuse("the profile names no host.weights_path: there are no weights to sync")
    if not weights_path.startswith("/"):
        return refuse(f"the weights path {weights_path} is not absolute")
    if source not in hosts:
        return refuse(f"the source {source} is not one of the cluster's nodes ({', '.join(hosts) or 'none'})")
    files, _exists, why = _manifest(_node(facts, source), weights_path)
    if files is not None and not files:
        why = why or f"{weights_path} holds no files"
        files = None
    if files is None:
        return refuse(f"the source {source} has no weights to send: {why}")
    bad = [problem for problem in map(name_problem, files) if problem]
    if bad:
        return refuse(*(f"the source {source}: a name outside {weights_path}: {problem}" for problem in bad))
    source_address, source_network = _address(source, fabric, management, network)
    out["source"].update(
        address=source_address,
        network=source_network,
        files=len(files),
        bytes=sum(int(entry.get("size") or 0) for entry in files.values()),
        unhashed=sum(1 for entry in files.values() if not entry.get("sha256")),
    )
    problems: list[str] = []
    for host in hosts:
        if host == source:
            continue
        node = _node(facts, host)
        held, _exists, why = _manifest(node, weights_path)
        if held is None:
            problems.append(f"{host}: cannot tell which files it lacks: {why}")
            continue
        bad = [problem for problem in map(name_problem, held) if problem]
        if bad:
            problems.extend(f"{host}: a name outside {weights_path}: {problem}" for problem in bad)
            continue
        target = _target(host, source, files, held, fabric, management, network, source_network, bool(delete))
        conflicts = _conflicts(files, held)
        if conflicts:
            problems.append(f"{host}: {'; '.join(conflicts[:SHOWN])}: move or remove them by hand first")
        if target["send"]:
            free, why = _free(node)
            target["free_bytes"] = free
            target["needed_bytes"] = target["bytes"] + int(reserve_bytes)
            if free is None:
                problems.append(f"{host}: {why}, so whether {human(target['bytes'])} fit cannot be told")
            elif free < target["needed_bytes"]:
                target["fits"] = False
                problems.append(
                    f"{host}: not enough free space under {weights_path}: needs {human(target['bytes'])} "
                    f"({target['bytes']:,} bytes{_reserve_text(reserve_bytes)}), has {human(free)} "
                    f"({free:,} bytes) free"
                )
            else:
                target["fits"] = True
        out["targets"].append(target)
    for target in out["targets"]:
        (out["moving"] if target["moves"] else out["matching"]).append(target["host"])
        out["bytes"] += target["bytes"]
        out["files"] += len(target["send"])
    if out["source"]["unhashed"]:
        out["warnings"].append(
            f"the source {source} has not hashed {out['source']['unhashed']} of its {len(files)} files yet: files of "
            "the same size there and on a target are compared by size alone (a larger weights_hash_seconds hashes them)"
        )
    out["lines"] = _lines(out, weights_path)
    out["report"] = report(facts, out, weights_path)
    if problems:
        return refuse(*problems)
    _summary(out, source, weights_path)
    return out


def _reserve_text(reserve_bytes: int) -> str:
    return f", and {human(reserve_bytes)} kept free" if reserve_bytes else ""


def _target(
    host: str,
    source: str,
    files: Mapping[str, Any],
    held: Mapping[str, Any],
    fabric: Mapping[str, Any],
    management: Mapping[str, Any],
    network: str,
    source_network: str | None,
    delete: bool,
) -> dict[str, Any]:
    address, how = _address(host, fabric, management, network if source_network == "fabric" else "management")
    send, unverified = [], []
    for name in sorted(files):
        wanted = files[name]
        reason, detail = _send(name, wanted, held.get(name))
        if reason == "unverified":
            unverified.append(name)
        elif reason:
            send.append(
                {
                    "name": name,
                    "size": int(wanted.get("size") or 0),
                    "sha256": wanted.get("sha256"),
                    "reason": reason,
                    "detail": detail,
                }
            )
    extra = sorted(name for name in held if name not in files)
    target = {
        "host": host,
        "address": address,
        "network": how,
        # the source's address on the same network: a target without a fabric address is reached over management
        "source_address": _address(source, fabric, management, how or "management")[0],
        "send": send,
        "bytes": sum(item["size"] for item in send),
        "by_reason": {reason: sum(1 for item in send if item["reason"] == reason) for reason in REASONS},
        "unverified": unverified,
        "extra": extra,
        "delete": list(extra) if delete else [],
        "free_bytes": None,
        "needed_bytes": 0,
        "fits": None,
    }
    target["moves"] = bool(send or target["delete"])
    return target


def _named(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _lines(out: Mapping[str, Any], path: str) -> list[str]:
    source = out["source"]
    lines = [
        f"source {source['host']} ({source['address']}, {source['network']}): {source['files']} files, "
        f"{human(source['bytes'])} under {path}"
    ]
    for target in out["targets"]:
        where = f"{target['host']} ({target['address']}, {target['network']})"
        if target["send"]:
            reasons = ", ".join(f"{count} {reason}" for reason, count in target["by_reason"].items() if count)
            free = "free space unknown" if target["free_bytes"] is None else f"{human(target['free_bytes'])} free"
            lines.append(
                f"{where}: gets {len(target['send'])} of {source['files']} files, {human(target['bytes'])} "
                f"({reasons}; {free}): "
                + _named(
                    [f"{i['name']} ({i['reason']}{': ' + i['detail'] if i['detail'] else ''})" for i in target["send"]]
                )
            )
        else:
            lines.append(f"{where}: matches {source['host']} ({source['files']} files), nothing to send")
        if target["unverified"]:
            lines.append(
                f"{target['host']}: {len(target['unverified'])} file(s) of the same size compared by size alone "
                "(not hashed on one side yet), not sent"
            )
        if target["extra"]:
            fate = "deleted (weights_delete)" if target["delete"] else "kept: only -e weights_delete=true deletes them"
            lines.append(
                f"{target['host']}: {len(target['extra'])} file(s) not on {source['host']}, {fate}: "
                f"{_named(target['extra'])}"
            )
    return lines


def _summary(out: dict[str, Any], source: str, path: str) -> None:
    targets = len(out["targets"])
    deleting = sum(len(t["delete"]) for t in out["targets"])
    if not out["moving"]:
        out["summary"] = f"{path}: every node ({targets}) matches {source}: nothing moves"
        return
    gone = f", deletes {deleting} file(s)" if deleting else ""
    out["summary"] = (
        f"{path}: {len(out['moving'])} of {targets} node(s) differ from {source} ({', '.join(out['moving'])}): "
        f"sends {out['files']} file(s), {human(out['bytes'])} in all{gone}"
    )


def report(facts: Mapping[str, Any], out: Mapping[str, Any], path: str) -> list[str]:
    """The model cache view (``weights.yml -e weights_report=true``): per node its model directory, its size, its
    match against the source, and its free space."""
    source = out["source"]["host"]
    lines = []
    for host in [source, *(target["host"] for target in out["targets"])]:
        node = _node(facts, host) or {}
        weights = node.get("weights") if isinstance(node.get("weights"), Mapping) else {}
        free, why = _free(node)
        space = f"{human(free)} free" if free is not None else why
        if not weights.get("exists"):
            held = f"{path} absent"
        else:
            held = f"{path}, {weights.get('file_count', 0)} files, {human(int(weights.get('total_bytes') or 0))}"
            if weights.get("not_hashed"):
                held += f" ({weights['not_hashed']} not hashed yet)"
        if host == source:
            match = "the source"
        else:
            target = next(t for t in out["targets"] if t["host"] == host)
            if target["send"]:
                reasons = ", ".join(f"{n} {r}" for r, n in target["by_reason"].items() if n)
                sending = f"{len(target['send'])} file(s), {human(target['bytes'])} to send"
                match = f"DIFFERS from {source}: {sending} ({reasons})"
            elif target["unverified"]:
                match = f"matches {source} by size ({len(target['unverified'])} file(s) not hashed on one side yet)"
            else:
                match = f"matches {source} (SHA-256)"
            if target["extra"]:
                match += f"; {len(target['extra'])} file(s) not on {source}"
        lines.append(f"{host}: {held}; {match}; {space}")
    return lines
