# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving profile, schema_version 2.

The keys of seed 000's ``configs/serving-profile.json`` (schema_version, promoted_baseline, model,
upstream, generation_defaults, default_shape, shapes with nodes/sizing/fabric/environment, container
with image and docker_run_args, host with the memory-guard settings and kernel) are taken exactly as
they are, so a profile written in that format validates. Everything else is an optional extension
for what seed 002 and the field reports need; each extension says where it comes from.

``schemas/serving-profile.v2.schema.json`` is generated from this file (``make schema``); a unit test
fails when the two differ.
"""

from __future__ import annotations

from ansible_collections.dgxspark.cluster.plugins.module_utils import _unit_names
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.preflight import files as _file_checks
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import api_access as _api_access
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import policy as _policy
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile import secrets as _secrets
from ansible_collections.dgxspark.cluster.plugins.plugin_utils.profile.spec import Node, optional

SCHEMA_VERSION = 2
SCHEMA_ID = "https://github.com/dgxspark/cluster/blob/main/schemas/serving-profile.v2.schema.json"

DEFAULT_CONTAINER_NAME = "vllm_dsv41"  # seed 000: "no previous vllm_dsv41 container still running"
DEFAULT_ENTRYPOINT = ("vllm", "serve")  # seed 002 lesson 7: render the entrypoint explicitly
DEFAULT_API_PORT = 8000  # vLLM's default --port
DEFAULT_MASTER_PORT = 29501  # vLLM's default --master-port (multi-node, mp backend)

SHAPE_NAME = r"[a-z0-9][a-z0-9._-]{0,62}"
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
LONG_FLAG = r"--[A-Za-z0-9][A-Za-z0-9_-]*"
DOCKER_NAME = r"[a-zA-Z0-9][a-zA-Z0-9_.-]+"
ABS_PATH = r"/[^\x00-\x1f\x7f]*"
# A value where vLLM's parser reads an argument (the model, the served name, the entrypoint's words): one word that
# does not start with '-', which argparse would read as an option (model_path "--trust-remote-code" is a switch).
VALUE_WORD = r"[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*"
VALUE_WORD_HINT = "one word, not starting with - (vLLM would read it as an option)"
IMAGE_REF = r"[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?"
# Values written into files other programs parse, each an allow-list (issue 15):
# a kernel command-line word lands in a GRUB drop-in that update-grub sources with sh, then in grub.cfg:
# letters, digits and _ . , : @ + / = % - only (kho=off, console=ttyS0,115200n8, isolcpus=1-3), no quote,
# no $, no backslash, no shell or GRUB metacharacter, at most 256 characters;
CMDLINE_WORD = r"[A-Za-z0-9_][A-Za-z0-9_.,:@+/=%-]{0,255}"
CMDLINE_WORD_HINT = "one kernel parameter such as kho=off (letters, digits and _ . , : @ + / = % - only)"
# an interface name lands in netplan YAML, networkd file names and sysctl keys: Linux's IFNAMSIZ (at most 15
# characters), starting with a letter, digit or _ (no - * or quote), then letters, digits, _ and - (no dot:
# a sysctl key splits on it; no = ; / : or control byte); one definition (plugin_utils/preflight/files.py), which
# the fabric role's files are checked with on the node as well;
IFNAME = _file_checks.IFNAME
IFNAME_HINT = "an interface name such as enp1s0f1np1 (at most 15 letters, digits, _ or -, not starting with -)"
# a systemd unit name reaches systemctl's argv: a valid unit name (systemd.unit(5)), never starting with -; one
# definition (module_utils/_unit_names.py), which node_phase checks its helpers with on the node as well.
UNIT_NAME = _unit_names.UNIT_NAME
UNIT_NAME_HINT = _unit_names.UNIT_NAME_HINT

# Checks a profile may waive, with a reason, where it knowingly runs outside what real Sparks need
# (the simulated cluster: no RDMA, no GPU, a host that grants nofile 20000 at most).
WAIVABLE_CHECKS = {
    "network-host": "ranks on the host's network",
    "memlock-unlimited": "memlock unlimited when NCCL uses RoCE",
    "ipc-lock": "the IPC_LOCK capability when NCCL uses RoCE",
    "rdma-devices": "/dev/infiniband passed in when NCCL uses RoCE",
    "gpus": "--gpus when NCCL uses RoCE (real hardware)",
    "nofile-at-8-ranks": "nofile >= 1048576 at 8 ranks (NCCL 2.30)",
    "nvls-off": "NCCL_NVLS_ENABLE=0 (GB10 has no NVLink)",
    "nccl-channels-at-8-ranks": "at most 8 NCCL channels at 8 ranks",
    "nccl-buffsize-at-8-ranks": "NCCL buffers of at most 1 MiB at 8 ranks",
    # Seed rules (docs/seed-rules.md): each names its seed and section in its message.
    "stack-64m": "a 64 MiB stack ulimit (seed 002 section 4.2)",
    "container-memory-limit": "--memory set, leaving 9 GiB of the 121 for the OS (seed 002 section 4.2, seed 000)",
    "no-swap-headroom": "--memory-swap equal to --memory (seed 000)",
    "ipc-host": "--ipc=host (seed 000)",
    "cpuset-pinned": "a --cpuset-cpus set of CPUs a GB10 has (seed 000; seed 002 section 2: 20 cores)",
    "concurrency-at-1m": "at most 4 concurrent sequences at 1M context on 3 nodes (seed 000)",
    "kv-cache-explicit": "a KV cache sized in bytes, or the one vLLM reports at the shape's gpu_memory_utilization "
    "(seed 000; seed 002 section 6)",
    "gmu-within-memory-limit": "gpu_memory_utilization x a GB10's 121 GiB within --memory (seed 002 section 4.2)",
    "memguard-grace": "guard graces of at least one sampling interval, and the seed's 45 s and 30 s (seed 000)",
    "memguard-floors": "guard floors above the emergency floor and under the seed's 6.8 GiB headroom (seed 000)",
    "min-mem-available": "a pre-boot floor of at least 100 GiB MemAvailable (seed 000)",
    "autotuner-off-at-300k": "AutoTuner off where its peak does not fit, as seed 002's 300K shape (section 5.1)",
    "nccl-in-budget": "an NCCL component in the memory budget at 8 ranks (seed 002 lesson 1)",
    "nccl-ipv4": "NCCL_IB_ADDR_FAMILY=AF_INET (seed 002 section 4.3)",
    "nccl-cross-nic": "NCCL_CROSS_NIC=1 (seed 002 section 4.3; a warning)",
    "nccl-async-errors": "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (seed 002 section 4.3; a warning)",
    "nccl-debug": "NCCL_DEBUG=WARN (seed 002 section 4.3; a warning)",
    "nccl-cpu-affinity": "each shape's own seed's CPU rule: --cpuset-cpus on seed 000's 3 and 4 nodes, "
    "NCCL_IGNORE_CPU_AFFINITY=1 on seed 002's 8 (a warning)",
    "engram-image": "an image that can place the Engram tables where engram.placement says (seed 002 section 3)",
    "roce-v2": "NCCL_IB_ROCE_VERSION_NUM=2 (seed 000, seed 002 section 4.3)",
    "nccl-cumem-off": "NCCL_CUMEM_ENABLE=0 (seed 002 section 4.3)",
    "nccl-no-nic-merge": "NCCL_IB_MERGE_NICS=0 (seed 002 section 4.3)",
    "usable-memory-gib": "memory.usable_gib within a GB10's MemTotal in GiB (docs/units.md)",
    "fabric-not-management": "fabric addresses apart from management addresses (seed 000)",
    # The allow-lists (docs/profile.md, "What a rank may get of its node"; profile/policy.py): what a rank may get
    # and what the profile may ask of the node.
    **_policy.CHECKS,
}

# How the nodes are cabled, and the fabric transports seed 000 names for them.
TOPOLOGIES = ("triangle", "ring", "switch")
TRANSPORTS = {
    "oneshot-direct": "triangle",  # seed 000 tp3-triangle: each pair on its own direct segment
    "oneshot-ring4": "ring",  # seed 000 tp4-ring
    "switch": "switch",  # seed 002: 8 nodes through a 200 GbE switch
    "direct": "triangle",
    "ring": "ring",
}
NCCL_NETS = ("IB", "Socket")  # NCCL's own names for its RoCE (verbs) and TCP transports

_text = Node(
    "string",
    "Free text for people reading the profile.",
    pattern=r"[^\x00-\x1f\x7f]*",
    pattern_hint="printable text on one line",
)
_env_map = Node(
    "map",
    "Environment variables for the container: names as the shell spells them, values as strings.",
    values=Node("string", 'The variable\'s value, a string (quote numbers: "8").'),
    key_pattern=ENV_NAME,
    default={},
)
_flag_list = Node(
    "array",
    "Extra arguments appended to `vllm serve`, one argv element each (never a shell string).",
    values=Node("string"),
    default=[],
)


def _secret_file(doc: str = "", required: bool = False) -> Node:
    """The path of a file on every node, in the form container.secrets takes (_secrets.SECRET_PATH)."""
    return Node("string", doc, required=required, pattern=_secrets.SECRET_PATH, pattern_hint=_secrets.SECRET_PATH_HINT)


SIZING = Node(
    "object",
    "Scheduler and KV-cache sizing; every rank must agree on all of it.",
    required=True,
    fields={
        "max_model_len": Node("integer", "vLLM --max-model-len (tokens).", required=True, minimum=1),
        "max_num_seqs": Node(
            "integer", "vLLM --max-num-seqs: concurrent sequences; the rest queue.", required=True, minimum=1
        ),
        "max_num_batched_tokens": Node("integer", "vLLM --max-num-batched-tokens.", required=True, minimum=1),
        "kv_cache_memory_bytes": Node(
            "integer", "vLLM --kv-cache-memory-bytes: an explicit KV cache size per rank (seed 000).", minimum=1
        ),
        "prefix_cache_retention_interval": Node(
            "integer", "vLLM --prefix-cache-retention-interval (seed 000).", minimum=0
        ),
        "gpu_memory_utilization": Node(
            "number",
            "vLLM --gpu-memory-utilization, the share of memory vLLM may use (seed 002: 0.80, 0.75).",
            exclusive_minimum=0,
            maximum=1,
        ),
        "block_size": Node("integer", "vLLM --block-size, tokens per KV-cache block (seed 002: 128).", minimum=1),
        "long_prefill_token_threshold": Node("integer", "vLLM --long-prefill-token-threshold.", minimum=0),
    },
)

FABRIC = Node(
    "object",
    "How the ranks talk: cabling and NCCL's transport.",
    required=True,
    fields={
        "transport": Node(
            "string",
            "The fabric transport, as seed 000 names it: "
            + ", ".join(f"{k} ({v})" for k, v in TRANSPORTS.items())
            + "; another name needs fabric.topology.",
            required=True,
            pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*",
            pattern_hint="a transport name such as oneshot-direct",
        ),
        "topology": Node("string", "Cabling; derived from transport when absent.", enum=TOPOLOGIES),
        "nccl_net": Node(
            "string",
            "NCCL transport: IB (RoCE v2 verbs, real Sparks) or Socket (TCP, no RDMA).",
            enum=NCCL_NETS,
            default="IB",
        ),
        "hca": Node(
            "array",
            "RoCE devices NCCL may use (NCCL_IB_HCA); discovered on the nodes when absent.",
            values=Node("string", pattern=r"[A-Za-z0-9_.:-]+", pattern_hint="a device name such as rocep1s0f1"),
        ),
        "socket_ifname": Node(
            "string",
            "Interfaces for NCCL's bootstrap (NCCL_SOCKET_IFNAME).",
            pattern=r"[=^]?[A-Za-z0-9_.,:-]+",
            pattern_hint="interface names such as enp1s0f1np1",
        ),
        "gid_index": Node(
            "integer", "RoCE v2 IPv4 GID index (NCCL_IB_GID_INDEX); discovered when absent.", minimum=0, maximum=255
        ),
        "mtu": Node("integer", "Fabric MTU.", minimum=1280, maximum=9216, default=9000),
        "link_speed_mbps": Node(
            "integer", "Expected link speed in Mb/s (a ConnectX-7 port: 200000).", minimum=1, default=200000
        ),
    },
)

MEMORY = Node(
    "object",
    "Per-rank memory budget (seed 002 section 6). Figures are GiB, as vLLM and Docker count them.",
    fields={
        "usable_gib": Node(
            "number",
            "Unified memory per node that the budget shares (seed 002: 121).",
            required=True,
            exclusive_minimum=0,
        ),
        "components_gib": Node(
            "map",
            "What each rank holds before its KV cache: model, engram, nccl, cuda_graphs, autotune_peak...",
            required=True,
            values=Node("number", minimum=0),
            key_pattern=r"[a-z][a-z0-9_]*",
        ),
        "kv_cache_gib": Node(
            "number", "KV cache the shape expects per rank (seed 002: ~8.7, ~30).", exclusive_minimum=0
        ),
        "kv_cache_bytes_per_token": Node(
            "number", "KV-cache bytes one token costs on one rank, calibrated per shape.", exclusive_minimum=0
        ),
    },
)

CONTAINER_OVERRIDE_FIELDS = {
    "image": Node(
        "string",
        "The serving image (never pulled from a registry by a boot): name:tag, name@sha256:<64 hex> (a repository "
        "digest) or sha256:<64 hex> (an image ID); named by digest or ID, the preflight checks that every node "
        "holds exactly that image.",
        pattern=IMAGE_REF,
        pattern_hint="an image reference such as vllm-dsv41:latest",
    ),
    "docker_run_args": Node(
        "array", '`docker run` options, one argv element each, such as "--ipc=host".', values=Node("string")
    ),
    "serve_args": _flag_list,
}

SHAPE = Node(
    "object",
    "One way to run the model: how many nodes, how big, over which fabric.",
    fields={
        "nodes": Node("integer", "Number of nodes (one rank per node).", required=True, minimum=1, maximum=1024),
        "description": _text,
        "sizing": SIZING,
        "fabric": FABRIC,
        "environment": _env_map,
        "container": Node(
            "object", "Overrides of the top-level container for this shape.", fields=CONTAINER_OVERRIDE_FIELDS
        ),
        "speculative_config": Node("map", "vLLM --speculative-config, as an object (seed 002 section 5.3)."),
        "engram": Node(
            "object",
            "Where the Engram tables live (seed 002 sections 1 and 5).",
            fields={
                "placement": Node(
                    "string",
                    "host-memory: pinned host memory; disk: Engram-on-disk.",
                    required=True,
                    enum=("host-memory", "disk"),
                ),
            },
        ),
        "autotuner": Node("boolean", "FlashInfer AutoTuner on or off (seed 002: off at 300K to avoid an OOM peak)."),
        "memory": MEMORY,
    },
)

KERNEL = Node(
    "object",
    "What the host kernel must be.",
    fields={
        "release": Node("string", "Expected `uname -r`.", pattern=r"[A-Za-z0-9._+~-]+"),
        "page_size": Node("integer", "Expected page size in bytes.", enum=(4096, 16384, 65536)),
        "memory_saver_required": Node("boolean", "The NVIDIA memory-saver module must be loaded.", default=False),
        "cmdline_required": Node(
            "array",
            "Kernel command-line words that must be present (kho=off on 7.x): words the collection knows ("
            + _policy.KERNEL_WORDS_KNOWN
            + "), another only under the waiver kernel-words.",
            values=Node("string", pattern=CMDLINE_WORD, pattern_hint=CMDLINE_WORD_HINT),
        ),
    },
)

HOST = Node(
    "object",
    "Host-side settings: the memory guard's phases, the boot floor, helpers and the kernel.",
    required=True,
    fields={
        "memguard_gib": Node(
            "number", "Steady-phase MemAvailable floor (seed 000: 3).", required=True, exclusive_minimum=0
        ),
        "memguard_interval_seconds": Node(
            "number", "Steady-phase sampling interval (seed 000: 2).", required=True, exclusive_minimum=0
        ),
        "memguard_grace_seconds": Node(
            "number",
            "How long the steady floor may be crossed before the guard trips (seed 000: 30).",
            minimum=0,
            default=30,
        ),
        "startup_memguard_gib": Node(
            "number", "Startup-phase floor (seed 000: 5).", required=True, exclusive_minimum=0
        ),
        "startup_memguard_interval_seconds": Node(
            "number", "Startup-phase interval (seed 000: 0.25).", required=True, exclusive_minimum=0
        ),
        "startup_memguard_grace_seconds": Node("number", "Startup-phase grace (seed 000: 45).", minimum=0, default=45),
        "startup_memguard_wait_seconds": Node(
            "number",
            "How long the startup phase's floor and grace apply (seed 000: 120). A load still running then is not "
            "stopped for being slow: the guard records it as overdue and judges it by the steady floor and grace from "
            "then on; the boot report and the next preflight WARN with how long it took.",
            required=True,
            exclusive_minimum=0,
        ),
        "min_mem_available_gib": Node(
            "number", "MemAvailable every node needs before a boot (seed 000: 100).", exclusive_minimum=0, default=100
        ),
        "helper_services": Node(
            "array",
            "systemd units paused during a boot and resumed after.",
            values=Node("string", pattern=UNIT_NAME, pattern_hint=UNIT_NAME_HINT),
            default=[],
        ),
        "weights_path": Node(
            "string",
            "Where the weights live on each node (free-disk check, bind mount).",
            pattern=ABS_PATH,
            pattern_hint="an absolute path",
        ),
        "secrets_dir": Node(
            "string",
            "The one directory on every node that holds the secrets' files (container.secrets, container.api's key "
            f"and TLS files, each a file directly in it); default {_policy.DEFAULT_SECRETS_DIR}. Inside "
            + ", ".join(_policy.SECRETS_DIR_TREES)
            + ", or clear of every system directory (/etc, /proc, /sys, /root, /home, /run, /usr, /lib, ...); "
            "playbooks/secrets.yml writes nowhere else, and a rank may have it bound read-only.",
            pattern=_secrets.SECRET_PATH,
            pattern_hint="an absolute path such as /etc/dgxspark/secrets",
        ),
        "engram_path": Node(
            "string",
            "Where a local copy of the Engram rows lives on each node (bound into a rank for DSV41_ENGRAM_DIR): a "
            "path a rank may have bound, besides weights_path and secrets_dir.",
            pattern=ABS_PATH,
            pattern_hint="an absolute path",
        ),
        "kernel": KERNEL,
    },
)

CONTAINER = Node(
    "object",
    "The serving container every rank runs.",
    required=True,
    fields={
        **CONTAINER_OVERRIDE_FIELDS,
        "image": Node(
            "string",
            "The serving image (never pulled from a registry by a boot): name:tag, name@sha256:<64 hex> (a repository "
            "digest) or sha256:<64 hex> (an image ID); named by digest or ID, the preflight checks that every node "
            "holds exactly that image.",
            required=True,
            pattern=IMAGE_REF,
            pattern_hint="an image reference such as spark-ds41f:1030",
        ),
        "docker_run_args": Node(
            "array",
            '`docker run` options, one argv element each, such as "--ipc=host".',
            values=Node("string"),
            default=[],
        ),
        "name": Node(
            "string",
            "Container name on every node.",
            pattern=DOCKER_NAME,
            pattern_hint="a Docker container name",
            default=DEFAULT_CONTAINER_NAME,
        ),
        "entrypoint": Node(
            "array",
            "The command that starts the engine; its first word becomes --entrypoint, "
            "so an image whose ENTRYPOINT is `vllm serve` works too (seed 002 lesson 7).",
            values=Node("string", pattern=VALUE_WORD, pattern_hint=VALUE_WORD_HINT),
            min_items=1,
            default=list(DEFAULT_ENTRYPOINT),
        ),
        "model_path": Node(
            "string",
            "Model argument given to `vllm serve` (a path in the container or a hub id); "
            "defaults to the top-level model.",
            pattern=VALUE_WORD,
            pattern_hint=VALUE_WORD_HINT,
        ),
        "fork_flags": Node(
            "array",
            "Option strings the image's vLLM fork adds that upstream vLLM lacks "
            "(e.g. --max-parallel-prefills); any other unknown flag is an error.",
            values=Node("string", pattern=LONG_FLAG, pattern_hint="a long option such as --foo-bar"),
            default=[],
        ),
        "api_port": Node(
            "integer", "Port rank 0 serves the OpenAI API on.", minimum=1, maximum=65535, default=DEFAULT_API_PORT
        ),
        "master_port": Node(
            "integer",
            "Port of the head's rendezvous (--master-port).",
            minimum=1,
            maximum=65535,
            default=DEFAULT_MASTER_PORT,
        ),
        "secrets": Node(
            "map",
            "Secrets as files: a name to the absolute path of a file every node holds (root's, mode 0600 or "
            f"stricter; the preflight checks). Each is bound read-only into every rank at {_secrets.SECRETS_DIR}/"
            "<name>; hf_token also sets HF_TOKEN_PATH to it. Only paths are rendered, never a secret's value; "
            "a secret given inline (an environment variable such as HF_TOKEN, --env, --api-key) is refused.",
            values=_secret_file(),
            key_pattern=_secrets.SECRET_NAME,
        ),
        "api": Node(
            "object",
            'The served OpenAI API\'s access (docs/profile.md, "The served API"): where the head listens, its key '
            "and its TLS. The boot's wait, its smoke completion and the benchmark use the same.",
            fields={
                "bind": Node(
                    "string",
                    "Where the head's API listens (--host): management (the default: the head's ansible_host, "
                    "an address), loopback (127.0.0.1), all (every interface, a warning), or an address the "
                    "inventory gives the head (its ansible_host or dgxspark_fabric_address) or a loopback address.",
                    pattern=_api_access.BIND_PATTERN,
                    pattern_hint=_api_access.BIND_HINT,
                    examples=("management", "loopback"),
                ),
                "api_key_file": _secret_file(
                    "A file on every node (root's, 0600) holding the API key: bound read-only at "
                    f"{_secrets.SECRETS_DIR}/{_api_access.KEY_SECRET} and checked like container.secrets; the head's "
                    "container reads it into VLLM_API_KEY with a small sh wrapper and execs the engine, so the key "
                    "is in no argv, no docker inspect and no plan. Clients send Authorization: Bearer <key>."
                ),
                "tls": Node(
                    "object",
                    "TLS for the API: vLLM's --ssl-certfile and --ssl-keyfile, from files on every node bound "
                    "read-only as secrets (checked like container.secrets).",
                    fields={
                        "certfile": _secret_file(
                            "The server's certificate (PEM) on every node; it must name the address the boot "
                            "connects to (an IP subjectAltName: the bind address, 127.0.0.1 for loopback or all).",
                            required=True,
                        ),
                        "keyfile": _secret_file(
                            "The certificate's private key (PEM) on every node, root's, 0600.",
                            required=True,
                        ),
                        "ca_file": _secret_file(
                            "What the boot's clients trust (PEM, on the node they run on); default: certfile "
                            "(a self-signed certificate).",
                        ),
                    },
                ),
            },
        ),
    },
)

MODEL_CONFIG = Node(
    "object",
    "The model's own numbers, as its config.json gives them, to size the KV cache per token "
    "(_kv.kv_bytes_per_token). Every key needs a citation in sources ($.model_config.<key>).",
    fields={
        "architecture": Node(
            "string", "config.json architectures[0], for people reading the profile.", pattern=r"[A-Za-z0-9_.]+"
        ),
        "num_hidden_layers": Node("integer", "config.json num_hidden_layers.", minimum=1),
        "num_attention_heads": Node("integer", "config.json num_attention_heads.", minimum=1),
        "num_key_value_heads": Node("integer", "config.json num_key_value_heads (GQA/MQA).", minimum=1),
        "head_dim": Node("integer", "config.json head_dim.", minimum=1),
        "hidden_size": Node(
            "integer", "config.json hidden_size (head_dim = hidden_size / heads when no head_dim).", minimum=1
        ),
        "kv_lora_rank": Node("integer", "config.json kv_lora_rank: DeepSeek-style latent attention (MLA).", minimum=1),
        "qk_rope_head_dim": Node("integer", "config.json qk_rope_head_dim (MLA).", minimum=1),
        "torch_dtype": Node(
            "string",
            "config.json torch_dtype: the KV element size with --kv-cache-dtype auto.",
            enum=("bfloat16", "float16", "float32"),
        ),
        "sliding_window": Node("integer", "config.json sliding_window, for sliding_attention layers.", minimum=1),
        "layer_types": Node(
            "array",
            "config.json layer_types: full_attention or sliding_attention per layer.",
            values=Node("string", enum=("full_attention", "sliding_attention")),
        ),
        "kv_cache_bytes_per_token": Node(
            "number",
            "KV bytes one token costs on one rank, measured (vLLM's 'Available KV cache memory' over its "
            "'GPU KV cache size'), for attention the formula does not model; a shape's "
            "memory.kv_cache_bytes_per_token wins over it.",
            exclusive_minimum=0,
        ),
    },
)

PROFILE = Node(
    "object",
    "A dgxspark.cluster serving profile, schema_version 2 (the format of seed 000's serving-profile.json).",
    fields={
        "schema_version": Node("integer", "Always 2.", required=True, enum=(SCHEMA_VERSION,)),
        "promoted_baseline": Node(
            "string", "Name of the last promoted setup this profile descends from.", pattern=r"[^\x00-\x1f\x7f]*"
        ),
        "model": Node(
            "string",
            "The model's served name.",
            required=True,
            pattern=VALUE_WORD,
            pattern_hint="a name without spaces, not starting with - (vLLM would read it as an option)",
        ),
        "model_revision": Node(
            "string",
            "The weights' revision (every rank must serve the same one).",
            pattern=r"[A-Za-z0-9._/][A-Za-z0-9._/-]*",
            pattern_hint="a revision such as 1bae0e10 (letters, digits, . _ / -), not starting with - (vLLM would "
            "read it as an option)",
        ),
        "upstream": Node("string", "Where the engine comes from.", pattern=r"[^\s\x00-\x1f\x7f]+"),
        "generation_defaults": Node(
            "map", "Default sampling parameters the server applies.", values=Node("scalar"), default={}
        ),
        "default_shape": Node(
            "string",
            "The shape used when none is chosen.",
            required=True,
            pattern=SHAPE_NAME,
            pattern_hint="a shape name",
        ),
        "shapes": Node(
            "map", "The shapes this profile defines, by name.", required=True, values=SHAPE, key_pattern=SHAPE_NAME
        ),
        "model_config": MODEL_CONFIG,
        "container": CONTAINER,
        "host": HOST,
        "waivers": Node(
            "map",
            "Checks this profile knowingly fails, each with the reason; every run that plans names them on one "
            "line, and playbooks/plan.yml lists each finding with its reason. Names: "
            + ", ".join(f"{k} ({v})" for k, v in WAIVABLE_CHECKS.items())
            + ".",
            values=Node("string", pattern=r"[^\x00-\x1f\x7f]{8,}", pattern_hint="a reason of at least 8 characters"),
            key_enum=tuple(WAIVABLE_CHECKS),
        ),
        "sources": Node(
            "map",
            "Where each number comes from: JSON path (e.g. $.shapes.tp3-triangle.sizing.max_num_seqs) to a citation.",
            values=Node("string", pattern=r"[^\x00-\x1f\x7f]+"),
            key_pattern=r"\$(\.[A-Za-z0-9_-]+|\[[0-9]+\])+",
        ),
    },
)

# What an inventory may override per host (dgxspark_overrides): a shape's parts, all optional.
HOST_OVERRIDES = optional(
    Node(
        "object",
        "Per-host changes to the selected shape. Anything every rank must agree on is compared afterwards.",
        fields={
            "sizing": SIZING,
            "fabric": Node(
                "object",
                "Per-host fabric names.",
                fields={k: FABRIC.fields[k] for k in ("hca", "socket_ifname", "gid_index")},
            ),
            "environment": _env_map,
            "container": Node("object", "Per-host container changes.", fields=CONTAINER_OVERRIDE_FIELDS),
            "speculative_config": SHAPE.fields["speculative_config"],
        },
    )
)
