# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait for the head shows its progress through Display, never on its worker's stdout (issue 28).

On AWX 24.6.1, ansible-core 2.21 flagged the boot's wait: "WorkerProcess for [...] errantly sent data directly to
stdout instead of using Display". A stdout callback that wraps Display.display, as ansible-runner's awx_display
does, writes its event markers to sys.stdout around the call when it takes the process for the main one; in a
worker, ansible-core captures that and warns. This runs the wait_serving action in a real ansible-playbook with
ANSIBLE_STDOUT_CALLBACK=json and such a wrapper enabled (an aggregate callback standing in for awx_display's
wrapping), against a stand-in Docker engine on a Unix socket of the test's own (DOCKER_HOST, which rank_health reads:
the container does not exist, so the head's wait shows one line, then fails), so that neither dockerd nor its state
matters. The wait's line reaches the output, and no task but the control (a plain display.display) is warned about;
the wait as it was before issue 28 is warned about too.
"""

from __future__ import annotations

import json
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / ".ansible" / "collections"
# the wait_serving action as it was at dc86be5, before issue 28 (a fixture, so that a shallow clone runs it too)
OLD_WAIT = Path(__file__).with_name("fixtures") / "wait_serving_before_issue_28.py.txt"
ERRANT = "errantly sent data directly to stdout"

WRAPPER = '''
import functools
import sys

from ansible.plugins.callback import CallbackBase
from ansible.utils.display import Display

DOCUMENTATION = """
    name: wrapping_display
    type: aggregate
    short_description: wraps Display.display as ansible-runner's awx_display does outside a worker
    description: an event marker on sys.stdout around every Display.display call
"""

_original = Display.display


@functools.wraps(_original)
def _wrapped(*args, **kwargs):
    sys.stdout.write("\\x1b[K<event-marker>\\x1b[K")
    return _original(*args, **kwargs)


Display.display = _wrapped


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "wrapping_display"
'''

PLAIN = """
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        display.display("plain progress line")
        return {"changed": False}
"""

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Control, a plain display.display
      plain_display:
    - name: The wait for the head
      dgxspark.cluster.wait_serving:
        container: dgxspark-test-no-such-container
        api: http://127.0.0.1:9
        timeout: 1
      ignore_errors: true
    - name: The wait as it was
      old_wait_serving:
        container: dgxspark-test-no-such-container
        api: http://127.0.0.1:9
        timeout: 1
      ignore_errors: true
"""


class _NoSuchContainer(BaseHTTPRequestHandler):
    """The Docker engine's answer to every request for a container that does not exist (404, the engine's JSON)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = json.dumps({"message": "No such container: dgxspark-test-no-such-container"}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet: a Unix socket's client has no address for http.server's log line."""


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextmanager
def _engine(path: Path) -> Iterator[str]:
    """A stand-in engine listening on ``path`` while the block runs; yields its DOCKER_HOST URL."""
    server = _UnixServer(str(path), _NoSuchContainer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"unix://{path}"
    finally:
        server.shutdown()
        server.server_close()


def _run(tmp_path: Path, docker_host: str) -> subprocess.CompletedProcess:
    (tmp_path / "callbacks").mkdir()
    (tmp_path / "callbacks" / "wrapping_display.py").write_text(WRAPPER)
    (tmp_path / "action_plugins").mkdir()
    (tmp_path / "action_plugins" / "plain_display.py").write_text(PLAIN)
    (tmp_path / "action_plugins" / "old_wait_serving.py").write_text(OLD_WAIT.read_text())
    (tmp_path / "playbook.yml").write_text(PLAYBOOK)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "callbacks"),
        "ANSIBLE_CALLBACKS_ENABLED": "wrapping_display",
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "DOCKER_HOST": docker_host,
    }
    playbook = Path(sys.executable).with_name("ansible-playbook")
    return subprocess.run(
        [str(playbook), "-i", "localhost,", "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"]
        + [str(tmp_path / "playbook.yml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def test_the_wait_shows_progress_through_display_only(tmp_path: Path) -> None:
    if not (COLLECTIONS / "ansible_collections" / "dgxspark" / "cluster").exists():
        pytest.skip("no collection link (make collection-link)")
    with _engine(tmp_path / "docker.sock") as docker_host:
        proc = _run(tmp_path, docker_host)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    warned = [line for line in proc.stderr.splitlines() if ERRANT in line]
    assert len(warned) == 2, proc.stderr
    assert "Control, a plain display.display" in warned[0], warned
    assert "The wait as it was" in warned[1], warned
    # the wait's own line went through Display to the main process, and the wait ended on the absent container
    assert "rank container dgxspark-test-no-such-container: absent" in proc.stdout, proc.stdout[-4000:]
    result = json.loads(proc.stdout[proc.stdout.index("{\n") :])
    (wait,) = [t for t in result["plays"][0]["tasks"] if t["task"]["name"] == "The wait for the head"]
    assert "the head is not serving: its container is absent" in wait["hosts"]["localhost"]["msg"]
