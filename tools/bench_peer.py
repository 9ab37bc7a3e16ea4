#!/usr/bin/env python
# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Our boot and stop against sparkrun's launch and stop, on one simulated cluster, same image and `vllm serve`.

    tools/bench_peer.py [--cluster sim3] [--rounds 3] [--no-warmup] [--up] [--keep-stand-ins] [--json FILE]

Needs the cluster running (`make sim-up CLUSTER=...`, or --up), .venv (`make venv`) and .venv-sparkrun with
sparkrun 0.4.2 (`make venv-sparkrun`). `make bench-peer CLUSTER=...` runs it.

What is timed (time.perf_counter on this machine; every command a fresh process, stdin closed, its output in
.cache/bench-peer/<cluster>/logs/, each line stamped with its time since the command's start):

  ours, launch      .venv/bin/ansible-playbook playbooks/boot.yml -i inventories/<cluster>/hosts.yml
  ours, stop        .venv/bin/ansible-playbook playbooks/stop.yml -i inventories/<cluster>/hosts.yml
  sparkrun, launch  .venv-sparkrun/bin/sparkrun run <recipe> --hosts <management addresses, by rank> --offline
                        --init-port <the plan's master port> --trust --no-follow
  sparkrun, stop    .venv-sparkrun/bin/sparkrun stop <recipe> --hosts <the same>

A launch is timed from the command's start to the later of its exit 0 and the first completion the head's API
answers to this tool, which asks from the start every 0.25 s (POST <head>:<port>/v1/completions, the boot's
smoke prompt "Count from 1 to 10:", max_tokens 32): serving, with one completion answered, for both. (Our
boot ends with its own smoke completion; `sparkrun run` waits for its own readiness check, a streamed
completion.) A stop is timed from its start to its exit 0, or, if a container of that side still exists on a
node then, to the moment this tool sees none left (asked every 0.25 s).

Rounds: one warm-up of each side first (not counted: on fresh nodes our first boot also configures the fabric
and installs the memory guard; --no-warmup skips it), then --rounds rounds (default 3), each a launch and a
stop of both sides, ours first in odd rounds and sparkrun first in even ones, so that drift on this shared
machine falls on both. Before every launch the tool checks on every node that no container of either side
exists (labels dgxspark.cluster.rank and sparkrun.cluster_id). Reported: every run, the medians, and the
ratios ours/sparkrun for launch and for stop (target <= 1.0 each).

Same image and arguments. The plan (playbooks/plan.yml, ansible.posix.json callback) gives rank 0's image,
entrypoint, serve command, environment and docker run arguments; sparkrun's recipe is written from them:
command = entrypoint + rank 0's command without the rendezvous flags (--nnodes, --node-rank, --master-addr,
--master-port, --headless: sparkrun appends them per node, its --master-port being --init-port);
tensor_parallel and port from the command; env = the plan's environment less VLLM_HOST_IP (per rank; sparkrun
picks its addresses); executor_config: accelerator_vendor cpu (no --gpus), ipc, the ulimits and the memory
limit. After sparkrun's first launch the tool reads every rank's serve command from its container
(/tmp/sparkrun_serve.sh) and fails unless it equals the plan's for that rank but for --master-addr (sparkrun
advertises the head's management address, its own rule: management first; ours the head's fabric address) and
a --port equal to the head's on the headless workers (sparkrun renders one command for all ranks; a headless
rank serves no API, the plan gives --port to rank 0 only).
Known differences: sparkrun's image is the plan's plus /bin/kill (its liveness check runs `docker exec <c>
kill -0`; the stand-in image has none); sparkrun sets no --memory-swap; it starts every container with
`sleep infinity` and then `docker exec`s the serve, adds its own variables (HF_*, cache directories) and
mounts (the model directory, its caches).

One more thing weighs differently here than on Sparks. Before it starts anything, sparkrun checks that the
workload can read the model: one `docker run` of the image per node (its model access check), one node after
another. The simulated nodes' inner Docker used the vfs storage driver at first, where every container
creation copies the whole image, and those checks took tens of seconds; it now uses overlay2, as a Spark does,
where a container starts without copying anything. The tool reports their span
(sparkrun's output line "[5/6] Launching ..." to "Step 1/7: ...", by the stamps; a few SSH calls fall in it too)
and sparkrun's launch less it beside the figures: a reading aid, not the comparison, which runs sparkrun as it
ships.

Setup (the tool's own, never in sim/images or sim/node; removed at the end unless --keep-stand-ins):
  - per node, with `docker exec`: /usr/local/bin/nvidia-smi, a stand-in reporting one NVIDIA GB10 (sparkrun
    refuses a node without an accelerator; our node_facts reads it too); the plan's model directory with a
    config.json and a small model.safetensors (sparkrun's check of a pre-placed model; the stand-in engine
    reads no weights); the derived image <repository>-bench-peer:<tag>, built on the head FROM the plan's image
    with the node's /bin/kill and copied to the other nodes (`docker save | docker load`): sparkrun wants the
    same image ID on every node. sparkrun's own folders on the nodes (/root/.cache/sparkrun, the Hugging Face
    cache it mounts) are removed at the end when they were not there before.
  - sparkrun's HOME: .cache/bench-peer/<cluster>/home, made afresh: config.yaml (root, the cluster's SSH key, no
    host key checking for these throw-away nodes), registries.yaml with no registry (nothing to clone);
    SPARKRUN_NO_TELEMETRY=1; the recipe .cache/bench-peer/<cluster>/recipe-<cluster>.yaml.
Nothing is contacted but this machine and the cluster's own containers (SSH and the head's API on their
management addresses); sparkrun runs --offline.

--up brings the cluster up (sim/cluster/simctl.py up) when it is not running, and takes it down at the end only
if this script brought it up. If the tool stops on an error, it stops whatever side it left running.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SIMCTL = REPO / "sim" / "cluster" / "simctl.py"
BIN = REPO / ".venv" / "bin"
SPARKRUN_VENV = REPO / ".venv-sparkrun"
SPARKRUN_VERSION = "0.4.2"
SCRATCH = REPO / ".cache" / "bench-peer"

OURS, PEER = "ours", "sparkrun"
SIDE_LABEL = {OURS: "dgxspark.cluster.rank", PEER: "sparkrun.cluster_id"}
TARGET_RATIO = 1.0  # ours / sparkrun, launch and stop

# The flags sparkrun's vllm-distributed runtime appends per node itself (value-taking, then switches).
RENDEZVOUS_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port")
RENDEZVOUS_SWITCHES = ("--headless",)
# vLLM switches that take no value, as far as they can appear in a plan's serve command.
SWITCHES = frozenset({"--headless", "--trust-remote-code", "--enforce-eager", "--disable-uvicorn-access-log"})

SMOKE_PROMPT = "Count from 1 to 10:"  # the boot's boot_smoke_prompt
SMOKE_MAX_TOKENS = 32
POLL_S = 0.25
LAUNCH_TIMEOUT_S = 900.0
STOP_TIMEOUT_S = 300.0
API_AFTER_EXIT_S = 120.0  # how long a launch that exited 0 may still take to answer a completion

STAND_IN_MARK = "dgxspark bench-peer stand-in"
NVIDIA_SMI = "/usr/local/bin/nvidia-smi"
# One NVIDIA GB10 as nvidia-smi reports it (memory fields [N/A]: unified memory); --query-gpu in any field
# order, csv with or without header. Runs with the node's python3.
NVIDIA_SMI_SCRIPT = f"""#!/usr/bin/python3
# {STAND_IN_MARK} (tools/bench_peer.py): reports one NVIDIA GB10. No GPU is here.
import sys

VALUES = {{
    "index": "0", "count": "1", "name": "NVIDIA GB10", "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "pci.bus_id": "0000000F:01:00.0", "driver_version": "580.95.05", "compute_cap": "12.1", "pstate": "P0",
    "temperature.gpu": "40", "power.draw": "5.00",
}}
args = sys.argv[1:]
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "")
if query is not None:
    fields = [f.strip() for f in query.split(",") if f.strip()]
    if "noheader" not in fmt:
        print(", ".join(fields))
    print(", ".join(VALUES.get(f, "[N/A]") for f in fields))
elif "-L" in args or "--list-gpus" in args:
    print("GPU 0: NVIDIA GB10 (UUID: " + VALUES["uuid"] + ")")
else:
    print("nvidia-smi stand-in (tools/bench_peer.py): GPU 0 NVIDIA GB10, driver 580.95.05")
"""
MODEL_MARK = ".dgxspark-bench-peer"
NODE_CACHES = ("/root/.cache/sparkrun", "/root/.cache/huggingface")

START = time.perf_counter()


def say(message: str) -> None:
    print(f"[{time.perf_counter() - START:7.1f}s] {message}", flush=True)


def fail(message: str) -> SystemExit:
    return SystemExit(f"bench_peer: {message}")


def sh(
    *argv: str, check: bool = True, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    if check and proc.returncode != 0:
        raise fail(f"{shlex.join(argv)} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc


def node_sh(node: str, script: str, check: bool = True, stdin: str | None = None) -> str:
    """A shell script in a simulated node (the node container on this machine's Docker engine)."""
    argv = ["docker", "exec", *(["-i"] if stdin is not None else []), node, "sh", "-c", script]
    return sh(*argv, check=check, stdin=stdin).stdout


def on_nodes(nodes: list[Node], job: Callable[[Node], Any]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return list(pool.map(job, nodes))


# --- the cluster and the plan ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    host: str  # the inventory host, also the node container's name
    rank: int
    address: str  # management address: SSH, the head's API


@dataclass
class Plan:
    image: str
    entrypoint: str
    commands: list[list[str]]  # every rank's serve command (without the entrypoint), by rank
    environment: dict[str, str]
    docker_run_args: list[str]
    api_port: int
    master_port: int
    nodes: int

    @property
    def model(self) -> str:
        return self.commands[0][1]

    def option(self, flag: str) -> str | None:
        args = self.commands[0]
        for i, arg in enumerate(args):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
        return None


def running(cluster: str) -> bool:
    return sh(sys.executable, str(SIMCTL), "status", cluster, check=False).returncode == 0


def describe(cluster: str) -> tuple[list[Node], Path]:
    described = json.loads(sh(sys.executable, str(SIMCTL), "describe", cluster).stdout)
    nodes = [Node(n["host"], int(n["rank"]), n["management_address"]) for n in described["nodes"]]
    return sorted(nodes, key=lambda n: n.rank), Path(described["ssh_key"])


def read_plan(inventory: Path, nodes: list[Node]) -> Plan:
    proc = sh(
        str(BIN / "ansible-playbook"),
        "playbooks/plan.yml",
        "-i",
        str(inventory),
        env={"ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"},
    )
    document = json.loads(proc.stdout)
    plan: dict[str, Any] | None = None
    for play in document["plays"]:
        for task in play["tasks"]:
            for result in task["hosts"].values():
                if isinstance(result.get("plan"), dict):
                    plan = result["plan"]
    if plan is None:
        raise fail(f"playbooks/plan.yml -i {inventory} printed no plan")
    ranks = sorted(plan["ranks"], key=lambda r: r["rank"])
    hosts = [r["host"] for r in ranks]
    if hosts != [n.host for n in nodes]:
        raise fail(f"the plan's ranks run on {hosts}, the cluster's nodes by rank are {[n.host for n in nodes]}")
    head = ranks[0]
    if not head.get("entrypoint"):
        raise fail("the plan's rank 0 has no entrypoint: cannot write sparkrun's `vllm serve` command")
    plan_ = Plan(
        image=head["image"],
        entrypoint=head["entrypoint"],
        commands=[list(r["command"]) for r in ranks],
        environment={k: str(v) for k, v in head["environment"].items()},
        docker_run_args=list(head["docker_run_args"]),
        api_port=int(head["api_port"]),
        master_port=int(plan["master_port"]),
        nodes=int(plan["nodes"]),
    )
    if plan_.commands[0][:1] != ["serve"] or not plan_.model.startswith("/"):
        raise fail(
            f"rank 0's command is {plan_.commands[0][:2]}: expected `serve /absolute/model/path` "
            "(sparkrun serves a pre-placed model only from an absolute path)"
        )
    return plan_


# --- sparkrun's side: its recipe, its HOME, the stand-ins on the nodes ----------------------------------


def without_rendezvous(command: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        if arg in RENDEZVOUS_FLAGS:
            skip = True
            continue
        if arg in RENDEZVOUS_SWITCHES or any(arg.startswith(flag + "=") for flag in RENDEZVOUS_FLAGS):
            continue
        out.append(arg)
    return out


def executor_config(plan: Plan) -> tuple[dict[str, Any], list[str]]:
    """docker run arguments of the plan as sparkrun's executor_config, and those it has no setting for."""
    config: dict[str, Any] = {"accelerator_vendor": "cpu"}  # no --gpus: there is no GPU here
    ulimits: list[str] = []
    left: list[str] = []
    args = list(plan.docker_run_args)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if not eq and args and not args[0].startswith("--"):
            value = args.pop(0)
        if name == "--network":
            config["network"] = value
        elif name == "--ipc":
            config["ipc"] = value
        elif name == "--ulimit":
            ulimits.append(value)
        elif name == "--memory":
            config["memory_limit"] = value
        elif name == "--shm-size":
            config["shm_size"] = value
        else:
            left.append(arg if eq or not value else f"{arg} {value}")
    if ulimits:
        config["ulimit"] = ulimits
    return config, left


def recipe_for(plan: Plan, image: str) -> tuple[dict[str, Any], list[str]]:
    tp = plan.option("--tensor-parallel-size")
    if tp is None:
        raise fail("rank 0's command has no --tensor-parallel-size")
    config, left = executor_config(plan)
    command = shlex.join([plan.entrypoint, *without_rendezvous(plan.commands[0])])
    recipe = {
        "recipe_version": "2",
        "description": "tools/bench_peer.py: the dgxspark.cluster plan's serve command, for a comparison",
        "model": plan.model,
        "runtime": "vllm-distributed",
        "container": image,
        "min_nodes": plan.nodes,
        "max_nodes": plan.nodes,
        "defaults": {"tensor_parallel": int(tp), "port": plan.api_port},
        "env": {k: v for k, v in plan.environment.items() if k != "VLLM_HOST_IP"},
        "executor_config": config,
        "command": command,
    }
    return recipe, left


def peer_image(image: str) -> str:
    repository, _colon, tag = image.rpartition(":")
    if not repository or "/" in tag:
        repository, tag = image, "latest"
    return f"{repository}-bench-peer:{tag}"


@dataclass
class Setup:
    """What the tool put on the nodes (removed at the end) and where sparkrun's files are."""

    nodes: list[Node]
    plan: Plan
    image: str
    scratch: Path
    recipe: Path
    sparkrun: Path
    env: dict[str, str]
    installed: dict[str, list[str]] = field(default_factory=dict)  # node -> paths to remove

    @property
    def hosts(self) -> str:
        return ",".join(n.address for n in self.nodes)


def missing_root(node: Node, path: str) -> str | None:
    """The top-most folder of `path` that does not exist on the node (what to remove again), or None."""
    parts = Path(path).parts
    candidates = " ".join(shlex.quote(str(Path(*parts[: i + 1]))) for i in range(1, len(parts)))
    found = node_sh(node.host, f'for p in {candidates}; do test -e "$p" || {{ echo "$p"; break; }}; done')
    return found.strip() or None


def install_node(node: Node, plan: Plan) -> list[str]:
    """nvidia-smi stand-in and model directory on one node; returns what to remove at the end."""
    remove = [cache for cache in (missing_root(node, c) for c in NODE_CACHES) if cache]
    current = node_sh(node.host, f"cat {NVIDIA_SMI} 2>/dev/null || true")
    if current and STAND_IN_MARK not in current:
        raise fail(f"{node.host} has an nvidia-smi that is not this tool's stand-in ({NVIDIA_SMI}); not touching it")
    node_sh(node.host, f"cat > {NVIDIA_SMI} && chmod 755 {NVIDIA_SMI}", stdin=NVIDIA_SMI_SCRIPT)
    remove.append(NVIDIA_SMI)
    model = shlex.quote(plan.model)
    created = missing_root(node, plan.model)
    state = node_sh(node.host, f"test -d {model} && ls -A {model} || echo ABSENT").split()
    if state == ["ABSENT"] or MODEL_MARK in state:
        config = json.dumps({"architectures": ["StandInForCausalLM"], "model_type": "stand-in"})
        node_sh(
            node.host,
            f"mkdir -p {model} && printf '%s\\n' {shlex.quote(config)} > {model}/config.json"
            f" && head -c 1024 /dev/zero > {model}/model.safetensors && : > {model}/{MODEL_MARK}",
        )
        remove.append(created or plan.model)
    elif "config.json" not in state:
        raise fail(f"{node.host}: {plan.model} exists without a config.json (sparkrun's pre-placed model check)")
    return remove


def image_id(node: Node, image: str) -> str:
    return node_sh(node.host, f"docker image inspect -f '{{{{.Id}}}}' {shlex.quote(image)} 2>/dev/null || true").strip()


def build_peer_image(nodes: list[Node], plan: Plan, image: str) -> None:
    """FROM the plan's image plus the node's /bin/kill, built on the head, the same image ID on every node."""
    head = nodes[0]
    base = image_id(head, plan.image)
    if not base:
        raise fail(f"{head.host} has no {plan.image}: make sim-up CLUSTER=... loads the engine image")
    label = node_sh(
        head.host,
        f"docker image inspect -f '{{{{index .Config.Labels \"dgxspark.bench-peer.base\"}}}}' {image} || true",
    ).strip()
    if label != base:
        say(f"    build {image} on {head.host}: FROM {plan.image} + the node's /bin/kill")
        dockerfile = f"FROM {plan.image}\nCOPY kill /bin/kill\nLABEL dgxspark.bench-peer.base={base}\n"
        node_sh(
            head.host,
            "set -e; d=$(mktemp -d); cp /bin/kill $d/kill; cat > $d/Dockerfile;"
            f" DOCKER_BUILDKIT=0 docker build -q -t {image} $d >/dev/null; rm -rf $d",
            stdin=dockerfile,
        )
    wanted = image_id(head, image)
    for node in nodes[1:]:
        if image_id(node, image) != wanted:
            say(f"    copy {image} to {node.host} (docker save | docker load)")
            saver = subprocess.Popen(["docker", "exec", head.host, "docker", "save", image], stdout=subprocess.PIPE)
            loader = subprocess.run(
                ["docker", "exec", "-i", node.host, "docker", "load", "-q"],
                stdin=saver.stdout,
                capture_output=True,
                check=False,
            )
            if saver.stdout is not None:
                saver.stdout.close()
            if saver.wait() != 0 or loader.returncode != 0:
                raise fail(f"copying {image} to {node.host} failed: {loader.stderr.decode()[-1000:]}")
        if image_id(node, image) != wanted:
            raise fail(f"{node.host}: {image} has another image ID than on {head.host}")


def find_sparkrun() -> Path:
    sparkrun = SPARKRUN_VENV / "bin" / "sparkrun"
    if not sparkrun.exists():
        raise fail(f"no {sparkrun.relative_to(REPO)}: make venv-sparkrun (sparkrun {SPARKRUN_VERSION}, Python 3.13)")
    version = sh(str(sparkrun), "--version", check=False)
    if SPARKRUN_VERSION not in version.stdout + version.stderr:
        raise fail(
            f"{sparkrun.relative_to(REPO)} --version says {(version.stdout + version.stderr).strip()!r}, "
            f"this tool is written for {SPARKRUN_VERSION}: make venv-sparkrun"
        )
    return sparkrun


def prepare(cluster: str, nodes: list[Node], key: Path, plan: Plan) -> Setup:
    sparkrun = find_sparkrun()
    scratch = SCRATCH / cluster
    home = scratch / "home"
    shutil.rmtree(home, ignore_errors=True)
    (scratch / "logs").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "sparkrun").mkdir(parents=True)
    if not key.exists():
        raise fail(f"no SSH key {key}: is {cluster} up (make sim-up CLUSTER={cluster})?")
    ssh_options = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    config = {"ssh": {"user": "root", "key": str(key), "options": ssh_options}}
    (home / ".config" / "sparkrun" / "config.yaml").write_text(json.dumps(config, indent=2) + "\n")
    (home / ".config" / "sparkrun" / "registries.yaml").write_text('{"config_version": 1, "registries": []}\n')
    image = peer_image(plan.image)
    recipe, left = recipe_for(plan, image)
    recipe_path = scratch / f"recipe-{cluster}.yaml"
    recipe_path.write_text(json.dumps(recipe, indent=2) + "\n")  # JSON is YAML
    say(f"sparkrun {SPARKRUN_VERSION}: HOME {home.relative_to(REPO)}, recipe {recipe_path.relative_to(REPO)}")
    say(f"    serve: {recipe['command']}")
    say(
        f"    env {' '.join(f'{k}={v}' for k, v in recipe['env'].items())}; executor_config {recipe['executor_config']}"
    )
    if left:
        say(f"    not carried to sparkrun (no recipe setting for it): {' '.join(left)}")
    setup = Setup(
        nodes=nodes,
        plan=plan,
        image=image,
        scratch=scratch,
        recipe=recipe_path,
        sparkrun=sparkrun,
        env={
            "HOME": str(home),
            "SPARKRUN_NO_TELEMETRY": "1",
        },
    )
    say(f"stand-ins on {', '.join(n.host for n in nodes)}: nvidia-smi (GB10), {plan.model}, {image}")
    for node, remove in zip(nodes, on_nodes(nodes, lambda n: install_node(n, plan)), strict=True):
        setup.installed[node.host] = remove
    build_peer_image(nodes, plan, image)
    return setup


def teardown(setup: Setup, keep: bool) -> None:
    if keep:
        say("stand-ins kept on the nodes (--keep-stand-ins)")
        return
    say(f"removing the stand-ins and {setup.image} from the nodes")

    def clean(node: Node) -> None:
        paths = " ".join(shlex.quote(p) for p in setup.installed.get(node.host, []))
        node_sh(node.host, f"rm -rf {paths}; docker rmi {setup.image} >/dev/null 2>&1 || true", check=False)

    on_nodes(setup.nodes, clean)


# --- one launch, one stop ---------------------------------------------------------------------------------


def containers(nodes: list[Node], side: str) -> dict[str, list[str]]:
    label = SIDE_LABEL[side]

    def look(node: Node) -> list[str]:
        return node_sh(node.host, f"docker ps -a --filter label={label} --format '{{{{.Names}}}}'").split()

    return {n.host: found for n, found in zip(nodes, on_nodes(nodes, look), strict=True) if found}


def ensure_clean(nodes: list[Node], before: str) -> None:
    for side in (OURS, PEER):
        left = containers(nodes, side)
        if left:
            raise fail(f"before {before}: containers of {side} still exist: {left} (its stop did not remove them)")


class Poller(threading.Thread):
    """Asks the head's API for a completion every POLL_S until one is answered; keeps when."""

    def __init__(self, url: str, model: str, start: float) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.body = json.dumps({"model": model, "prompt": SMOKE_PROMPT, "max_tokens": SMOKE_MAX_TOKENS}).encode()
        self.start_at = start
        self.answered_s: float | None = None
        self.text = ""
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            request = urllib.request.Request(self.url, data=self.body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answer = json.loads(response.read())
                text = answer["choices"][0]["text"]
                if text:
                    self.answered_s = time.perf_counter() - self.start_at
                    self.text = text
                    return
            except (OSError, urllib.error.URLError, ValueError, KeyError, IndexError):
                pass
            self.halt.wait(POLL_S)


@dataclass
class Launch:
    launch_s: float
    exit_s: float
    api_s: float
    checks_s: float | None  # sparkrun: its model access checks and other preflight, by its output's stamps


# sparkrun's output lines around its per-node model access checks (see the docstring).
CHECKS_FROM, CHECKS_TO = "[5/6] Launching", "Step 1/7:"


def run_stamped(
    argv: list[str], env: dict[str, str], log: Path, start: float, timeout: float, marks: tuple[str, ...] = ()
) -> tuple[int, dict[str, float]]:
    """Run a command, its output line by line into `log` stamped with the time since `start`; when each mark's
    first line came; its exit status (killed after `timeout` seconds)."""
    seen: dict[str, float] = {}
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
    )
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        with log.open("w") as out:
            assert proc.stdout is not None
            for line in proc.stdout:
                now = time.perf_counter() - start
                out.write(f"[{now:8.2f}s] {line}")
                for mark in marks:
                    if mark not in seen and mark in line:
                        seen[mark] = now
        rc = proc.wait()
    finally:
        killer.cancel()
    return rc, seen


def launch(setup: Setup, side: str, argv: list[str], env: dict[str, str], log: Path) -> Launch:
    head = setup.nodes[0]
    url = f"http://{head.address}:{setup.plan.api_port}/v1/completions"
    model = setup.plan.option("--served-model-name") or setup.plan.model
    start = time.perf_counter()
    poller = Poller(url, model, start)
    poller.start()
    rc, seen = run_stamped(argv, env, log, start, LAUNCH_TIMEOUT_S, (CHECKS_FROM, CHECKS_TO) if side == PEER else ())
    exit_s = time.perf_counter() - start
    if rc != 0:
        poller.halt.set()
        raise fail(f"{side} launch failed ({rc}): {shlex.join(argv)}\n{log.read_text()[-3000:]}\n(log: {log})")
    poller.join(timeout=API_AFTER_EXIT_S)
    poller.halt.set()
    if poller.answered_s is None:
        raise fail(f"{side}: the launch exited 0 but {url} answered no completion within {API_AFTER_EXIT_S:.0f} s")
    checks = seen[CHECKS_TO] - seen[CHECKS_FROM] if CHECKS_FROM in seen and CHECKS_TO in seen else None
    return Launch(launch_s=max(exit_s, poller.answered_s), exit_s=exit_s, api_s=poller.answered_s, checks_s=checks)


def stop(setup: Setup, side: str, argv: list[str], env: dict[str, str], log: Path) -> float:
    start = time.perf_counter()
    rc, _seen = run_stamped(argv, env, log, start, STOP_TIMEOUT_S)
    took = time.perf_counter() - start
    if rc != 0:
        raise fail(f"{side} stop failed ({rc}): {shlex.join(argv)}\n{log.read_text()[-3000:]}\n(log: {log})")
    if containers(setup.nodes, side):
        while left := containers(setup.nodes, side):
            if time.perf_counter() - start > STOP_TIMEOUT_S:
                raise fail(f"{side} stop exited 0 but left {left}")
            time.sleep(POLL_S)
        took = time.perf_counter() - start
    return took


class Sides:
    def __init__(self, setup: Setup, inventory: Path) -> None:
        self.setup = setup
        self.inventory = str(inventory)
        self.count = 0
        self.live: set[str] = set()

    def commands(self, side: str) -> tuple[list[str], list[str], dict[str, str]]:
        if side == OURS:
            playbook = str(BIN / "ansible-playbook")
            return (
                [playbook, "playbooks/boot.yml", "-i", self.inventory],
                [playbook, "playbooks/stop.yml", "-i", self.inventory],
                {},
            )
        s = self.setup
        recipe, hosts = str(s.recipe), s.hosts
        run = [str(s.sparkrun), "run", recipe, "--hosts", hosts, "--offline", "--init-port", str(s.plan.master_port)]
        return (
            [*run, "--trust", "--no-follow"],
            [str(s.sparkrun), "stop", recipe, "--hosts", hosts],
            s.env,
        )

    def round(self, side: str, label: str, check_args: bool = False) -> dict[str, float]:
        self.count += 1
        logs = self.setup.scratch / "logs"
        up, down, env = self.commands(side)
        ensure_clean(self.setup.nodes, f"{side}'s launch")
        self.live.add(side)
        started = launch(self.setup, side, up, env, logs / f"{self.count:02d}-{side}-launch.log")
        checks = "" if started.checks_s is None else f", its model access checks {started.checks_s:.1f} s"
        say(
            f"    {label} {side:<8} launch {started.launch_s:6.1f} s (exit {started.exit_s:.1f} s, "
            f"API answered {started.api_s:.1f} s{checks})"
        )
        if check_args and side == PEER:
            same_arguments(self.setup)
        took = stop(self.setup, side, down, env, logs / f"{self.count:02d}-{side}-stop.log")
        self.live.discard(side)
        say(f"    {label} {side:<8} stop   {took:6.1f} s")
        row = {"launch_s": started.launch_s, "exit_s": started.exit_s, "api_s": started.api_s, "stop_s": took}
        if started.checks_s is not None:
            row["checks_s"] = started.checks_s
        return row

    def stop_leftovers(self) -> None:
        """After an error: stop whatever side may still run (best effort)."""
        for side in (OURS, PEER):
            if side in self.live or containers(self.setup.nodes, side):
                say(f"stopping what {side} left running")
                _up, down, env = self.commands(side)
                subprocess.run(down, cwd=REPO, env={**os.environ, **env}, capture_output=True, check=False)


# --- the same arguments -----------------------------------------------------------------------------------


def options(argv: list[str]) -> tuple[list[str], dict[str, str | None]]:
    positional: list[str] = []
    found: dict[str, str | None] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq:
                found[name] = value
            elif name in SWITCHES or i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                found[name] = None
            else:
                found[name] = argv[i + 1]
                i += 1
        else:
            positional.append(arg)
        i += 1
    return positional, found


def same_arguments(setup: Setup) -> None:
    """Every rank's serve command as sparkrun ran it against the plan's.

    Only --master-addr may differ, and a headless worker may carry the head's --port and --host (sparkrun renders
    one command for every rank and appends the rendezvous flags; the plan gives --port and --host to rank 0 only).
    """
    label = SIDE_LABEL[PEER]

    def served(node: Node) -> str:
        return node_sh(
            node.host,
            f"c=$(docker ps -q --filter label={label} | head -n 1); docker exec $c cat /tmp/sparkrun_serve.sh",
        )

    problems: list[str] = []
    master: set[str] = set()
    head_host = options(setup.plan.commands[0])[1].get("--host")
    for node, script in zip(setup.nodes, on_nodes(setup.nodes, served), strict=True):
        tokens = shlex.split(script)
        at = next((i for i in range(len(tokens) - 1) if tokens[i : i + 2] == [setup.plan.entrypoint, "serve"]), None)
        if at is None:
            problems.append(f"{node.host}: no `{setup.plan.entrypoint} serve` in /tmp/sparkrun_serve.sh")
            continue
        theirs = options(tokens[at + 1 :])
        ours = options(setup.plan.commands[node.rank])
        master.add(str(theirs[1].get("--master-addr")))
        if theirs[0] != ours[0]:
            problems.append(f"{node.host}: positional {theirs[0]} != plan's {ours[0]}")
        allowed = {"--master-addr"}
        if "--headless" in ours[1] and theirs[1].get("--port") == str(setup.plan.api_port):
            allowed.add("--port")  # one command for every rank: a headless worker gets the head's --port too
        if "--headless" in ours[1] and theirs[1].get("--host") == head_host:
            allowed.add("--host")  # likewise the head's API bind address (the plan gives it to rank 0 only)
        for flag in sorted(set(theirs[1]) | set(ours[1])):
            if flag not in allowed and theirs[1].get(flag, "<absent>") != ours[1].get(flag, "<absent>"):
                problems.append(
                    f"{node.host} rank {node.rank}: {flag} sparkrun {theirs[1].get(flag, '<absent>')!r}, "
                    f"plan {ours[1].get(flag, '<absent>')!r}"
                )
    if problems:
        raise fail("sparkrun did not run the plan's `vllm serve` arguments:\n  " + "\n  ".join(problems))
    say(
        f"    same `vllm serve` arguments on all {len(setup.nodes)} ranks but --master-addr "
        f"(sparkrun {', '.join(sorted(master))}, plan {setup.plan.option('--master-addr')}) and the workers' "
        f"--port {setup.plan.api_port} and --host (sparkrun gives every rank the head's command; a headless rank "
        "serves no API)"
    )


# --- report -----------------------------------------------------------------------------------------------


def report(runs: dict[str, list[dict[str, float]]], warmup: dict[str, dict[str, float]]) -> dict[str, Any]:
    def med(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    print(f"\nours vs sparkrun {SPARKRUN_VERSION}, {len(runs[OURS])} rounds, wall time (s)")
    for side in (OURS, PEER):
        for key in ("launch_s", "stop_s"):
            print(f"  {side:<8} {key[:-2]:<6} " + " ".join(f"{r[key]:7.1f}" for r in runs[side]))
    if warmup:
        print(
            "  warm-up (not counted): "
            + ", ".join(f"{s} launch {w['launch_s']:.1f} stop {w['stop_s']:.1f}" for s, w in warmup.items())
        )
    print(f"\n  {'median':<16} {'ours':>7} {'sparkrun':>9} {'ours/sparkrun':>14} {'target':>7}")
    summary: dict[str, Any] = {}
    for key, name in (("launch_s", "launch"), ("stop_s", "stop")):
        ours, peer = med(OURS, key), med(PEER, key)
        ratio = ours / peer
        verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
        print(f"  {name:<16} {ours:7.1f} {peer:9.1f} {ratio:14.2f} {'<= 1.0':>7}  {verdict}")
        summary[name] = {"ours_s": ours, "sparkrun_s": peer, "ratio": ratio, "target": TARGET_RATIO, "verdict": verdict}
    for key, name in (("exit_s", "launch: exit"), ("api_s", "launch: API")):
        print(f"  {name:<16} {med(OURS, key):7.1f} {med(PEER, key):9.1f}")
    checks = [r["checks_s"] for r in runs[PEER] if "checks_s" in r]
    if len(checks) == len(runs[PEER]):
        less = statistics.median(r["launch_s"] - r["checks_s"] for r in runs[PEER])
        ours = med(OURS, "launch_s")
        print(
            "\n  reading aid, not the comparison: sparkrun's model access checks (one `docker run` per node, one\n"
            "  after another)"
        )
        print(f"  {'checks':<16} {'':>7} {statistics.median(checks):9.1f}")
        print(f"  {'launch - checks':<16} {ours:7.1f} {less:9.1f} {ours / less:14.2f}")
        summary["reading_aid"] = {"sparkrun_checks_s": statistics.median(checks), "sparkrun_launch_less_checks_s": less}
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", maxsplit=1)[0])
    parser.add_argument("--cluster", default="sim3", help="simulated cluster: sim3, sim4 or sim8 (default sim3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds after the warm-up (default 3)")
    parser.add_argument("--no-warmup", action="store_true", help="no warm-up launch and stop of each side")
    parser.add_argument("--up", action="store_true", help="bring the cluster up first if it is not running")
    parser.add_argument("--keep-stand-ins", action="store_true", help="leave the stand-ins and image on the nodes")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("need at least one round")
    if not (BIN / "ansible-playbook").exists():
        raise fail("no .venv/bin/ansible-playbook: make venv")
    find_sparkrun()
    inventory = REPO / "inventories" / args.cluster / "hosts.yml"
    if not inventory.exists():
        raise fail(f"no {inventory.relative_to(REPO)}")
    brought_up = False
    setup: Setup | None = None
    sides: Sides | None = None
    done = False
    try:
        say(f"{args.cluster}: is it up? (simctl.py status)")
        if not running(args.cluster):
            if not args.up:
                raise fail(f"{args.cluster} is not running: make sim-up CLUSTER={args.cluster}, or --up")
            say(f"{args.cluster} is not running: simctl.py up {args.cluster}")
            brought_up = True
            sh(sys.executable, str(SIMCTL), "up", args.cluster)
        nodes, key = describe(args.cluster)
        say(f"{args.cluster}: {', '.join(f'{n.host} {n.address}' for n in nodes)}; plan from playbooks/plan.yml")
        plan = read_plan(inventory, nodes)
        setup = prepare(args.cluster, nodes, key, plan)
        sides = Sides(setup, inventory)
        warmup: dict[str, dict[str, float]] = {}
        if not args.no_warmup:
            say("warm-up (not counted): one launch and stop of each side")
            for side in (OURS, PEER):
                warmup[side] = sides.round(side, "warm-up ", check_args=True)
        runs: dict[str, list[dict[str, float]]] = {OURS: [], PEER: []}
        for n in range(1, args.rounds + 1):
            order = (OURS, PEER) if n % 2 else (PEER, OURS)
            say(f"round {n}/{args.rounds}: {' then '.join(order)}")
            for side in order:
                runs[side].append(sides.round(side, f"round {n}", check_args=args.no_warmup and n == 1))
        summary = report(runs, warmup)
        if args.json:
            document = {
                "cluster": args.cluster,
                "sparkrun": SPARKRUN_VERSION,
                "rounds": args.rounds,
                "warmup": warmup,
                "runs": runs,
                **summary,
            }
            args.json.write_text(json.dumps(document, indent=2) + "\n")
        done = True
    finally:
        if sides is not None and not done:
            sides.stop_leftovers()
        if setup is not None:
            teardown(setup, args.keep_stand_ins)
        if brought_up:
            say(f"simctl.py down {args.cluster} (brought up by this script)")
            sh(sys.executable, str(SIMCTL), "down", args.cluster, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
