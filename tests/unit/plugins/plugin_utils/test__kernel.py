# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_findings against real node facts: the GB10 tree (a DGX Spark on 7.0.0-1019-nvidia-64k) and the bare
build machine (6.18, 4 KiB pages, no GPU), gathered by node_facts' own gather()."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.dgxspark.cluster.plugins.filter.kernel import FilterModule
from ansible_collections.dgxspark.cluster.plugins.filter.serving import FilterModule as ServingFilters
from ansible_collections.dgxspark.cluster.plugins.module_utils._node_facts import CommandResult, Options, gather
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._problems import ProfileError
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan.kernel import kernel_findings, summary
from ansible_collections.dgxspark.cluster.tests.unit.conftest import SPARK3, SPARK8, read
from ansible_collections.dgxspark.cluster.tests.unit.plugins.module_utils.node_facts_support import BARE, GB10

SPARK_RELEASE = "7.0.0-1019-nvidia-64k"
BARE_RELEASE = "6.18.44-fc-v669"
# The profile's host.kernel (inventories/spark3, from seed 000), without cmdline_required unless a test adds it.
PROFILE_KERNEL = {"release": SPARK_RELEASE, "page_size": 65536, "memory_saver_required": True}


def _no_commands(argv: list[str]) -> CommandResult:
    raise AssertionError(f"kernel and limits need no command, ran {argv}")


def _gather(tree: pathlib.Path) -> dict[str, Any]:
    options = Options(sections=("kernel", "limits"), proc_root=str(tree / "proc"), sys_root=str(tree / "sys"))
    return gather(options, _no_commands)


GB10_NODE = _gather(GB10)
BARE_NODE = _gather(BARE)


def gb10(**changes: Any) -> dict[str, Any]:
    """The GB10 node facts with ``{"kernel.release": value}`` changes."""
    node = copy.deepcopy(GB10_NODE)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        target = node
        for key in parents:
            target = target[key]
        target[last] = value
    return node


def by_check(node: Any, expect: Any) -> dict[str, dict[str, Any]]:
    findings = kernel_findings(node, expect)
    assert len({f["check"] for f in findings}) == len(findings), "check names are unique"
    return {f["check"]: f for f in findings}


def one(node: Any, expect: Any, check: str) -> dict[str, Any]:
    return by_check(node, expect)[check]


def test_the_fixtures_are_what_the_tests_assume() -> None:
    assert GB10_NODE["problems"] == [] and BARE_NODE["problems"] == []
    assert GB10_NODE["kernel"]["release"] == SPARK_RELEASE and BARE_NODE["kernel"]["release"] == BARE_RELEASE
    assert GB10_NODE["limits"]["dockerd"]["nofile"] == {"soft": 524288, "hard": 524288}
    assert GB10_NODE["limits"]["dockerd"]["memlock"] == {"soft": 8388608, "hard": 8388608}
    assert GB10_NODE["limits"]["dockerd"]["stack"]["hard"] == -1


# ---------------------------------------------------------------- every check on the Spark, and the order
def test_gb10_meets_the_spark3_profile_kernel() -> None:
    expect = read(SPARK3)["host"]["kernel"]
    findings = kernel_findings(GB10_NODE, expect)
    assert [(f["check"], f["status"]) for f in findings] == [
        ("kernel-release", "PASS"),
        ("page-size", "PASS"),
        ("memory-saver", "PASS"),
        ("cmdline:kho=off", "PASS"),
        ("ulimits", "SKIP"),
    ]
    assert findings[0] == {
        "check": "kernel-release",
        "status": "PASS",
        "expected": SPARK_RELEASE,
        "found": SPARK_RELEASE,
        "message": f"kernel release: expected {SPARK_RELEASE}, found {SPARK_RELEASE}",
        "fix": None,
    }
    assert findings[1]["message"] == "page size: expected 64 KiB, found 64 KiB"
    assert findings[2]["message"] == "memory saver: expected loaded (the memory-saver nvidia_uvm), found loaded"
    assert findings[3]["message"] == "kernel command line: expected kho=off, found kho=off"
    assert findings[4]["message"] == "container ulimits: not checked, expect.ulimits not given"


def test_nothing_required_is_all_skip_and_says_why() -> None:
    findings = kernel_findings(BARE_NODE, {"kho_on_7x": False})
    assert {f["status"] for f in findings} == {"SKIP"}
    assert [f["message"] for f in findings] == [
        "kernel release: not checked, expect.release not given",
        "page size: not checked, expect.page_size not given",
        "memory saver: not checked, expect.memory_saver_required not given",
        "kernel command line: not checked, expect.cmdline_required not given",
        "kho=off on 7.x: not checked, expect.kho_on_7x is false",
        "container ulimits: not checked, expect.ulimits not given",
    ]
    assert kernel_findings(BARE_NODE, None)[0]["status"] == "SKIP"
    assert one(BARE_NODE, {"memory_saver_required": False}, "memory-saver")["message"] == (
        "memory saver: not checked, memory_saver_required is false"
    )


# ---------------------------------------------------------------- kernel release
def test_release_fail_on_the_build_machine() -> None:
    finding = one(BARE_NODE, PROFILE_KERNEL, "kernel-release")
    assert finding["status"] == "FAIL"
    assert finding["message"] == f"kernel release: expected {SPARK_RELEASE}, found {BARE_RELEASE}"
    assert finding["fix"] == {
        "kind": "manual",
        "live": False,
        "reboot": True,
        "detail": f"install kernel {SPARK_RELEASE}, make it GRUB's default and reboot",
    }


def test_release_is_an_exact_match() -> None:
    finding = one(GB10_NODE, {"release": "7.0.0-1019-nvidia"}, "kernel-release")
    assert (finding["status"], finding["found"]) == ("FAIL", SPARK_RELEASE)


def test_unreadable_release_fails() -> None:
    finding = one(gb10(**{"kernel.release": None}), PROFILE_KERNEL, "kernel-release")
    assert finding["status"] == "FAIL" and finding["fix"] is None
    assert finding["message"] == (
        f"kernel release: expected {SPARK_RELEASE}, found unknown (could not read /proc/sys/kernel/osrelease)"
    )


def test_a_missing_kernel_section_fails_every_kernel_check() -> None:
    node = {k: v for k, v in GB10_NODE.items() if k != "kernel"}
    findings = by_check(node, {**PROFILE_KERNEL, "cmdline_required": ["kho=off"]})
    for check in ("kernel-release", "page-size", "memory-saver", "cmdline:kho=off"):
        assert findings[check]["status"] == "FAIL"
        assert findings[check]["found"] == "unknown (the node facts have no kernel section)"


# ---------------------------------------------------------------- page size
def test_page_size_fail_says_kib() -> None:
    finding = one(BARE_NODE, PROFILE_KERNEL, "page-size")
    assert finding["status"] == "FAIL"
    assert (finding["expected"], finding["found"]) == ("64 KiB", "4 KiB")
    assert finding["message"] == "page size: expected 64 KiB, found 4 KiB"
    assert finding["fix"] == {
        "kind": "manual",
        "live": False,
        "reboot": True,
        "detail": f"install and boot a kernel built for 64 KiB pages ({SPARK_RELEASE}), then reboot",
    }


def test_page_size_unknown_fails() -> None:
    finding = one(gb10(**{"kernel.page_size": None}), {"page_size": 65536}, "page-size")
    assert finding["status"] == "FAIL"
    assert (
        finding["message"]
        == "page size: expected 64 KiB, found unknown (could not read the page size (/proc/self/smaps))"
    )


# ---------------------------------------------------------------- memory saver
def test_memory_saver_missing_on_the_build_machine() -> None:
    finding = one(BARE_NODE, PROFILE_KERNEL, "memory-saver")
    assert finding["status"] == "FAIL"
    assert finding["message"] == (
        "memory saver: expected loaded (the memory-saver nvidia_uvm), found not loaded (no nvidia_uvm at all)"
    )
    fix = finding["fix"]
    assert (fix["kind"], fix["live"], fix["reboot"]) == ("manual", False, False)
    assert "DKMS" in fix["detail"] and "idle GPU" in fix["detail"]


def test_stock_nvidia_uvm_is_not_the_memory_saver() -> None:
    node = gb10(**{"kernel.memory_saver": {"loaded": False, "packing_enabled": None}})
    finding = one(node, PROFILE_KERNEL, "memory-saver")
    assert (finding["status"], finding["found"]) == ("FAIL", "not loaded")


def test_memory_saver_with_packing_off_is_a_warning() -> None:
    node = gb10(**{"kernel.memory_saver": {"loaded": True, "packing_enabled": False}})
    finding = one(node, PROFILE_KERNEL, "memory-saver")
    assert finding["status"] == "WARN"
    assert finding["found"] == "loaded, but uvm_pack_sysmem_leaf_tables is off"
    assert finding["fix"]["live"] is False


def test_memory_saver_unknown_fails() -> None:
    finding = one(gb10(**{"kernel.memory_saver": None}), PROFILE_KERNEL, "memory-saver")
    assert finding["status"] == "FAIL" and finding["found"].startswith("unknown (could not read /sys/module/nvidia_uvm")


# ---------------------------------------------------------------- command-line words
def test_cmdline_words_pass_and_fail() -> None:
    findings = by_check(GB10_NODE, {"cmdline_required": ["kho=off", "iommu.passthrough=1", "nosmt"]})
    assert findings["cmdline:kho=off"]["status"] == "PASS"
    wrong = findings["cmdline:iommu.passthrough=1"]
    assert wrong["status"] == "FAIL"
    assert wrong["message"] == "kernel command line: expected iommu.passthrough=1, found iommu.passthrough=0"
    assert wrong["fix"] == {
        "kind": "grub-cmdline",
        "live": False,
        "reboot": True,
        "detail": "add iommu.passthrough=1 to GRUB_CMDLINE_LINUX in /etc/default/grub (replacing "
        "iommu.passthrough=0), run update-grub and reboot",
        "word": "iommu.passthrough=1",
    }
    absent = findings["cmdline:nosmt"]
    assert (absent["status"], absent["found"]) == ("FAIL", "no nosmt")


def test_cmdline_the_last_word_for_a_parameter_counts() -> None:
    cmdline = [*GB10_NODE["kernel"]["cmdline"], "kho=on"]
    finding = one(gb10(**{"kernel.cmdline": cmdline}), {"cmdline_required": ["kho=off"]}, "cmdline:kho=off")
    assert finding["status"] == "FAIL"
    assert finding["found"] == "kho=off kho=on (the last one counts)"


def test_cmdline_words_after_double_dash_belong_to_init() -> None:
    words = ["ro", "quiet", "--", "kho=off"]
    finding = one(gb10(**{"kernel.cmdline": words}), {"cmdline_required": ["kho=off"]}, "cmdline:kho=off")
    assert (finding["status"], finding["found"]) == ("FAIL", "no kho= word")


def test_cmdline_unknown_fails() -> None:
    finding = one(gb10(**{"kernel.cmdline": None}), {"cmdline_required": ["kho=off"]}, "cmdline:kho=off")
    assert finding["status"] == "FAIL"
    assert finding["message"] == "kernel command line: expected kho=off, found unknown (could not read /proc/cmdline)"


# ---------------------------------------------------------------- kho=off on 7.x
def test_kho_on_7x_passes_on_the_spark() -> None:
    finding = one(GB10_NODE, PROFILE_KERNEL, "kho-off-7x")
    assert finding["status"] == "PASS"
    assert finding["message"] == f"kho=off on 7.x: expected kho=off (kernel {SPARK_RELEASE} is 7.x), found kho=off"


def test_kho_on_7x_fails_without_kho_off() -> None:
    cmdline = [w for w in GB10_NODE["kernel"]["cmdline"] if w != "kho=off"]
    finding = one(gb10(**{"kernel.cmdline": cmdline}), PROFILE_KERNEL, "kho-off-7x")
    assert finding["status"] == "FAIL"
    assert finding["found"] == "no kho= word"
    assert finding["fix"]["kind"] == "grub-cmdline" and finding["fix"]["word"] == "kho=off"
    assert (finding["fix"]["live"], finding["fix"]["reboot"]) == (False, True)
    assert "RoCE memory registration" in finding["fix"]["detail"]


def test_kho_is_skipped_on_6x_with_the_reason() -> None:
    finding = one(BARE_NODE, {}, "kho-off-7x")
    assert finding["status"] == "SKIP"
    assert finding["found"] == f"kernel {BARE_RELEASE}"
    assert finding["message"] == f"kho=off on 7.x: not checked, kernel {BARE_RELEASE} is not 7.x"


def test_kho_follows_the_found_release_not_the_expected_one() -> None:
    """A 6.x node is not asked for kho=off even when the profile wants a 7.x kernel (kernel-release fails)."""
    findings = by_check(BARE_NODE, PROFILE_KERNEL)
    assert findings["kernel-release"]["status"] == "FAIL" and findings["kho-off-7x"]["status"] == "SKIP"


def test_kho_with_an_unknown_release() -> None:
    assert one(gb10(**{"kernel.release": None}), {}, "kho-off-7x")["status"] == "PASS"
    cmdline = [w for w in GB10_NODE["kernel"]["cmdline"] if w != "kho=off"]
    finding = one(gb10(**{"kernel.release": None, "kernel.cmdline": cmdline}), {}, "kho-off-7x")
    assert (finding["status"], finding["found"]) == ("WARN", "cannot tell (kernel release unknown)")


def test_kho_is_reported_once_when_cmdline_required_lists_it() -> None:
    cmdline = [w for w in GB10_NODE["kernel"]["cmdline"] if w != "kho=off"]
    node = gb10(**{"kernel.cmdline": cmdline})
    findings = kernel_findings(node, {**PROFILE_KERNEL, "cmdline_required": ["kho=off", "kho=off"]})
    kho = [f for f in findings if "kho" in f["check"]]
    assert [(f["check"], f["status"]) for f in kho] == [("cmdline:kho=off", "FAIL")]


# ---------------------------------------------------------------- ulimits and nr_open
SPARK8_ULIMITS = {
    "core": {"soft": 0, "hard": 0},
    "memlock": {"soft": -1, "hard": -1},
    "nofile": {"soft": 1048576, "hard": 1048576},
    "stack": {"soft": 67108864, "hard": 67108864},
}


def test_ulimits_against_the_gb10_dockerd() -> None:
    # root's dockerd holds CAP_SYS_RESOURCE (fixture gb10/proc/2741/status): runc can raise any limit,
    # nofile up to fs.nr_open, so seed 002's limits pass whatever dockerd's own limits are
    findings = by_check(GB10_NODE, {"ulimits": SPARK8_ULIMITS})
    assert [(c, f["status"]) for c, f in findings.items() if c.startswith(("ulimit", "nr-open"))] == [
        ("ulimit:core", "PASS"),
        ("ulimit:memlock", "PASS"),
        ("ulimit:nofile", "PASS"),
        ("ulimit:stack", "PASS"),
        ("nr-open", "PASS"),
    ]
    assert findings["ulimit:memlock"]["message"] == (
        "ulimit memlock (what dockerd can grant): expected unlimited, found any (dockerd holds CAP_SYS_RESOURCE)"
    )
    assert findings["ulimit:nofile"]["found"] == "up to fs.nr_open (dockerd holds CAP_SYS_RESOURCE)"
    assert findings["nr-open"]["message"] == "fs.nr_open: expected >= 1048576 (the nofile hard limit), found 1048576"


def test_ulimits_against_a_dockerd_without_cap_sys_resource() -> None:
    findings = by_check(gb10(**{"limits.dockerd.cap_sys_resource": False}), {"ulimits": SPARK8_ULIMITS})
    assert [(c, f["status"]) for c, f in findings.items() if c.startswith(("ulimit", "nr-open"))] == [
        ("ulimit:core", "PASS"),
        ("ulimit:memlock", "FAIL"),
        ("ulimit:nofile", "FAIL"),
        ("ulimit:stack", "PASS"),
        ("nr-open", "PASS"),
    ]
    assert findings["ulimit:stack"]["found"] == "unlimited (dockerd's hard limit; it lacks CAP_SYS_RESOURCE)"
    nofile = findings["ulimit:nofile"]
    assert nofile["message"] == (
        "ulimit nofile (what dockerd can grant): expected >= 1048576, "
        "found 524288 (dockerd's hard limit; it lacks CAP_SYS_RESOURCE)"
    )
    assert nofile["fix"]["kind"] == "docker-limits" and nofile["fix"]["limits"] == {"nofile": 1048576}
    assert (nofile["fix"]["live"], nofile["fix"]["reboot"]) == (False, False)
    assert "LimitNOFILE=1048576" in nofile["fix"]["detail"]
    assert "stops running containers" in nofile["fix"]["detail"]


def test_unlimited_needs_unlimited() -> None:
    capless = gb10(**{"limits.dockerd.cap_sys_resource": False})
    memlock = one(capless, {"ulimits": {"memlock": {"soft": -1, "hard": -1}}}, "ulimit:memlock")
    assert memlock["status"] == "FAIL"
    assert memlock["found"] == "8388608 (dockerd's hard limit; it lacks CAP_SYS_RESOURCE)"
    assert memlock["fix"]["limits"] == {"memlock": -1} and "LimitMEMLOCK=infinity" in memlock["fix"]["detail"]
    node = gb10(**{"limits.dockerd.memlock": {"soft": -1, "hard": -1}, "limits.dockerd.cap_sys_resource": False})
    assert one(node, {"ulimits": {"memlock": {"soft": -1, "hard": -1}}}, "ulimit:memlock")["status"] == "PASS"


def test_unknown_capabilities_compare_with_the_hard_limit() -> None:
    node = gb10(**{"limits.dockerd.cap_sys_resource": None})
    finding = one(node, {"ulimits": {"memlock": {"soft": -1, "hard": -1}}}, "ulimit:memlock")
    assert (finding["status"], finding["found"]) == ("FAIL", "8388608")


def test_a_limit_without_hard_value_is_skipped() -> None:
    finding = one(GB10_NODE, {"ulimits": {"nofile": {"soft": 1024}}}, "ulimit:nofile")
    assert finding["status"] == "SKIP" and "no hard limit" in finding["message"]
    assert "nr-open" not in by_check(GB10_NODE, {"ulimits": {"nofile": {"soft": 1024}}})


def test_dockerd_not_running_cannot_tell() -> None:
    node = gb10(**{"limits.dockerd": None})
    findings = by_check(node, {"ulimits": {"nofile": {"soft": 1048576, "hard": 1048576}}})
    assert findings["ulimit:nofile"]["status"] == "WARN"
    assert findings["ulimit:nofile"]["found"] == "cannot tell (dockerd is not running)"
    assert findings["ulimit:nofile"]["fix"] is None
    assert findings["nr-open"]["status"] == "PASS"


def test_unreadable_or_unreported_dockerd_limits() -> None:
    node = gb10(**{"limits.dockerd.nofile": None, "limits.dockerd.cap_sys_resource": None})
    finding = one(node, {"ulimits": {"nofile": {"hard": 4096}}}, "ulimit:nofile")
    assert (finding["status"], finding["found"]) == ("FAIL", "unknown (could not read /proc/2741/limits)")
    nproc = one(node, {"ulimits": {"nproc": {"hard": 4096}}}, "ulimit:nproc")
    assert (nproc["status"], nproc["found"]) == ("WARN", "cannot tell (node_facts does not report nproc)")
    nolimits = one({"kernel": GB10_NODE["kernel"]}, {"ulimits": {"nofile": {"hard": 4096}}}, "ulimit:nofile")
    assert (nolimits["status"], nolimits["found"]) == ("FAIL", "unknown (the node facts have no limits section)")


def test_nofile_above_nr_open() -> None:
    need = {"ulimits": {"nofile": {"soft": 2097152, "hard": 2097152}}}
    finding = one(BARE_NODE, need, "nr-open")
    assert finding["status"] == "FAIL"
    assert finding["message"] == "fs.nr_open: expected >= 2097152 (the nofile hard limit), found 1048576"
    assert finding["fix"] == {
        "kind": "sysctl",
        "live": True,
        "reboot": False,
        "detail": "sysctl -w fs.nr_open=2097152 and persist it in /etc/sysctl.d/; takes effect at once",
        "name": "fs.nr_open",
        "value": "2097152",
    }


def test_nr_open_unknown_or_nofile_unlimited() -> None:
    unknown = one(gb10(**{"limits.nr_open": None}), {"ulimits": {"nofile": {"hard": 1048576}}}, "nr-open")
    assert (unknown["status"], unknown["found"]) == ("FAIL", "unknown (could not read /proc/sys/fs/nr_open)")
    unlimited = by_check(GB10_NODE, {"ulimits": {"nofile": {"soft": -1, "hard": -1}}})
    assert unlimited["nr-open"]["status"] == "FAIL"
    assert unlimited["nr-open"]["expected"] == "a number (nofile cannot be unlimited)"
    assert unlimited["ulimit:nofile"]["status"] == "PASS"  # what dockerd can grant; nr-open says it cannot be


def test_the_bare_dockerd() -> None:
    # this build machine's dockerd lacks CAP_SYS_RESOURCE (its real CapEff 000001fffeffffff)
    findings = by_check(BARE_NODE, {"ulimits": SPARK8_ULIMITS})
    assert findings["ulimit:nofile"]["found"] == "20000 (dockerd's hard limit; it lacks CAP_SYS_RESOURCE)"
    assert findings["ulimit:memlock"]["status"] == "FAIL"
    assert findings["ulimit:core"]["status"] == "PASS" and findings["ulimit:stack"]["status"] == "PASS"


# ---------------------------------------------------------------- inputs, summary, the filter
@pytest.mark.parametrize(
    "expect,match",
    [
        ({"relase": SPARK_RELEASE}, r"expect\.relase: unknown key.*did you mean 'release'"),
        ({"page_size": "64k"}, r"expect\.page_size: wrong value"),
        ({"cmdline_required": "kho=off"}, r"expect\.cmdline_required: wrong value"),
        ({"ulimits": {"nofile": {"hard": -2}}}, r"expect\.ulimits: wrong value"),
        ({"kho_on_7x": "yes"}, r"expect\.kho_on_7x: wrong value"),
        (["release"], r"expect: not a mapping"),
    ],
)
def test_malformed_expect_is_an_error(expect: Any, match: str) -> None:
    with pytest.raises(ProfileError, match=match):
        kernel_findings(GB10_NODE, expect)


def test_node_must_be_node_facts_but_a_registered_result_is_fine() -> None:
    with pytest.raises(ProfileError, match="node: not node facts"):
        kernel_findings("spark-w1", {})
    registered = {"changed": False, "node": GB10_NODE, "ansible_facts": {"dgxspark_node": GB10_NODE}}
    assert kernel_findings(registered, PROFILE_KERNEL) == kernel_findings(GB10_NODE, PROFILE_KERNEL)


def test_summary_has_one_line_per_finding() -> None:
    findings = kernel_findings(BARE_NODE, {**PROFILE_KERNEL, "ulimits": {"nofile": {"hard": 1048576}}})
    lines = summary(findings).splitlines()
    assert len(lines) == len(findings)
    assert lines[0] == (
        f"FAIL  kernel-release  expected {SPARK_RELEASE}, found {BARE_RELEASE} "
        f"(fix: install kernel {SPARK_RELEASE}, make it GRUB's default and reboot; needs a reboot)"
    )
    assert lines[1].startswith("FAIL  page-size       expected 64 KiB, found 4 KiB (fix: install and boot")
    assert lines[3] == "SKIP  cmdline         not checked, expect.cmdline_required not given"
    assert lines[4] == f"SKIP  kho-off-7x      not checked, kernel {BARE_RELEASE} is not 7.x"
    assert lines[5].startswith(
        "FAIL  ulimit:nofile   expected >= 1048576, found 20000 (dockerd's hard limit; it lacks CAP_SYS_RESOURCE) "
        "(fix: set LimitNOFILE=1048576"
    )
    assert lines[5].endswith("; not live)")
    assert lines[6] == "PASS  nr-open         expected >= 1048576 (the nofile hard limit), found 1048576"
    assert summary([]) == ""


def test_through_the_filter_with_container_ulimits() -> None:
    filters = FilterModule().filters()
    profile = read(SPARK3)
    container_ulimits = ServingFilters().filters()["container_ulimits"]
    expect = {**profile["host"]["kernel"], "ulimits": container_ulimits(str(SPARK8))}
    findings = filters["kernel_findings"](GB10_NODE, expect=expect)
    assert [f["check"] for f in findings if f["status"] == "FAIL"] == []
    capless = filters["kernel_findings"](gb10(**{"limits.dockerd.cap_sys_resource": False}), expect=expect)
    failed = {f["check"]: f["fix"]["kind"] for f in capless if f["status"] == "FAIL"}
    assert failed == {"ulimit:memlock": "docker-limits", "ulimit:nofile": "docker-limits"}
    assert {f["check"] for f in findings if f["status"] == "PASS"} >= {"kernel-release", "cmdline:kho=off", "nr-open"}
    with pytest.raises(
        AnsibleFilterError, match=r"(?s)dgxspark\.cluster\.kernel_findings: .*expect\.page_sise: unknown key"
    ):
        filters["kernel_findings"](GB10_NODE, expect={"page_sise": 65536})


def test_checks_skipped_on_purpose_say_so_and_what_they_would_be() -> None:
    findings = FilterModule().filters()["kernel_findings"](
        BARE_NODE, expect={"release": "7.0.0-1019-nvidia-64k", "page_size": 65536}, skip=["kernel-release"]
    )
    by_check = {f["check"]: f for f in findings}
    assert by_check["kernel-release"]["status"] == "SKIP" and by_check["kernel-release"]["fix"] is None
    assert by_check["kernel-release"]["message"] == (
        "kernel-release: skipped on purpose (listed in the checks to skip); it would be FAIL"
    )
    assert by_check["page-size"]["status"] == "FAIL"


def test_the_report_has_a_line_per_host_and_check() -> None:
    findings = FilterModule().filters()["kernel_findings"](BARE_NODE, expect={"page_size": 65536})
    lines = FilterModule().filters()["kernel_report"]({"sim3-head": findings, "sim3-worker1": None})
    assert lines[0] == "SKIP  sim3-head  kernel-release  not checked, expect.release not given"
    assert lines[1].startswith("FAIL  sim3-head  page-size  expected 64 KiB, found 4 KiB (fix: ")
    assert lines[-1] == "SKIP  sim3-worker1: not checked"


# ---------------------------------------------------------------- what the role works out and applies
def test_what_every_node_must_have_is_the_profile_s_kernel_the_role_s_expect_and_the_container_s_ulimits() -> None:
    filters = FilterModule().filters()
    profile = read(SPARK3)
    planned = {"profile": profile, "shape": None}
    ulimits = ServingFilters().filters()["container_ulimits"](str(SPARK3))
    required = filters["kernel_expectation"](planned, {"page_size": 4096}, True, True)
    assert required == {
        **profile["host"]["kernel"],
        "page_size": 4096,
        "kho_on_7x": True,
        "ulimits": ulimits,
        "cmdline_waived": [],
    }
    # the role's kernel_check_limits as -e gives it (text): false leaves the ulimits unchecked
    assert filters["kernel_expectation"](planned, {}, False, "false")["ulimits"] is None
    assert filters["kernel_expectation"](planned)["kho_on_7x"] is True
    # a profile without host.kernel requires only what the role asks
    bare = {"profile": {k: v for k, v in profile.items() if k != "host"}}
    assert filters["kernel_expectation"](bare, {"release": "x"}, True, False) == {
        "release": "x",
        "kho_on_7x": True,
        "ulimits": None,
        "cmdline_waived": [],
    }
    with pytest.raises(AnsibleFilterError, match="kernel_expectation: needs a serving_profile result"):
        filters["kernel_expectation"]({"plan": {}})
    with pytest.raises(AnsibleFilterError, match="kernel_expectation: expect must be a dict"):
        filters["kernel_expectation"](planned, ["page_size"])


def _fix(kind: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "live": extra.pop("live", False), "reboot": False, "detail": "d", **extra}


FINDINGS = [
    {"check": "nr-open", "status": "FAIL", "fix": _fix("sysctl", live=True, name="fs.nr_open", value="1048576")},
    {"check": "later", "status": "FAIL", "fix": _fix("sysctl", live=False, name="vm.x", value="1")},
    {"check": "passed", "status": "PASS", "fix": _fix("sysctl", live=True, name="vm.y", value="2")},
    {"check": "cmdline:kho=off", "status": "FAIL", "fix": _fix("grub-cmdline", word="kho=off")},
    {"check": "kho-off-7x", "status": "FAIL", "fix": _fix("grub-cmdline", word="kho=off")},
    {"check": "cmdline:iommu=pt", "status": "FAIL", "fix": _fix("grub-cmdline", word="iommu=pt")},
    {"check": "cmdline:a=b", "status": "WARN", "fix": _fix("grub-cmdline", word="a=b")},
    {"check": "kernel-release", "status": "FAIL", "fix": _fix("manual")},
    {"check": "page-size", "status": "FAIL", "fix": None},
]


def test_the_live_fixes_are_the_failed_checks_sysctls_that_are_safe_live() -> None:
    filters = FilterModule().filters()
    assert filters["kernel_live_sysctls"](FINDINGS) == {"fs.nr_open": "1048576"}
    assert filters["kernel_live_sysctls"]([]) == {}
    with pytest.raises(AnsibleFilterError, match="kernel_live_sysctls: needs kernel_findings' list"):
        filters["kernel_live_sysctls"]("nr-open")


def test_the_missing_words_are_the_failed_checks_command_line_words_once_each_sorted() -> None:
    filters = FilterModule().filters()
    assert filters["kernel_missing_words"](FINDINGS) == ["iommu=pt", "kho=off"]
    assert filters["kernel_missing_words"](kernel_findings(GB10_NODE, {"cmdline_required": ["kho=off"]})) == []
    missing = filters["kernel_missing_words"](kernel_findings(BARE_NODE, {"cmdline_required": ["iommu=pt"]}))
    assert missing == ["iommu=pt"]
