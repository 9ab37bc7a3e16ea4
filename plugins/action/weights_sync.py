# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin: put the weight files the plan names on the current host, pulled from the source node's short-lived
file server over the plan's network, each checked on arrival (plugin_utils/weights/transfer.py)."""

from __future__ import annotations

from typing import Any

from ansible.utils.display import Display

from ansible_collections.dgxspark.cluster.plugins.action.image_stream import ActionModule as ImageStream
from ansible_collections.dgxspark.cluster.plugins.module_utils._specs import WEIGHTS_SYNC
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.release import images
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.weights import transfer

display = Display()


class ActionModule(ImageStream):
    ARGUMENT_SPEC = WEIGHTS_SYNC

    def act(self, args: dict[str, Any], task_vars: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        host = str(task_vars.get("inventory_hostname"))
        source, files = str(args["source"]), list(args["files"])
        total = sum(int(item.get("size") or 0) for item in files)
        result.update(
            changed=False, host=host, arrived=[], moved_bytes=0, seconds=0.0, progress=[], resumed={}, staged=[]
        )
        if not files:
            result["msg"] = f"{host}: nothing to send"
            return result
        what = f"{len(files)} file(s), {images.human(total)}, from {source} ({args['source_address']})"
        if self._task.check_mode:
            stage = transfer.staging_reason(args["ranks"])
            where = f", staged (not put in place: {stage})" if stage else ""
            result.update(changed=True, msg=f"{host}: would receive {what}{where} (check mode)")
            return result
        hostvars = task_vars.get("hostvars") or {}
        try:
            ends = {name: self._endpoint(name, hostvars) for name in (source, host)}
            argv = {
                name: images.ssh_command(
                    end,
                    images.remote_script(
                        transfer.node_command(
                            "serve" if name == source else "pull", _python(hostvars, name, task_vars)
                        ),
                        end["become"],
                    ),
                )
                for name, end in ends.items()
            }
        except images.TransferError as error:
            result.update(failed=True, msg=f"{host}: cannot reach {source} or {host} to send the weights: {error}")
            return result
        stage = transfer.staging_reason(args["ranks"])
        secret = transfer.token()
        out = transfer.sync(
            argv[source],
            argv[host],
            {
                "root": args["weights_path"],
                "names": [item["name"] for item in files],
                "address": args["source_address"],
                "token": secret,
            },
            {
                "root": args["weights_path"],
                "files": files,
                "address": args["source_address"],
                "cache_dir": args["cache_dir"],
                "idle_timeout": args["idle_timeout"],
            },
            target=host,
            source=source,
            total=total,
            timeout=args["timeout"],
            idle_timeout=args["idle_timeout"],
            every=args["progress_every"],
            report=display.display,
        )
        result.update(
            changed=bool(out.arrived or out.moved),
            arrived=out.arrived,
            moved_bytes=out.moved,
            seconds=round(out.seconds, 1),
            progress=out.progress,
            resumed=out.resumed,
            staged=out.staged,
            msg=out.msg,
        )
        result["warnings"] = [f"{host}: {text}" for text in (out.cache, out.msg if out.staged else "") if text]
        if not out.ok:
            result["failed"] = True
        return result


def _python(hostvars: Any, name: str, task_vars: dict[str, Any]) -> str:
    """The host's Python (ansible_python_interpreter where set to a path, else python3)."""
    variables = hostvars[name] if name in hostvars else task_vars
    given = str(variables.get("ansible_python_interpreter") or "")
    return given if given.startswith("/") else "python3"
