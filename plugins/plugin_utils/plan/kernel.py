# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's kernel and limits compared with what the serving profile needs: a list of findings.

Controller side, plain data in and out. ``node`` is the ``node`` dict the ``node_facts`` module returns
(``ansible_facts.dgxspark_node``); ``expect`` is the profile's ``host.kernel`` (release, page_size,
memory_saver_required, cmdline_required) plus ``kho_on_7x`` and ``ulimits`` (what ``container_ulimits``
gives). A key that is missing or null is not required: its check is SKIP and says so.

Every check gives one :class:`Finding`: PASS, FAIL, WARN or SKIP, what was expected and found, and a
:class:`Fix` where one is known. A fact node_facts could not read is never a PASS: it is a FAIL that
says which file was unreadable (WARN only where the answer depends on a daemon that is not running).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import (
    Collector,
    Problem,
    ProfileError,
    did_you_mean,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight.files import sysctl_problems
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.policy import (
    KERNEL_WORDS,
    KERNEL_WORDS_KNOWN,
    known_kernel_word,
)
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.schema import CMDLINE_WORD, CMDLINE_WORD_HINT

PASS, FAIL, WARN, SKIP = "PASS", "FAIL", "WARN", "SKIP"
UNLIMITED = -1
# Field report 6 (REFERENCE.md): 7.x kernels break RoCE memory registration unless booted with kho=off.
KHO_WORD = "kho=off"
KHO_RELEASE_PREFIX = "7."
# What node_facts read each fact from, for the "could not read" of a missing one.
RELEASE_SOURCE = "/proc/sys/kernel/osrelease"
PAGE_SIZE_SOURCE = "the page size (/proc/self/smaps)"
CMDLINE_SOURCE = "/proc/cmdline"
MEMORY_SAVER_SOURCE = "/sys/module/nvidia_uvm/parameters/uvm_pack_sysmem_leaf_tables"
NR_OPEN_SOURCE = "/proc/sys/fs/nr_open"
# docker --ulimit name -> the docker.service directive that raises dockerd's own limit.
SYSTEMD_LIMITS = {"nofile": "LimitNOFILE", "memlock": "LimitMEMLOCK", "stack": "LimitSTACK", "core": "LimitCORE"}
DOCKER_DROP_IN = "/etc/systemd/system/docker.service.d/"


@dataclass(frozen=True)
class Fix:
    """How to put a FAIL right. ``live``: safe now, without a reboot or a daemon restart."""

    kind: str
    """sysctl, grub-cmdline, docker-limits or manual."""
    live: bool
    reboot: bool
    detail: str
    extra: Mapping[str, Any] = field(default_factory=dict)
    """The kind's own keys: sysctl name and value, grub-cmdline word, docker-limits limits."""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "live": self.live, "reboot": self.reboot, "detail": self.detail, **self.extra}


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    expected: str
    found: str
    message: str
    fix: Fix | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            **{name.name: getattr(self, name.name) for name in fields(self)},
            "fix": self.fix.as_dict() if self.fix else None,
        }


def _compared(check: str, status: str, label: str, expected: str, found: str, fix: Fix | None = None) -> Finding:
    return Finding(check, status, expected, found, f"{label}: expected {expected}, found {found}", fix)


def _skipped(
    check: str, label: str, reason: str, expected: str = "not required", found: str = "not checked"
) -> Finding:
    return Finding(check, SKIP, expected, found, f"{label}: not checked, {reason}")


# ---------------------------------------------------------------- the inputs
@dataclass(frozen=True)
class _Node:
    """Read access to the node facts: a missing section or key reads as None."""

    data: Mapping[str, Any]

    def get(self, section: str, *keys: str) -> Any:
        value: Any = self.data.get(section)
        for key in keys:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        return value

    def unknown(self, section: str, source: str) -> str:
        if not isinstance(self.data.get(section), Mapping):
            return f"unknown (the node facts have no {section} section)"
        return f"unknown (could not read {source})"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_cmdline_word(word: Any) -> bool:
    """A kernel command-line word the collection writes into GRUB's drop-in: the profile's allow-list."""
    return isinstance(word, str) and re.fullmatch(CMDLINE_WORD, word) is not None


def _is_words(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and all(is_cmdline_word(w) for w in value)


GRUB_VARIABLE = "GRUB_CMDLINE_LINUX_DEFAULT"


def grub_dropin(words: Any, waived: Any = ()) -> str:
    """The GRUB drop-in (``/etc/default/grub.d/*.cfg``, sourced by sh when update-grub runs) that appends
    ``words`` to the kernel command line: one assignment per word, each word shell-quoted. Raises
    ``ValueError`` naming every word that is not on the allow-lists: nothing is rendered from them. A word must
    be one the collection knows (``policy.KERNEL_WORD_VALUES``) or one of ``waived`` (the words the profile's
    waiver kernel-words lets through: :func:`required`'s ``cmdline_waived``), and in either case written in the
    characters the drop-in can hold."""
    if isinstance(words, str) or not isinstance(words, Sequence):
        raise ValueError(f"expected a list of kernel command-line words, found {type(words).__name__}")
    bad = [w for w in words if not is_cmdline_word(w)]
    if bad:
        raise ValueError(
            "not kernel command-line words the collection writes into GRUB's configuration: "
            + ", ".join(repr(w) for w in bad)
            + f" (expected {CMDLINE_WORD_HINT})"
        )
    allowed = set(waived) if isinstance(waived, Sequence) and not isinstance(waived, str) else set()
    unknown = [w for w in words if not known_kernel_word(w) and w not in allowed]
    if unknown:
        raise ValueError(
            "kernel command-line words the collection does not know and the profile does not waive: "
            + ", ".join(repr(w) for w in unknown)
            + f" (known: {KERNEL_WORDS_KNOWN}; waiver: {KERNEL_WORDS})"
        )
    lines = ["# Managed by dgxspark.cluster (kernel): words the serving profile needs on the kernel command line."]
    lines += [f'{GRUB_VARIABLE}="${{{GRUB_VARIABLE}}} "{shlex.quote(word)}' for word in dict.fromkeys(words)]
    return "\n".join(lines) + "\n"


SYSCTL_HEADER = "# Managed by dgxspark.cluster (kernel): what the serving profile needs, set live and at every boot."


def sysctl_dropin(settings: Any, existing: Any = None) -> str:
    """The kernel role's ``sysctl.d`` file: the settings ``existing`` (the file on the node, as this role wrote it)
    holds, with ``settings`` (name -> value: the live fixes of this run) over them, one ``key = value`` line each,
    sorted. A setting kept from an earlier run stays: the file is what makes it last a reboot. Raises
    ``ValueError`` when a key is not one the role sets or a value is not a number (``_file_checks``, the check the
    node runs on the file again before it is installed)."""
    if not isinstance(settings, Mapping):
        raise ValueError(f"expected the settings as a dict of name: value, found {type(settings).__name__}")
    values: dict[str, str] = {}
    for line in str(existing or "").splitlines():
        stripped = line.strip()
        if stripped and stripped[0] not in "#;":
            key, _equals, value = stripped.partition("=")
            values[key.strip()] = value.strip()
    values.update({str(key): str(value) for key, value in settings.items()})
    text = "\n".join([SYSCTL_HEADER] + [f"{key} = {value}" for key, value in sorted(values.items())]) + "\n"
    problems = sysctl_problems(text, "kernel")
    if problems:
        raise ValueError("not settings the kernel role writes into its sysctl.d file: " + "; ".join(problems))
    return text


def _is_ulimits(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(name, str)
        and isinstance(limit, Mapping)
        and set(limit) <= {"soft", "hard"}
        and all(v is None or (_is_int(v) and v >= UNLIMITED) for v in limit.values())
        for name, limit in value.items()
    )


_EXPECT: dict[str, tuple[Callable[[Any], bool], str]] = {
    "release": (lambda v: isinstance(v, str) and bool(v) and v.strip() == v, "a `uname -r` string"),
    "page_size": (lambda v: _is_int(v) and v > 0, "a page size in bytes, such as 65536"),
    "memory_saver_required": (lambda v: isinstance(v, bool), "true or false"),
    "cmdline_required": (_is_words, f'a list of command-line words, such as ["kho=off"]: {CMDLINE_WORD_HINT}'),
    "cmdline_waived": (_is_words, "the words of cmdline_required the profile's waiver kernel-words lets through"),
    "kho_on_7x": (lambda v: isinstance(v, bool), "true or false"),
    "ulimits": (_is_ulimits, "{name: {soft, hard}} with integers, -1 for unlimited (container_ulimits' format)"),
}


def _checked_inputs(node: Any, expect: Any) -> tuple[_Node, dict[str, Any]]:
    """The node facts (also taken from a registered node_facts result) and ``expect`` without its nulls."""
    out = Collector()
    if isinstance(node, Mapping) and isinstance(node.get("node"), Mapping) and "kernel" not in node:
        node = node["node"]
    if not isinstance(node, Mapping):
        out.error("node", "not node facts", found=type(node).__name__, expected="the node dict node_facts returns")
    expect = {} if expect is None else expect
    if not isinstance(expect, Mapping):
        out.error("expect", "not a mapping", found=type(expect).__name__, expected="a dict of what the node needs")
        expect = {}
    for key, value in expect.items():
        if key not in _EXPECT:
            out.error(f"expect.{key}", "unknown key", expected=", ".join(_EXPECT), hint=did_you_mean(str(key), _EXPECT))
        elif value is not None and not _EXPECT[key][0](value):
            out.error(f"expect.{key}", "wrong value", found=value, expected=_EXPECT[key][1])
    out.raise_if_errors()
    return _Node(node), {k: v for k, v in expect.items() if v is not None}


# ---------------------------------------------------------------- the checks
def _size(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} bytes"


def _limit(value: Any) -> str:
    return "unlimited" if value == UNLIMITED else str(value)


def _release(node: _Node, expected: str | None) -> Finding:
    check, label = "kernel-release", "kernel release"
    if expected is None:
        return _skipped(check, label, "expect.release not given")
    found = node.get("kernel", "release")
    if found is None:
        return _compared(check, FAIL, label, expected, node.unknown("kernel", RELEASE_SOURCE))
    if found == expected:
        return _compared(check, PASS, label, expected, found)
    fix = Fix("manual", live=False, reboot=True, detail=f"install kernel {expected}, make it GRUB's default and reboot")
    return _compared(check, FAIL, label, expected, found, fix)


def _page_size(node: _Node, expected: int | None, release: str | None) -> Finding:
    check, label = "page-size", "page size"
    if expected is None:
        return _skipped(check, label, "expect.page_size not given")
    found = node.get("kernel", "page_size")
    if found is None:
        return _compared(check, FAIL, label, _size(expected), node.unknown("kernel", PAGE_SIZE_SOURCE))
    if found == expected:
        return _compared(check, PASS, label, _size(expected), _size(found))
    flavour = f" ({release})" if release else ""
    detail = f"install and boot a kernel built for {_size(expected)} pages{flavour}, then reboot"
    return _compared(check, FAIL, label, _size(expected), _size(found), Fix("manual", False, True, detail))


def _memory_saver(node: _Node, required: bool | None) -> Finding:
    check, label, expected = "memory-saver", "memory saver", "loaded (the memory-saver nvidia_uvm)"
    if not required:
        reason = "expect.memory_saver_required not given" if required is None else "memory_saver_required is false"
        return _skipped(check, label, reason)
    loaded = node.get("kernel", "memory_saver", "loaded")
    if loaded is None:
        return _compared(check, FAIL, label, expected, node.unknown("kernel", MEMORY_SAVER_SOURCE))
    if not loaded:
        found = "not loaded" + ("" if node.get("kernel", "nvidia", "uvm_loaded") else " (no nvidia_uvm at all)")
        detail = (
            "install the memory-saver build of nvidia_uvm (DKMS, christopherowen/dgx-spark-memory-saver) and "
            "reload nvidia_uvm, which needs an idle GPU (no container using it); otherwise reboot"
        )
        return _compared(check, FAIL, label, expected, found, Fix("manual", False, False, detail))
    if node.get("kernel", "memory_saver", "packing_enabled") is False:
        detail = "load nvidia_uvm with uvm_pack_sysmem_leaf_tables=1 (/etc/modprobe.d/) while the GPU is idle"
        found = "loaded, but uvm_pack_sysmem_leaf_tables is off"
        return _compared(check, WARN, label, expected, found, Fix("manual", False, False, detail))
    return _compared(check, PASS, label, expected, "loaded")


def _kernel_words(cmdline: Sequence[str]) -> list[str]:
    """The kernel's own parameters: the words before ``--`` (those after it go to init)."""
    words = list(cmdline)
    return words[: words.index("--")] if "--" in words else words


def _same_key(words: Sequence[str], word: str) -> list[str]:
    """The words that set the same parameter as ``word`` (``kho=on`` for ``kho=off``); the last one counts."""
    key = word.split("=", 1)[0]
    return [w for w in words if w.split("=", 1)[0] == key]


def _cmdline_word(
    node: _Node, check: str, word: str, expected: str, label: str = "kernel command line", reason: str = ""
) -> Finding:
    cmdline = node.get("kernel", "cmdline")
    if cmdline is None:
        return _compared(check, FAIL, label, expected, node.unknown("kernel", CMDLINE_SOURCE))
    same = _same_key(_kernel_words(cmdline), word)
    if same and same[-1] == word:
        return _compared(check, PASS, label, expected, word)
    if not same:
        found = f"no {word.split('=', 1)[0]}= word" if "=" in word else f"no {word}"
    else:
        found = " ".join(same) + (" (the last one counts)" if len(same) > 1 else "")
    replacing = f" (replacing {' '.join(w for w in same if w != word)})" if same else ""
    detail = f"add {word} to GRUB_CMDLINE_LINUX in /etc/default/grub{replacing}, run update-grub and reboot{reason}"
    fix = Fix("grub-cmdline", live=False, reboot=True, detail=detail, extra={"word": word})
    return _compared(check, FAIL, label, expected, found, fix)


def _cmdline(node: _Node, words: Sequence[str]) -> list[Finding]:
    if not words:
        return [_skipped("cmdline", "kernel command line", "expect.cmdline_required not given")]
    return [_cmdline_word(node, f"cmdline:{word}", word, word) for word in dict.fromkeys(words)]


def _kho_off_7x(node: _Node, wanted: bool, required_words: Sequence[str]) -> Finding | None:
    """kho=off on a 7.x kernel; None when cmdline_required already asks for kho=off (one finding, not two)."""
    check, label, expected = "kho-off-7x", "kho=off on 7.x", f"{KHO_WORD} on a 7.x kernel"
    if KHO_WORD in required_words:
        return None
    if not wanted:
        return _skipped(check, label, "expect.kho_on_7x is false", expected)
    release = node.get("kernel", "release")
    if release is None:
        cmdline = node.get("kernel", "cmdline")
        if cmdline is not None and _same_key(_kernel_words(cmdline), KHO_WORD)[-1:] == [KHO_WORD]:
            return _compared(check, PASS, label, expected, f"{KHO_WORD} (kernel release unknown)")
        return _compared(check, WARN, label, expected, "cannot tell (kernel release unknown)")
    if not release.startswith(KHO_RELEASE_PREFIX):
        return _skipped(check, label, f"kernel {release} is not 7.x", expected, f"kernel {release}")
    reason = " (7.x kernels need it for RoCE memory registration)"
    return _cmdline_word(node, check, KHO_WORD, f"{KHO_WORD} (kernel {release} is 7.x)", label, reason)


def _covers(have: int, need: int) -> bool:
    if need == UNLIMITED:
        return have == UNLIMITED
    return have == UNLIMITED or have >= need


def _docker_limits_fix(name: str, need: int) -> Fix:
    directive = SYSTEMD_LIMITS.get(name, f"Limit{name.upper()}")
    value = "infinity" if need == UNLIMITED else str(need)
    detail = (
        f"set {directive}={value} in a systemd drop-in for docker.service ({DOCKER_DROP_IN}), run "
        "systemctl daemon-reload and restart docker, which stops running containers"
    )
    if name == "nofile":
        detail += "; fs.nr_open must be at least as large"
    return Fix("docker-limits", live=False, reboot=False, detail=detail, extra={"limits": {name: need}})


def _ulimit(node: _Node, name: str, need: int | None) -> Finding:
    """What dockerd can give a container: anything (nofile up to fs.nr_open, which ``nr-open`` checks)
    when it holds CAP_SYS_RESOURCE, as root's dockerd does on a Spark; else no more than its own hard
    limit (runc cannot raise it: "error setting rlimits ... operation not permitted")."""
    check, label = f"ulimit:{name}", f"ulimit {name} (what dockerd can grant)"
    if need is None:
        return _skipped(check, label, f"expect.ulimits.{name} has no hard limit")
    expected = "unlimited" if need == UNLIMITED else f">= {need}"
    if not isinstance(node.get("limits"), Mapping):
        return _compared(check, FAIL, label, expected, node.unknown("limits", "/proc/<pid>/limits"))
    dockerd = node.get("limits", "dockerd")
    if not isinstance(dockerd, Mapping):
        return _compared(check, WARN, label, expected, "cannot tell (dockerd is not running)")
    if dockerd.get("cap_sys_resource") is True:
        if name == "nofile":
            return _compared(check, PASS, label, expected, "up to fs.nr_open (dockerd holds CAP_SYS_RESOURCE)")
        return _compared(check, PASS, label, expected, "any (dockerd holds CAP_SYS_RESOURCE)")
    if name not in dockerd:
        return _compared(check, WARN, label, expected, f"cannot tell (node_facts does not report {name})")
    have = node.get("limits", "dockerd", name, "hard")
    if have is None:
        return _compared(check, FAIL, label, expected, f"unknown (could not read /proc/{dockerd.get('pid')}/limits)")
    found = _limit(have)
    if dockerd.get("cap_sys_resource") is False:
        found += " (dockerd's hard limit; it lacks CAP_SYS_RESOURCE)"
    if _covers(have, need):
        return _compared(check, PASS, label, expected, found)
    return _compared(check, FAIL, label, expected, found, _docker_limits_fix(name, need))


def _nr_open(node: _Node, need: int) -> Finding:
    check, label = "nr-open", "fs.nr_open"
    nr_open = node.get("limits", "nr_open")
    found = node.unknown("limits", NR_OPEN_SOURCE) if nr_open is None else str(nr_open)
    if need == UNLIMITED:
        fix = Fix("manual", False, False, "give nofile a number in the profile's --ulimit, at most fs.nr_open")
        return _compared(check, FAIL, label, "a number (nofile cannot be unlimited)", found, fix)
    expected = f">= {need} (the nofile hard limit)"
    if nr_open is None:
        return _compared(check, FAIL, label, expected, found)
    if nr_open >= need:
        return _compared(check, PASS, label, expected, found)
    detail = f"sysctl -w fs.nr_open={need} and persist it in /etc/sysctl.d/; takes effect at once"
    fix = Fix("sysctl", live=True, reboot=False, detail=detail, extra={"name": "fs.nr_open", "value": str(need)})
    return _compared(check, FAIL, label, expected, found, fix)


def _ulimits(node: _Node, needed: Mapping[str, Mapping[str, Any]] | None) -> list[Finding]:
    if not needed:
        return [_skipped("ulimits", "container ulimits", "expect.ulimits not given")]
    findings = [_ulimit(node, name, limit.get("hard")) for name, limit in sorted(needed.items())]
    nofile = needed.get("nofile", {}).get("hard")
    if nofile is not None:
        findings.append(_nr_open(node, nofile))
    return findings


# ---------------------------------------------------------------- entry points
def required(
    planned: Mapping[str, Any],
    expect: Any = None,
    kho_on_7x: Any = True,
    check_limits: bool = True,
    host: str | None = None,
) -> dict[str, Any]:
    """What a node must have (:func:`kernel_findings`' ``expect``), from a ``serving_profile`` result
    (``planned``): the profile's ``host.kernel`` with the role's ``expect`` over it, ``kho_on_7x``, and the
    container's ulimits when ``check_limits``, else none. With a plan that holds ``host``, its slice of the plan
    (``plan.kernel[host]``: its own rank's ulimits, the host's overrides included); else the profile's, with the
    ulimits of its shape's container."""
    plan = planned.get("plan") or {}
    if host is not None and host in (plan.get("kernel") or {}):
        own = dict(plan["kernel"][host])
        ulimits = own.pop("ulimits") if check_limits else None
        return {**own, **dict(expect or {}), "kho_on_7x": kho_on_7x, "ulimits": ulimits}
    profile = planned["profile"]
    kernel = (profile.get("host") or {}).get("kernel") or {}
    ulimits = None
    if check_limits:
        # the plan's modules, imported only when asked (plugin_utils/_lazy.py says why)
        from ansible_collections.dgxspark.cluster.plugins.plugin_utils._api import container_ulimits

        ulimits = container_ulimits(profile, shape=planned.get("shape"))
    merged = {**kernel, **dict(expect or {}), "kho_on_7x": kho_on_7x, "ulimits": ulimits}
    words = merged.get("cmdline_required") or []
    unknown = [w for w in words if isinstance(w, str) and not known_kernel_word(w)] if _is_words(words) else []
    waiver = (profile.get("waivers") or {}).get(KERNEL_WORDS)
    if unknown and not waiver:
        raise ProfileError(
            [
                Problem(
                    "kernel_expect.cmdline_required",
                    "kernel command-line words the collection does not know: the role would write them into GRUB's "
                    "configuration",
                    found=unknown,
                    expected="known words only: " + KERNEL_WORDS_KNOWN,
                    hint=f'or a profile that needs them names the waiver "{KERNEL_WORDS}" with its reason',
                )
            ]
        )
    merged["cmdline_waived"] = unknown
    return merged


def failed_fixes(findings: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    """The fixes of ``kind`` (sysctl, grub-cmdline, docker-limits, manual) that the FAILed findings name."""
    return [
        f["fix"]
        for f in findings
        if f.get("status") == FAIL and isinstance(f.get("fix"), Mapping) and f["fix"].get("kind") == kind
    ]


def live_sysctls(findings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The sysctls to set live (name -> value): the FAILed findings' ``sysctl`` fixes that are safe live."""
    return {str(fix["name"]): fix["value"] for fix in failed_fixes(findings, "sysctl") if fix.get("live")}


def missing_words(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The kernel command-line words the node lacks (its FAILed findings' ``grub-cmdline`` fixes), sorted, once
    each: what the GRUB drop-in adds."""
    return sorted({str(fix["word"]) for fix in failed_fixes(findings, "grub-cmdline")})


def check_node(node: Any, expect: Any) -> list[Finding]:
    """Every check, in a fixed order; raises ProfileError when ``node`` or ``expect`` is malformed."""
    facts, wanted = _checked_inputs(node, expect)
    required_words = list(wanted.get("cmdline_required", []))
    findings = [
        _release(facts, wanted.get("release")),
        _page_size(facts, wanted.get("page_size"), wanted.get("release")),
        _memory_saver(facts, wanted.get("memory_saver_required")),
        *_cmdline(facts, required_words),
    ]
    kho = _kho_off_7x(facts, wanted.get("kho_on_7x", True), required_words)
    if kho is not None:
        findings.append(kho)
    return findings + _ulimits(facts, wanted.get("ulimits"))


def kernel_findings(node: Any, expect: Any = None, skip: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One node's findings as plain dicts (check, status, expected, found, message, fix). Checks named in
    ``skip`` (their ``check`` name, or the part before ``:`` such as ``ulimit``) are SKIP on purpose."""
    wanted = set(skip or ())
    findings = []
    for finding in check_node(node, expect):
        if finding.check in wanted or finding.check.partition(":")[0] in wanted:
            finding = Finding(
                finding.check,
                SKIP,
                finding.expected,
                finding.found,
                f"{finding.check}: skipped on purpose (listed in the checks to skip); it would be {finding.status}",
            )
        findings.append(finding.as_dict())
    return findings


def report(findings_by_host: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """Every host's findings as report lines, ``<status>  <host>  <check>  <text>``, columns aligned across
    hosts; a host without findings says so."""
    lines: list[str] = []
    for host, findings in findings_by_host.items():
        if not isinstance(findings, Sequence) or isinstance(findings, str):
            lines.append(f"SKIP  {host}: not checked")
            continue
        for line in summary(findings).splitlines():
            status, check, text = line[:4].strip(), *line[6:].split(None, 1)
            lines.append(f"{status:<4}  {host}  {check}  {text}")
    return lines


def _timing(fix: Mapping[str, Any]) -> str:
    if fix.get("live"):
        return "live"
    return "needs a reboot" if fix.get("reboot") else "not live"


def summary(findings: Sequence[Mapping[str, Any] | Finding]) -> str:
    """One line per finding: ``FAIL  kernel-release  expected ..., found ... (fix: ...; needs a reboot)``."""
    rows = [f.as_dict() if isinstance(f, Finding) else f for f in findings]
    width = max((len(row["check"]) for row in rows), default=0)
    lines = []
    for row in rows:
        if row["status"] == SKIP:
            text = row["message"].partition(": ")[2] or row["message"]
        else:
            text = f"expected {row['expected']}, found {row['found']}"
        fix = row.get("fix")
        if fix:
            text += f" (fix: {fix['detail']}; {_timing(fix)})"
        lines.append(f"{row['status']:<4}  {row['check']:<{width}}  {text}")
    return "\n".join(lines)
