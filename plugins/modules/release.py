#!/usr/bin/python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""List, show, record, promote and annotate releases on the head (logic in module_utils/_releases.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: release
short_description: Keep the cluster's releases on the head - what served, so the last good setup stays addressable
version_added: 0.2.0
description:
  - A release is what one boot served - the profile exactly as booted, the plan, each rank's spec hash, the image
    ID on every node, when and by whom, the benchmark evidence that judged it, its state (C(candidate),
    C(promoted) or C(retired)) and its history. Each is one JSON file under O(directory) on the head, 0600 in a
    0700 directory owned by root.
  - At most one release is promoted. Promoting one retires every other promoted or candidate release. The
    previous promoted release is the one promoted most recently before the current one; C(playbooks/rollback.yml)
    goes back to it (or, while a candidate serves, to the promoted release).
  - The boot records a release when it changed what serves; C(playbooks/releases.yml) lists them and shows one.
author:
  - dgxspark.cluster maintainers (@dgxspark)
options:
  operation:
    description:
      - V(list) returns every release's summary, the promoted and previous ones and the protected images.
      - V(show) returns one release whole (O(id)).
      - V(history) returns every release whole but for its profile's text and plan (its evidence and history) -
        what C(playbooks/releases.yml -e releases_history=DIR) draws the benchmark's history from.
      - V(record) writes O(record) as a new release; the same record again changes nothing.
      - V(promote) promotes O(id) and retires every other promoted or candidate release.
      - V(evidence) keeps O(evidence) in release O(id) (a benchmark run, a comparison and its verdict).
      - V(event) adds a history entry O(event) to release O(id) (for example C(served again)).
    type: str
    choices: [list, show, history, record, promote, evidence, event]
    default: list
  id:
    description: The release, for V(show), V(promote), V(evidence) and V(event).
    type: str
  spec_sha256:
    description:
      - For V(show) and V(evidence) without O(id), the release that serves - the one whose every rank's spec is
        this mapping of host to the spec label its running container carries (C(dgxspark.cluster.spec_sha256)).
        Fails when no release has exactly these specs.
      - For V(event), the release's ranks' specs from now on (the same profile and shape, rendered anew by another
        collection version or with other NCCL names); the history entry says so.
    type: dict
  record:
    description: The release to write, for V(record) (as the C(dgxspark.cluster.release_record) filter builds it).
    type: dict
  evidence:
    description: For V(evidence), a mapping of names to what is kept under each (replacing a previous one of that name).
    type: dict
  event:
    description: For V(event), the history entry's name; O(detail) says more.
    type: str
  detail:
    description: What is said with a promotion or an event.
    type: str
    default: ""
  by:
    description: Who asks (kept in the history).
    type: str
    default: ""
  directory:
    description: Where the releases are kept on the head.
    type: path
    default: /var/lib/dgxspark-cluster/releases
attributes:
  check_mode:
    support: full
    description: Says what it would write; writes nothing.
  diff_mode:
    support: none
    description: The release's history is its record of changes.
  platform:
    support: full
    platforms: posix
    description: The cluster's head.
seealso:
  - module: dgxspark.cluster.node_facts
"""

EXAMPLES = r"""
- name: List the releases
  dgxspark.cluster.release:
  register: releases

- name: Show one
  dgxspark.cluster.release:
    operation: show
    id: r20261201T155300Z-3c9f0a1b2d4e

- name: Keep a benchmark run as the evidence of the release that serves
  dgxspark.cluster.release:
    operation: evidence
    spec_sha256: "{{ running_specs }}"  # host to its rank container's dgxspark.cluster.spec_sha256 label
    evidence:
      bench:
        run: 20261201T160000Z-tp3-triangle
        results: /home/ops/spark3/.bench/20261201T160000Z-tp3-triangle/results.json

- name: Promote a candidate after its comparison passed
  dgxspark.cluster.release:
    operation: promote
    id: "{{ candidate_id }}"
    detail: "comparison passed: no regression beyond 3 %"
    by: "{{ lookup('dgxspark.cluster.run_by') }}"
"""

RETURN = r"""
releases:
  description: Every release's summary, oldest first (C(id), C(state), C(created), C(by), C(profile_sha256), C(shape),
    C(image), C(images), C(spec_sha256), C(evidence), C(last_event)).
  returned: always
  type: list
  elements: dict
promoted:
  description: The promoted release's id, or null.
  returned: always
  type: str
previous:
  description: The previous promoted release's id, or null.
  returned: always
  type: str
protected_images:
  description: The promoted and previous releases' image IDs, by release id; the collection never removes them.
  returned: always
  type: dict
records:
  description: For V(history), every release, oldest first, whole but for its profile's text and plan.
  returned: when O(operation=history)
  type: list
  elements: dict
release:
  description: The release whole, for V(show); the release written, for the other operations that change one.
  returned: when O(id) or O(record) is given
  type: dict
written:
  description: The ids of the releases written (in check mode, that would be written).
  returned: always
  type: list
  elements: str
problems:
  description: Files in O(directory) that are not releases, each with the reason.
  returned: always
  type: list
  elements: str
"""

import datetime

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.dgxspark.cluster.plugins.module_utils import _releases


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


ARGUMENT_SPEC = {
    "operation": {
        "type": "str",
        "choices": ["list", "show", "history", "record", "promote", "evidence", "event"],
        "default": "list",
    },
    "id": {"type": "str"},
    "spec_sha256": {"type": "dict"},
    "record": {"type": "dict"},
    "evidence": {"type": "dict"},
    "event": {"type": "str"},
    "detail": {"type": "str", "default": ""},
    "by": {"type": "str", "default": ""},
    "directory": {"type": "path", "default": _releases.DEFAULT_DIRECTORY},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[
            ("operation", "show", ("id", "spec_sha256"), True),
            ("operation", "record", ("record",)),
            ("operation", "promote", ("id",)),
            ("operation", "evidence", ("id", "spec_sha256"), True),
            ("operation", "evidence", ("evidence",)),
            ("operation", "event", ("id", "event")),
        ],
        supports_check_mode=True,
    )
    params = module.params
    directory, state = params["directory"], params["operation"]  # what is asked
    try:
        records, _problems = _releases.read_all(directory)
        writes: list[dict] = []
        release = None
        ident = params["id"]
        if state in ("show", "evidence") and not ident:  # the release that serves, by its ranks' specs
            serving = _releases.serving(records, params["spec_sha256"])
            if serving is None:
                raise _releases.ReleaseError(
                    "no release has exactly the specs that run ("
                    + ", ".join(f"{h} {str(s)[:12]}" for h, s in sorted(params["spec_sha256"].items()))
                    + "): boot.yml records one when it changes what serves"
                )
            ident = serving["id"]
        if state == "show":
            release = dict(_releases.find(records, ident))
        elif state == "record":
            release = _releases.check_record(params["record"])
            known = next((r for r in records if r["id"] == release["id"]), None)
            if known is None:
                writes.append(release)
            elif known != release:
                raise _releases.ReleaseError(f"release {release['id']} exists already with other contents")
        elif state == "promote":
            writes = _releases.promote(records, params["id"], _now(), params["by"], params["detail"])
            release = next((w for w in writes if w["id"] == params["id"]), dict(_releases.find(records, params["id"])))
        elif state == "evidence":
            release = dict(_releases.find(records, ident))
            for name, data in sorted(params["evidence"].items()):
                release = _releases.add_evidence(release, name, data, _now(), params["by"])
            writes.append(release)
        elif state == "event":
            found = dict(_releases.find(records, params["id"]))
            detail = params["detail"]
            if params["spec_sha256"] and params["spec_sha256"] != found.get("spec_sha256"):
                changed = ", ".join(f"{h} {str(s)[:12]}" for h, s in sorted(params["spec_sha256"].items()))
                found["spec_sha256"] = dict(params["spec_sha256"])
                detail = (detail + "; " if detail else "") + f"its ranks' specs are now {changed}"
            release = _releases.event(found, params["event"], _now(), params["by"], detail)
            writes.append(release)
        if writes and not module.check_mode:
            for record in writes:
                _releases.write(directory, record, exclusive=state == "record")
    except (OSError, ValueError) as error:
        module.fail_json(msg=f"release ({state}): {error}")
    listed = _releases.facts(directory)  # after the writes (in check mode: as it stands)
    result = {
        "changed": bool(writes),
        "releases": listed["releases"],
        "promoted": listed["promoted"],
        "previous": listed["previous"],
        "protected_images": listed["protected_images"],
        "problems": listed["problems"],
        "written": [w["id"] for w in writes],
    }
    if release is not None:
        result["release"] = release
    if state == "history":
        result["records"] = [_releases.without_text(record) for record in records]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
