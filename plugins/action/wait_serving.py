# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: wait for the head to serve, showing progress, and stop waiting when a rank is gone.

Run on the head alone (``api`` given, no ``head``) it watches the head's container and API. Run on every
rank of a boot at once (``head`` names the head's host; only the head gives ``api``) the ranks also watch
one another: a worker looks at its own container until the head's wait ends, and the head stops waiting
as soon as any worker's container is gone. A worker that dies while the ranks load does not make the
head exit (NCCL's first collective just hangs until its watchdog, 30 minutes by default), so watching
the head alone would wait out the whole timeout and then blame the head.

The ranks' waits run in the controller's worker processes, one per host; they meet in a directory on the
controller named by the playbook's process and the task (what Ansible itself keys a task's persistent
connections on), each writing its own state file; the last one to leave removes the directory.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction

display = Display()

# How often a waiting rank reads the other ranks' state files between two looks at its own container.
PEER_POLL_SECONDS = 0.25
# A worker waits this much longer than the head may, so that the head's own timeout is what fails first.
WORKER_GRACE_SECONDS = 60
FINAL = ("served", "failed", "gone", "ended")
# How long one look at the head may wait on the node for it to serve (it looks every 0.25 s there).
HEAD_LOOK_SECONDS = 1.0


class ActionModule(ValidatedAction):
    _requires_connection = True
    _supports_check_mode = False
    ARGUMENT_SPEC = {
        "container": {"type": "str", "required": True},
        "api": {"type": "str"},
        "api_key_file": {"type": "str", "no_log": False},
        "ca_file": {"type": "str"},
        "head": {"type": "str"},
        "rank": {"type": "int"},
        "timeout": {"type": "int", "default": 900},
        "interval": {"type": "float", "default": 5},
        "log_lines": {"type": "int", "default": 20},
    }

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        host = task_vars.get("inventory_hostname", "?")
        head = args["head"]
        if head is None and not args["api"]:
            result.update(failed=True, msg="wait_serving: give api (the head), or head (every rank waits)")
            return result
        if head is not None and (host == head) != bool(args["api"]):
            result.update(failed=True, msg=f"wait_serving: {host}: api is given on the head ({head}) and only there")
            return result
        board = None
        if head is not None:
            ranks = list(task_vars.get("ansible_play_batch") or task_vars.get("ansible_play_hosts") or [host])
            forks = int(context.CLIARGS.get("forks") or 0)
            if 0 < forks < len(ranks):
                # Fewer workers than ranks: the ranks cannot all wait at once, and a worker waiting for a head
                # whose turn never comes would wait out its timeout. The head waits alone.
                if host == head:
                    display.warning(
                        f"wait_serving: forks {forks} < {len(ranks)} ranks, so the ranks cannot watch one another: "
                        f"the head waits alone, and a worker that dies while loading shows only as the head not "
                        f"serving after the timeout. Run with -f {len(ranks)} or more (ansible.cfg sets 16)."
                    )
                else:
                    return self._look_once(result, args, host, task_vars)
            else:
                board = Board(self._task._uuid, host, head, ranks, args["rank"])
        try:
            if args["api"]:
                return self._wait_head(result, args, host, task_vars, board)
            return self._wait_worker(result, args, host, task_vars, board)
        finally:
            if board is not None:
                board.leave()

    def _look_once(self, result, args, host, task_vars) -> dict[str, Any]:
        """A worker that cannot wait with the others: its container runs now, or it fails with its log tail."""
        look = self._look(args, task_vars, log_lines=args["log_lines"])
        if look.get("failed") or not look.get("running"):
            detail = look.get("msg") or f"its container is {look.get('status')} (exit code {look.get('exit_code')})"
            result.update(failed=True, log_tail=look.get("log_tail", []), msg=f"{host}: {detail}")
            return result
        result.update(changed=False, healthy=None, msg=f"{host} runs (looked at once: too few forks to wait)")
        return result

    def _look(
        self, args: dict[str, Any], task_vars: dict[str, Any], log_lines: int = 1, wait: float = 0
    ) -> dict[str, Any]:
        module_args: dict[str, Any] = {"container": args["container"], "log_lines": log_lines}
        if args["api"]:
            module_args["api"] = args["api"]
            module_args["wait"] = wait
            # paths on the head: rank_health reads the key there (it never comes here) and trusts the CA file
            for name in ("api_key_file", "ca_file"):
                if args[name]:
                    module_args[name] = args[name]
        return self._execute_module(
            module_name="dgxspark.cluster.rank_health", module_args=module_args, task_vars=task_vars
        )

    def _wait_head(self, result, args, host, task_vars, board) -> dict[str, Any]:
        started = time.monotonic()
        polls = 0
        shown = -args["interval"]
        last: dict[str, Any] = {}
        first: dict[str, Any] = {}
        while True:
            polls += 1
            # the node looks again every 0.25 s for up to HEAD_LOOK_SECONDS: readiness is seen within a quarter
            # second, and the other ranks' state files are read between two such looks
            left = max(0.0, args["timeout"] - (time.monotonic() - started))
            look = self._look(args, task_vars, wait=min(HEAD_LOOK_SECONDS, left))
            elapsed = time.monotonic() - started
            for key in ("started_at", "port_open_at", "ready_at"):
                if look.get(key) is not None:
                    first.setdefault(key, look[key])
            if look.get("failed"):
                _post(board, "failed", f"could not look at the head: {look.get('msg')}")
                result.update(failed=True, msg=f"{host}: could not look at the rank: {look.get('msg')}", polls=polls)
                return result
            last = look
            line = (look.get("log_tail") or [""])[-1][:160]
            phase = _phase(look)
            serving = bool(look.get("healthy") and look.get("models"))
            if serving or elapsed - shown >= args["interval"] or not look.get("running"):
                shown = elapsed
                _show(f"  [{elapsed:6.1f}s] {host} rank container {args['container']}: {phase}; last log: {line}")
            if serving:
                _post(board, "served", f"serves {', '.join(look['models'])}")
                result.update(
                    changed=False,
                    healthy=True,
                    models=look["models"],
                    seconds=round(elapsed, 1),
                    polls=polls,
                    started_at=first.get("started_at"),
                    port_open_at=first.get("port_open_at"),
                    ready_at=first.get("ready_at"),
                    msg=f"{host} serves {', '.join(look['models'])} after {elapsed:.1f} s",
                )
                return result
            gone = board.gone() if board is not None else []
            refused = look.get("refused")
            if not gone and not refused and look.get("running") and elapsed < args["timeout"]:
                continue
            if refused:
                why = f"its API answers but refuses the boot's own look, which waiting does not change: {refused}"
            elif gone:
                why = "; ".join(f"{_who(peer)} is gone: {peer.get('detail')}" for peer in gone)
            elif not look.get("running"):
                why = f"its container is {look.get('status')} (exit code {look.get('exit_code')})"
            else:
                why = f"not serving after {args['timeout']} s"
            _post(board, "failed", why)
            tail = self._look(args, task_vars, log_lines=args["log_lines"])
            result.update(
                failed=True,
                healthy=False,
                seconds=round(time.monotonic() - started, 1),
                polls=polls,
                log_tail=tail.get("log_tail", []),
                last=last,
                msg=f"{host}: the head is not serving: {why}",
            )
            return result

    def _wait_worker(self, result, args, host, task_vars, board) -> dict[str, Any]:
        started = time.monotonic()
        timeout = args["timeout"] + WORKER_GRACE_SECONDS
        polls = 0
        who = f"rank {args['rank']} ({host})" if args["rank"] is not None else host
        while True:
            polls += 1
            look = self._look(args, task_vars)
            elapsed = time.monotonic() - started
            if look.get("failed"):
                _post(board, "gone", f"could not be looked at: {look.get('msg')}")
                result.update(failed=True, msg=f"{host}: could not look at the rank: {look.get('msg')}", polls=polls)
                return result
            if not look.get("running"):
                detail = f"its container is {look.get('status')} (exit code {look.get('exit_code')})"
                _post(board, "gone", detail)
                _show(f"  [{elapsed:6.1f}s] {who} rank container {args['container']}: {_phase(look)}")
                tail = self._look(args, task_vars, log_lines=args["log_lines"])
                result.update(
                    failed=True,
                    healthy=False,
                    seconds=round(elapsed, 1),
                    polls=polls,
                    log_tail=tail.get("log_tail", []),
                    msg=f"{who} stopped while the head waited to serve: {detail}",
                )
                return result
            ended = board.head_state()
            if ended is None and elapsed < timeout:
                _sleep(board, started + elapsed + args["interval"], lambda b: b.head_state())
                ended = board.head_state()
                if ended is None:
                    continue
            if ended is None:
                _post(board, "ended", f"no word from the head's wait after {timeout} s")
                result.update(
                    failed=True, seconds=round(elapsed, 1), polls=polls, msg=f"{who}: the head's wait never ended"
                )
                return result
            _post(board, "ended", f"running; the head's wait ended: {ended.get('state')}")
            result.update(
                changed=False,
                healthy=None,
                seconds=round(time.monotonic() - started, 1),
                polls=polls,
                msg=f"{who} runs; the head's wait ended ({ended.get('state')}: {ended.get('detail')})",
            )
            return result


class Board:
    """The ranks' shared state files on the controller, one per host, for one task of one playbook run."""

    def __init__(self, task_uuid: str, host: str, head: str, ranks: list[str], rank: int | None):
        self.path = Path(tempfile.gettempdir()) / f"dgxspark-wait-{os.getppid()}-{task_uuid}"
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = self.path.lstat()
        if self.path.is_symlink() or found.st_uid != os.getuid() or found.st_mode & 0o077:
            raise AnsibleActionFail(f"wait_serving: {self.path} is not this user's private directory")
        self.host, self.head, self.rank = host, head, rank
        self.ranks = ranks if host in ranks else [*ranks, host]

    def post(self, state: str, detail: str) -> None:
        record = {"host": self.host, "rank": self.rank, "state": state, "detail": detail}
        tmp = self.path / f".{self.host}.tmp"
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, self.path / f"{self.host}.json")

    def read(self, host: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.path / f"{host}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def gone(self) -> list[dict[str, Any]]:
        """The workers whose container is gone."""
        found = (self.read(h) for h in self.ranks if h not in (self.host, self.head))
        return [r for r in found if r and r.get("state") == "gone"]

    def head_state(self) -> dict[str, Any] | None:
        """The head's final state, once its wait ended."""
        state = self.read(self.head)
        return state if state and state.get("state") in FINAL else None

    def leave(self) -> None:
        """After this rank's final state: mark it gone from the board; the last rank to leave removes it."""
        try:
            if self.read(self.host) is None:
                self.post("ended", "left without a state")
            (self.path / f"{self.host}.left").touch()
            if all((self.path / f"{h}.left").exists() for h in self.ranks):
                shutil.rmtree(self.path, ignore_errors=True)
        except OSError as error:  # the board is only a meeting point: a failure to tidy it fails no rank
            display.warning(f"wait_serving: {self.path}: {error}")


def _show(message: str) -> None:
    """One progress line of the wait, through Display: from this worker process Display hands it to the controller's
    main process, which shows it (under ansible-runner, AWX's, as a job event of its own). Nothing of it may reach
    the worker's own stdout, which ansible-core captures and reports ("WorkerProcess ... errantly sent data directly
    to stdout instead of using Display"): a stdout callback that wraps Display.display (ansible-runner's awx_display
    does) writes its event markers to sys.stdout around the call when it takes the process for the main one. Such
    writes are dropped here; the line itself still goes through Display."""
    with contextlib.redirect_stdout(io.StringIO()):
        display.display(message)


def _post(board: Board | None, state: str, detail: str) -> None:
    if board is not None:
        board.post(state, detail)


def _sleep(board: Board | None, until: float, event) -> Any:
    """Sleep until ``until`` (monotonic), returning early with what ``event(board)`` finds."""
    while True:
        left = until - time.monotonic()
        if board is not None:
            found = event(board)
            if found:
                return found
        if left <= 0:
            return None
        time.sleep(min(left, PEER_POLL_SECONDS) if board is not None else left)


def _who(peer: dict[str, Any]) -> str:
    return f"rank {peer['rank']} ({peer['host']})" if peer.get("rank") is not None else str(peer.get("host"))


def _phase(look: dict[str, Any]) -> str:
    if look.get("running") is None and look.get("error"):
        return f"unknown: {look['error']}"
    if not look.get("running"):
        return f"{look.get('status')} (exit code {look.get('exit_code')})"
    if look.get("healthy") and look.get("models"):
        return f"serving {', '.join(look['models'])}"
    if look.get("healthy"):
        return (
            f"healthy, waiting for /v1/models ({look['health_error']})"
            if look.get("health_error")
            else ("healthy, waiting for /v1/models")
        )
    return f"loading ({look.get('health_error') or 'no answer yet'})"
