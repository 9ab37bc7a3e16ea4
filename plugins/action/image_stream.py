# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: put an image on the current host, streamed from another host over SSH (docker save piped into
docker load through the controller, a chunk at a time) or pulled from its registry, then verify its ID there
(plugin_utils/release/images.py)."""

from __future__ import annotations

import subprocess
from typing import Any

from ansible import constants as C
from ansible.plugins.loader import connection_loader
from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import IMAGE_STREAM
from ansible_collections.dgxspark.cluster.plugins.plugin_utils._action import ValidatedAction
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release import images as transfer

display = Display()

# The ssh connection plugin's options a stream uses, as Ansible resolves them for a host (its variables, then
# ansible.cfg and the environment, then the plugin's defaults).
SSH_OPTIONS = (
    "host",
    "port",
    "remote_user",
    "private_key_file",
    "private_key",
    "password",
    "ssh_args",
    "ssh_common_args",
    "ssh_extra_args",
    "ssh_executable",
    "host_key_checking",
    "timeout",
)


class ActionModule(ValidatedAction):
    ARGUMENT_SPEC = IMAGE_STREAM

    def _endpoint(self, host: str, hostvars: Any) -> dict[str, Any]:
        """How to reach ``host``: its ssh connection options and its become settings, from its variables."""
        variables = hostvars[host] if host in hostvars else {}
        connection_loader.get("ssh", class_only=True)  # loads the plugin's option definitions
        names = ["inventory_hostname", *C.config.get_plugin_vars("connection", "ssh")]
        given = {"inventory_hostname": host}
        for name in names:
            if name != "inventory_hostname" and name in variables:
                given[name] = variables[name]
        options = C.config.get_plugin_options("connection", "ssh", variables=given)
        endpoint = {name: options.get(name) for name in SSH_OPTIONS}
        endpoint["connection"] = variables.get("ansible_connection") or "ssh"
        if "ansible_become" in variables:
            enabled = bool(variables.get("ansible_become"))
        else:
            enabled = bool(self._play_context.become)
        method = variables.get("ansible_become_method") or self._play_context.become_method or "sudo"
        password = (
            variables.get("ansible_become_password")
            or variables.get("ansible_become_pass")
            or self._play_context.become_pass
        )
        if enabled and method != "sudo":
            raise transfer.TransferError(f"become method {method}: streams use sudo only")
        if enabled and password:
            raise transfer.TransferError(
                "become with a password: a stream runs sudo -n (its input is the image, not a password); allow the "
                "docker commands without a password, or use a login in the docker group"
            )
        endpoint["become"] = {
            "enabled": enabled,
            "user": variables.get("ansible_become_user") or self._play_context.become_user or "root",
        }
        return endpoint

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        host = str(task_vars.get("inventory_hostname"))
        image_id = args["image_id"]
        pull = args["pull"]
        names = list(args["names"] or [image_id])
        source = args["source"]
        result.update(changed=False, host=host, image_id=image_id, moved_bytes=0, seconds=0.0, progress=[])
        if not pull and not source:
            result.update(failed=True, msg="dgxspark.cluster.image_stream: give source (a host to stream from) or pull")
            return result
        what = f"pull {pull}" if pull else f"stream {', '.join(names)} from {source}"
        if self._task.check_mode:
            result.update(changed=True, msg=f"{host}: would {what} and check that it is {image_id} (check mode)")
            return result
        hostvars = task_vars.get("hostvars") or {}
        try:
            node = self._endpoint(host, hostvars)
            docker = args["docker"]
            if pull:
                pulled = self._run(node, transfer.pull_script(pull, docker), args["timeout"])
                if pulled.returncode != 0:
                    result.update(
                        failed=True,
                        msg=f"{host}: docker pull {pull} failed (exit {pulled.returncode}): "
                        f"{_tail(pulled.stderr or pulled.stdout)}",
                    )
                    return result
                result.update(changed=True, pulled=pull)
                names = [pull]
            else:
                head = self._endpoint(str(source), hostvars)
                moved = transfer.stream(
                    transfer.ssh_command(
                        head, transfer.remote_script(transfer.save_script(names, docker), head["become"])
                    ),
                    transfer.ssh_command(node, transfer.remote_script(transfer.load_script(docker), node["become"])),
                    timeout=args["timeout"],
                    idle_timeout=args["idle_timeout"],
                    label=f"{host}: {source} -> {host}",
                    size=args["size"],
                    every=args["progress_every"],
                    report=display.display,
                )
                result.update(
                    moved_bytes=moved.moved,
                    seconds=round(moved.seconds, 1),
                    progress=moved.progress,
                    loaded=moved.sink_output.splitlines()[-20:],
                )
                if not moved.ok:
                    result.update(failed=True, changed=moved.moved > 0, msg=_failure(host, str(source), moved))
                    return result
                result.update(changed=True)
                display.display(
                    transfer.progress_line(f"{host}: {source} -> {host} done", moved.moved, moved.seconds, None)
                )
            checked = self._run(node, transfer.verify_script([image_id, *names], docker), 120)
        except transfer.TransferError as error:
            result.update(failed=True, msg=f"{host}: cannot stream: {error}")
            return result
        if checked.returncode != 0 and not checked.stdout.strip():
            result.update(
                failed=True,
                msg=f"{host}: could not ask it what {image_id} is after the {'pull' if pull else 'load'} (exit "
                f"{checked.returncode}): {_tail(checked.stderr)}",
            )
            return result
        wrong = transfer.verify(checked.stdout, list(dict.fromkeys([image_id, *names])), image_id)
        if checked.returncode != 0 or wrong:
            said = "; ".join(result.get("loaded") or []) or _tail(checked.stderr)
            result.update(
                failed=True,
                msg=f"{host}: after the {'pull' if pull else 'load'}, the image there is not the one wanted, "
                f"{image_id}: {'; '.join(wrong) or _tail(checked.stderr)}"
                + (f" (docker said: {said})" if said else ""),
            )
            return result
        how = (
            f"pulled {image_id[:19]}"
            if pull
            else (
                f"streamed {image_id[:19]} from {source}, {transfer.human(result['moved_bytes'])} in "
                f"{result['seconds']} s"
            )
        )
        result["msg"] = f"{host}: {how}, the ID checked"
        return result

    def _run(self, endpoint: dict[str, Any], script: str, timeout: float) -> subprocess.CompletedProcess:
        argv = transfer.ssh_command(endpoint, transfer.remote_script(script, endpoint["become"]))
        try:
            return subprocess.run(
                argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"no answer within {timeout:.0f} s")
        except OSError as error:
            return subprocess.CompletedProcess(argv, 127, "", str(error))


def _tail(text: str | None, lines: int = 5) -> str:
    return " / ".join((text or "").strip().splitlines()[-lines:]) or "nothing said"


def _failure(host: str, source: str, moved: transfer.Transfer) -> str:
    """Why a stream failed, naming the end at fault first."""
    after = f"after {transfer.human(moved.moved)} in {moved.seconds:.0f} s"
    if moved.stopped:
        return (
            f"{host}: the stream from {source} stopped, {moved.stopped}, {after}; both ends were stopped and the node "
            "keeps no image from it"
        )
    if moved.source_rc != 0 and (moved.sink_rc == 0 or moved.moved == 0 or not moved.sink_error):
        return f"{host}: docker save on {source} failed (exit {moved.source_rc}) {after}: {_tail(moved.source_error)}"
    return (
        f"{host}: docker load on {host} failed (exit {moved.sink_rc}) {after}: "
        f"{_tail(moved.sink_error or moved.sink_output)}"
        + (f"; docker save on {source}: exit {moved.source_rc}" if moved.source_rc else "")
    )
