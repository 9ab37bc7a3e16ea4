# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The multimodal window (``playbooks/window.yml``, docs/releases.md "The window"): may it open, judged on the
controller from one ``node_facts`` look at every node, before anything is stopped.

A window stops serving, runs one job (a container image and its command) on chosen nodes with the memory guard
watching it, and boots the promoted release again. Everything the restore needs is checked first, so that a
window never stops a cluster it could not bring back:

- every node answers, and its Docker engine too;
- the head holds a promoted release (what is booted again afterwards);
- no memory guard is tripped (the boot's preflight would refuse to restore; a trip is cleared on purpose first);
- no window job runs already (one window at a time);
- the job's image is on every chosen node (a window never pulls; playbooks/images.yml puts it there);
- a job given GPUs (``window_gpus: true``) has them on every chosen node: a GPU that ``nvidia-smi`` lists, and a
  Docker engine that can give it to a container (the NVIDIA runtime, or the NVIDIA Container Toolkit's hook);
  without them ``docker run --gpus`` fails with 'could not select device driver "nvidia"' after serving stopped;
- the job's name, nodes and ``window_gpus`` are valid.

The window is recorded in the promoted release's history: a ``window`` event "opened: ..." before serving stops,
and "closed: ..." once it serves again. recover.yml reads an open window (a controller that died in it) as a
cause to boot the promoted release again. No Ansible imports; the ``dgxspark.cluster.window_plan`` filter calls
:func:`plan`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.dgxspark.cluster.plugins.module_utils._window_job import NAME, WINDOW_LABEL, container_name
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.images import find_image

EVENT = "window"
# window_gpus: a boolean (the text ``-e window_gpus=false`` gives, too); anything else is refused, never guessed
GPUS_TRUE = ("true", "yes")
GPUS_FALSE = ("false", "no")
GPU_HOOK = "nvidia-container-runtime-hook"
OPENED = "opened: "
CLOSED = "closed: "


def is_open(release: Mapping[str, Any] | None) -> bool:
    """The release's last event opened a window that never closed (its controller died in it)."""
    last = (release or {}).get("last_event") or {}
    return last.get("event") == EVENT and str(last.get("detail") or "").startswith(OPENED)


def gpus_wanted(value: Any) -> bool | None:
    """``window_gpus`` as a boolean: true (every GPU of the job's nodes) or false (none), also as the text ``-e``
    gives (``true``/``false``, ``yes``/``no``, any case). None for anything else (``"all"``, ``"none"``, ``0``,
    ``[]``, null...): refused by :func:`plan`, never read as one or the other."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in GPUS_TRUE + GPUS_FALSE:
        return value.strip().lower() in GPUS_TRUE
    return None


def gpu_problems(host: str, node: Mapping[str, Any]) -> list[str]:
    """Why a job given GPUs could not have them on ``host`` (its ``node_facts``: ``gpu`` and ``docker``)."""
    problems = []
    gpu = node.get("gpu")
    if not isinstance(gpu, Mapping) or not gpu.get("count"):
        why = (gpu or {}).get("error") if isinstance(gpu, Mapping) else "its GPU was not looked at"
        problems.append(f"{host}: no GPU here ({why or 'nvidia-smi lists none'})")
    docker = node.get("docker") or {}
    runtimes = docker.get("runtimes")
    if "nvidia" not in (runtimes or []) and not docker.get("gpu_hook"):
        said = "does not say its runtimes" if runtimes is None else f"has the runtimes {', '.join(runtimes) or 'none'}"
        problems.append(
            f"{host}: its Docker engine cannot give a container GPUs (it {said}, no 'nvidia' among them, and no "
            f"{GPU_HOOK} here): docker run --gpus would fail with 'could not select device driver \"nvidia\"' "
            "(install the NVIDIA Container Toolkit and restart Docker)"
        )
    return problems


def plan(
    facts: Mapping[str, Any],
    hosts: Sequence[str],
    head: str,
    chosen: Sequence[str],
    name: str,
    image: str,
    gpus: Any = True,
) -> dict[str, Any]:
    """May the window open? ``facts``: host to its registered ``node_facts`` answer (``gpu``, ``docker``,
    ``memguard`` and, on the head, ``releases``); ``hosts``: every node; ``chosen``: where the job runs; ``name``,
    ``image``, ``gpus`` (``window_gpus``): the job's. Returns ``ok``, ``problems`` (why not), ``release`` (the
    promoted release's id), ``serving`` (the nodes whose ranks run), ``hosts`` (the chosen ones), ``gpus`` (the
    job's, a boolean), ``container``, ``opened`` (the history entry), ``msg`` (the report's lines) and ``would``
    (what a real run would do: check mode's last line)."""
    problems: list[str] = []
    wanted = gpus_wanted(gpus)
    if wanted is None:
        problems.append(
            f"window_gpus: true (the job gets every GPU of its nodes, the default) or false (no GPU), found {gpus!r}"
        )
    chosen = list(dict.fromkeys(chosen))
    if not chosen:
        problems.append("window_hosts: name at least one node to run the job on")
    unknown = [host for host in chosen if host not in hosts]
    if unknown:
        problems.append(f"window_hosts: {', '.join(unknown)} not a node of this cluster ({', '.join(hosts)})")
    if not NAME.match(name):
        problems.append(f"window_name: 1-48 of a-z, 0-9, '_', '.', '-' (first a letter or digit), found {name!r}")
    if not image.strip():
        problems.append("window_image: the job's image is required")
    nodes: dict[str, Mapping[str, Any]] = {}
    for host in hosts:
        answer = facts.get(host) or {}
        node = answer.get("node") if isinstance(answer, Mapping) else None
        if answer.get("unreachable") or answer.get("failed") or not isinstance(node, Mapping):
            why = str(answer.get("msg") or "no answer").splitlines() or ["no answer"]
            problems.append(f"{host}: not answering ({why[0]}): a window must be able to restore every node")
            continue
        docker = node.get("docker") or {}
        if not docker.get("present"):
            problems.append(f"{host}: its Docker engine does not answer: {docker.get('error')}")
            continue
        nodes[host] = node
    serving: list[str] = []
    for host, node in nodes.items():
        docker = node.get("docker") or {}
        containers = docker.get("containers") or []
        running = [c for c in containers if c.get("state") == "running"]
        if any(WINDOW_LABEL in (c.get("labels") or {}) for c in running):
            jobs = ", ".join(sorted(str(c.get("name")) for c in running if WINDOW_LABEL in (c.get("labels") or {})))
            problems.append(f"{host}: window job {jobs} still runs: one window at a time")
        if any("dgxspark.cluster.rank" in (c.get("labels") or {}) for c in running):
            serving.append(host)
        tripped = (node.get("memguard") or {}).get("tripped")
        if isinstance(tripped, Mapping):
            problems.append(
                f"{host}: its memory guard is tripped ({tripped.get('time_utc') or tripped.get('time')}: "
                f"{tripped.get('reason')}): serving could not be restored after the window; clear it first "
                "(the memguard role's clear entry point, or a boot with -e boot_clear_trip=true)"
            )
        if host in chosen and image.strip() and find_image(docker.get("images") or [], image) is None:
            problems.append(
                f"{host}: image {image} is not here (a window never pulls: playbooks/images.yml puts an image on "
                "the nodes)"
            )
        if host in chosen and wanted:
            problems += [
                f"{problem}; or run a job that needs none with -e window_gpus=false"
                for problem in gpu_problems(host, node)
            ]
    releases = (nodes.get(head) or {}).get("releases") or {}
    promoted_id = releases.get("promoted")
    promoted = next((r for r in releases.get("releases") or [] if r.get("id") == promoted_id), None)
    if head in nodes and promoted is None:
        problems.append(
            f"{head}: no promoted release: nothing to boot again after the window (boot.yml records the first one)"
        )
    where = ", ".join(chosen) or "no node"
    devices = "with every GPU of its nodes" if wanted else "without GPUs"
    opened = f"{OPENED}job {name} ({image}) on {where}; serving stops"
    msg = [
        f"window: job {name} ({image}) on {where} {devices}, then release {promoted_id} booted again"
        + (f"; serving now on {', '.join(serving)} stops first" if serving else "; nothing serves now"),
    ]
    msg += [f"refused: {problem}" for problem in problems]
    stops = f"stop serving on {', '.join(sorted(serving))}" if serving else "find nothing serving"
    would = (
        f"check mode: the window may open. A real run would {stops}, run job {name} ({image}) on {where} {devices}, "
        f"then boot release {promoted_id} again (its preflight above judged that boot). Nothing was changed."
    )
    return {
        "ok": not problems,
        "problems": problems,
        "release": promoted_id,
        "serving": sorted(serving),
        "hosts": chosen,
        "gpus": bool(wanted),
        "container": container_name(name),
        "opened": opened[:480],
        "msg": msg,
        "would": would,
    }


def closed(jobs: Mapping[str, Mapping[str, Any]], served: bool) -> str:
    """The history entry that closes the window: each node's job outcome, and whether serving came back."""
    said = "; ".join(
        f"{host}: {job.get('outcome') or 'not run'}"
        + (f" (exit code {job.get('exit_code')})" if job.get("exit_code") not in (None, 0) else "")
        for host, job in sorted(jobs.items())
    )
    return f"{CLOSED}{said or 'no job ran'}; {'served again' if served else 'serving NOT restored'}"[:480]


def job_lines(job: Mapping[str, Any], name: str, failure: Any = None) -> list[str]:
    """What the job did on a node: the ``window_job`` module's message (its outcome), or why the job did not run
    there (``failure``, what the rescue kept), then its log tail, each line indented."""
    said = job["msg"] if "msg" in job else f"window job {name} did not run: {'?' if failure is None else failure}"
    return [said, *(f"  {line}" for line in job.get("log_tail") or [])]


def tripped(answers: Sequence[Any]) -> bool:
    """Whether a memory guard was tripped when the window closed (each node's ``node_phase`` answer as its guard went
    idle again): no guard was tripped when it opened (``plan``), so such a trip is the job's, which the restore's
    boot clears. A node without an answer counts for nothing."""
    return any(
        isinstance(answer, Mapping)
        and isinstance(answer.get("guard"), Mapping)
        and bool(answer["guard"].get("tripped"))
        for answer in answers
    )
