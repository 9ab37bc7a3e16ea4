# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``vllm serve ...``: the stand-in engine's life from argument parsing to a clean SIGTERM exit."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time

from . import BANNER, EMULATED_VLLM_VERSION, __version__, calibration, nccl
from .args import TableMissing, load_table, parse_serve_args
from .cluster import Fatal, Head, SingleNode, Stopped, Watchdog, Worker
from .config import ConfigError, SimConfig
from .engine import Scheduler
from .memory import MemoryHold

SUBCOMMANDS = ("chat", "complete", "serve", "bench", "collect-env", "run-batch")
DEFAULT_MAX_MODEL_LEN = 131072  # no model config to derive it from (vLLM would read the model's)
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_WATCHDOG_SECONDS = 1800.0  # the 30 minutes of REFERENCE.md / vLLM PR #44718
DEFAULT_JOIN_TIMEOUT_SECONDS = 600.0  # torch's default store timeout
ABORT_EXIT = 134  # what a process killed by SIGABRT (c10::DistBackendError -> std::terminate) reports

# Settings every rank must share: the vLLM config groups that shape the model, cache, parallelism and
# scheduler. Frontend options (only rank 0 serves) and --node-rank/--headless are left out.
HASH_GROUPS = {
    "ModelConfig",
    "CacheConfig",
    "ParallelConfig",
    "SchedulerConfig",
    "VllmConfig",
    "LoadConfig",
    "CompilationConfig",
    "KernelConfig",
    "AttentionConfig",
    "OffloadConfig",
    "LoRAConfig",
    "MambaConfig",
    "MultiModalConfig",
    "StructuredOutputsConfig",
}
HASH_EXCLUDE = {"node_rank", "headless", "data_parallel_rank", "data_parallel_start_rank"}


def _top_usage() -> str:
    return "usage: vllm [-h] [-v] {" + ",".join(SUBCOMMANDS) + "} ..."


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_top_usage())
        print("\nvLLM CLI (stand-in: vllm-sim implements only `vllm serve`; this is not vLLM)")
        return 0 if argv else 2
    if argv[0] in ("-v", "--version"):
        print(EMULATED_VLLM_VERSION)
        print(f"vllm-sim {__version__}: stand-in engine, not vLLM", file=sys.stderr)
        return 0
    if argv[0] != "serve":
        if argv[0] in SUBCOMMANDS:
            print(f"vllm-sim: the stand-in engine implements only `vllm serve`, not `vllm {argv[0]}`", file=sys.stderr)
            return 2
        print(_top_usage(), file=sys.stderr)
        choices = ", ".join(repr(c) for c in SUBCOMMANDS)
        print(f"vllm: error: argument subparser: invalid choice: {argv[0]!r} (choose from {choices})", file=sys.stderr)
        return 2
    try:
        load_table()
    except TableMissing as exc:
        print(str(exc), file=sys.stderr)
        return 1
    ns = parse_serve_args(argv[1:])  # exits 2 on a bad command line, as vLLM does
    try:
        cfg = SimConfig.from_env()
    except ConfigError as exc:
        print(f"vllm-sim: bad environment: {exc}", file=sys.stderr)
        return 1
    return Engine(ns, cfg).run()


class _Formatter(logging.Formatter):
    def __init__(self, prefix: str):
        super().__init__("%(levelname)s %(asctime)s [%(module)s.py:%(lineno)d] %(message)s", "%m-%d %H:%M:%S")
        self.prefix = prefix

    def format(self, record):
        return self.prefix + super().format(record)


def settings_of(ns) -> dict:
    table = load_table()
    out = {"model_tag": ns.model_tag}
    for spec in table.SERVE_OPTIONS.values():
        dest = spec["dest"]
        if spec.get("group") in HASH_GROUPS and dest not in HASH_EXCLUDE and hasattr(ns, dest):
            out[dest] = getattr(ns, dest)
    return out


def settings_hash(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


class Engine:
    def __init__(self, ns, cfg: SimConfig):
        self.ns = ns
        self.cfg = cfg
        self.stop = threading.Event()
        self.memory = MemoryHold()
        self.rank = int(ns.node_rank)
        self.nnodes = int(ns.nnodes)
        self.world = int(ns.tensor_parallel_size) * int(ns.pipeline_parallel_size)
        self.serves = self.rank == 0 and not ns.headless
        self.log = logging.getLogger("vllm_sim")
        self.log.handlers[:] = []
        handler = logging.StreamHandler(sys.stdout)
        role = "APIServer" if self.serves else ("Worker" if self.rank else "Head")
        handler.setFormatter(_Formatter(f"({role} rank={self.rank} pid={os.getpid()}) "))
        self.log.addHandler(handler)
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self.api = None
        self.cluster = None
        self.scheduler = None
        self._dying = threading.Lock()

    # ------------------------------------------------------------------ failure paths
    def _fatal(self, message: str, code: int) -> int:
        print(message, file=sys.stderr, flush=True)
        self._cleanup()
        return code

    def _watchdog_fired(self, ran: float, reason: str) -> None:
        if self.stop.is_set() or not self._dying.acquire(blocking=False):
            return
        gpus_per_node = max(1, self.world // max(1, self.nnodes))
        rank = self.rank * gpus_per_node
        timeout_ms = int(self.watchdog_seconds * 1000)
        ran_ms = max(timeout_ms, int(ran * 1000))
        seq = 1 if self.scheduler is None else 1 + self.scheduler.stats.generation_tokens
        work = f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={timeout_ms})"
        stamp = time.strftime("%m%d %H:%M:%S") + f".{int((time.time() % 1) * 1e6):06d}000"

        def tag(line):
            return f"[rank{rank}]:[E{stamp} {os.getpid()} ProcessGroupNCCL.cpp:{line}]"

        lines = [
            f"{tag(632)} [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran_ms} "
            "milliseconds before timing out.",
            f"{tag(2271)} [PG ID 0 PG GUID 0(default_pg) Rank {rank}]  failure detected by watchdog at work sequence "
            f"id: {seq} PG status: last enqueued work: {seq}, last completed work: {seq - 1}",
            f"{tag(670)} Stack trace of the failed collective not found, potentially because FlightRecorder is "
            "disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.",
            f"{tag(684)} [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
            "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            f"{tag(698)} [Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
            f"exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran for {ran_ms} "
            "milliseconds before timing out.",
        ]
        notes = [f"vllm-sim: (diagnostic of the stand-in, not a vLLM message) {reason}"]
        if self.cluster is not None:
            notes += [f"vllm-sim: {m}" for m in self.cluster.mismatch]
        try:
            sys.stdout.flush()
            sys.stderr.write("\n".join(lines + notes) + "\n")
            sys.stderr.flush()
        finally:
            os._exit(ABORT_EXIT)

    # ------------------------------------------------------------------ life
    def _on_signal(self, signum, frame) -> None:
        if not self.stop.is_set():
            self.log.info("received %s, shutting down", signal.Signals(signum).name)
        self.stop.set()

    def _validate(self) -> str | None:
        ns = self.ns
        if self.nnodes < 1:
            return f"ValueError: nnodes must be at least 1, got {self.nnodes}"
        if not 0 <= self.rank < self.nnodes:
            return f"ValueError: node_rank ({self.rank}) must be in [0, nnodes) with nnodes={self.nnodes}"
        if self.world % self.nnodes:
            return (
                f"ValueError: world_size ({self.world} = tensor_parallel_size x pipeline_parallel_size) must be "
                f"divisible by nnodes ({self.nnodes})"
            )
        backend = ns.distributed_executor_backend
        if backend not in (None, "mp", "ray", "uni", "external_launcher"):
            return (
                f"pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
                f"distributed_executor_backend\n  Input should be 'ray', 'mp', 'uni' or 'external_launcher' "
                f"[input_value={backend!r}]"
            )
        if self.nnodes > 1 and backend not in (None, "mp"):
            return f"vllm-sim: only --distributed-executor-backend mp is simulated across nodes (got {backend})"
        return None

    def run(self) -> int:
        ns, cfg = self.ns, self.cfg
        self.log.info(BANNER)
        self.log.info("vLLM option table: %s", load_table().TABLE_PATH)
        given = {d: getattr(ns, d) for d in ns._given if hasattr(ns, d)}
        self.log.info("non-default args: %s", {"model_tag": ns.model_tag, **given})
        problem = self._validate()
        if problem:
            return self._fatal(problem, 1)
        self.max_model_len = ns.max_model_len if ns.max_model_len not in (None, -1) else DEFAULT_MAX_MODEL_LEN
        max_num_seqs = ns.max_num_seqs or DEFAULT_MAX_NUM_SEQS
        dist_timeout = ns.distributed_timeout_seconds
        self.watchdog_seconds = cfg.watchdog_seconds or float(dist_timeout or DEFAULT_WATCHDOG_SECONDS)
        cfg.join_timeout_seconds = cfg.join_timeout_seconds or float(dist_timeout or DEFAULT_JOIN_TIMEOUT_SECONDS)
        try:
            timing = self._timing()
        except (OSError, ValueError) as exc:
            return self._fatal(f"vllm-sim: SIM_ENGINE_CALIBRATION: {exc}", 1)
        self.log.info(
            "timing table %s (%s); time scale %g; prefill %g tok/s beyond %d prompt tokens",
            timing.name,
            timing.source,
            cfg.time_scale,
            timing.prefill_tokens_per_s,
            calibration.SHORT_PROMPT_TOKENS,
        )

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

        watchdog = Watchdog(self.watchdog_seconds, self._watchdog_fired)
        try:
            if self.serves:
                from .api import ApiServer, ServerState, server_tls

                names = list(ns.served_model_name or [ns.model_tag])
                kv_tokens = self.max_model_len * max_num_seqs
                self.scheduler = Scheduler(timing, max_num_seqs, kv_tokens)
                api_keys = [k for k in (ns.api_key or [os.environ.get("VLLM_API_KEY")]) if k]
                state = ServerState(
                    self.scheduler,
                    names,
                    ns.model_tag,
                    self.max_model_len,
                    cfg,
                    api_keys,
                    ns.override_generation_config,
                    self.log,
                    not ns.disable_uvicorn_access_log,
                    timing.name,
                )
                try:
                    tls = server_tls(ns.ssl_certfile, ns.ssl_keyfile)
                except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                    return self._fatal(f"cannot load the TLS certificate {ns.ssl_certfile}: {exc}", 1)
                try:
                    self.api = ApiServer(ns.host or "0.0.0.0", int(ns.port), state, tls)
                    self.api.bind()
                except OSError as exc:
                    return self._fatal(
                        f"OSError: [Errno {exc.errno}] {exc.strerror} (API server on {ns.host or '0.0.0.0'}:{ns.port})",
                        1,
                    )
            if self.nnodes == 1:
                self.cluster = SingleNode(ns, cfg, self.log, self.stop, watchdog)
            elif self.rank == 0:
                self.cluster = Head(ns, cfg, self.log, self.stop, watchdog)
                self.cluster.listen()
            else:
                self.cluster = Worker(ns, cfg, self.log, self.stop, watchdog)
            if self.scheduler is not None:
                self.cluster.on_lost = lambda who: self.scheduler.hang()

            self.cluster.rendezvous()
            if self.nnodes > 1:  # the NCCL communicator is created before the weights load
                problem = nccl.check()
                if problem:
                    return self._fatal(problem, 1)
            self._load()
            problem = self._kv_check()
            if problem:
                return self._fatal(problem, 1)
            settings = settings_of(ns)
            digest = settings_hash(settings)
            self.log.info("scheduler settings hash %s", digest[:16])
            self.cluster.agree(digest, settings)
            if self.scheduler is not None:
                self.scheduler.start()
            if self.api is not None:
                try:
                    self.api.activate()
                except OSError as exc:  # another process bound the port too and listened first
                    return self._fatal(
                        f"OSError: [Errno {exc.errno}] {exc.strerror} (API server on {ns.host or '0.0.0.0'}:{ns.port})",
                        1,
                    )
                threading.Thread(
                    target=self.api.serve_forever, kwargs={"poll_interval": 0.2}, name="api", daemon=True
                ).start()
                self.api.state.serving = True
                host = ns.host or "0.0.0.0"
                scheme = "https" if self.api.tls is not None else "http"
                self.log.info("Starting vLLM API server 0 on %s://%s:%d", scheme, host, int(ns.port))
                self.log.info(
                    "Available routes: /health, /ping, /version, /load, /metrics, /v1/models, "
                    "/v1/completions, /v1/chat/completions"
                )
                self.log.info("Application startup complete.")
            else:
                self.log.info("rank %d ready (headless)", self.rank)
            while not self.stop.wait(0.5):
                pass
            raise Stopped()
        except Stopped:
            self._cleanup()
            self.log.info("vllm-sim stopped cleanly (sockets closed, memory released)")
            return 0
        except Fatal as exc:
            return self._fatal(str(exc), exc.code)

    def _timing(self) -> calibration.Timing:
        cfg = self.cfg
        prefill = cfg.prefill_tokens_per_s or calibration.DEFAULT_PREFILL_TOKENS_PER_S
        if cfg.calibration_path:
            custom = calibration.load_custom(cfg.calibration_path)
            return calibration.Timing(
                "custom",
                custom["levels"],
                cfg.prefill_tokens_per_s or custom["prefill_tokens_per_s"] or prefill,
                cfg.time_scale,
                custom["source"],
            )
        name = cfg.shape
        if name == "auto":
            name = calibration.shape_for(self.world, self.max_model_len)
        table = calibration.SHAPES[name]
        return calibration.Timing(name, table["levels"], prefill, cfg.time_scale, table["source"])

    def _load(self) -> None:
        """Take SIM_ENGINE_LOAD_SECONDS, ramping the held memory up to MEMORY_MIB + LOAD_PEAK_MIB, then drop
        the peak part (a cold load's transient high-water mark)."""
        cfg = self.cfg
        steady, peak = cfg.memory_mib, cfg.load_peak_mib
        total = steady + peak
        chunk = 64.0
        pieces = []
        left = steady
        while left > 0:
            pieces.append(("steady", min(chunk, left)))
            left -= chunk
        left = peak
        while left > 0:
            pieces.append(("peak", min(chunk, left)))
            left -= chunk
        start = time.monotonic()
        span = cfg.load_seconds * 0.9
        self.log.info(
            "loading weights (simulated: %.1f s, holding %.0f MiB, %.0f MiB more during the load)",
            cfg.load_seconds,
            steady,
            peak,
        )
        for i, (name, mib) in enumerate(pieces):
            due = start + span * (i / max(1, len(pieces)))
            if self.stop.wait(max(0.0, due - time.monotonic())):
                raise Stopped()
            try:
                self.memory.grow(name, mib)
            except (OSError, ValueError, MemoryError) as exc:
                raise Fatal(f"torch.OutOfMemoryError: could not hold {total:.0f} MiB of memory: {exc}") from None
        if self.stop.wait(max(0.0, start + cfg.load_seconds - time.monotonic())):
            raise Stopped()
        self.memory.release("peak")
        self.log.info("model loaded in %.2f s; holding %.0f MiB", time.monotonic() - start, self.memory.held_mib())

    def _kv_check(self) -> str | None:
        bpt = self.cfg.kv_bytes_per_token
        kv = self.ns.kv_cache_memory_bytes
        if not bpt or not kv:
            return None
        needed = self.max_model_len * bpt
        if needed <= kv:
            return None
        gib = 1 << 30
        return (
            f"ValueError: To serve at least one request with the model's max seq len ({self.max_model_len}), "
            f"({needed / gib:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({kv / gib:.2f} GiB). Based on the available memory, the estimated maximum model length is "
            f"{int(kv // bpt)}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )

    def _cleanup(self) -> None:
        self.stop.set()
        if self.api is not None:
            try:
                if self.api.state.serving:
                    self.api.state.serving = False
                    self.api.shutdown()
            except Exception:  # noqa: BLE001 - best effort while stopping
                pass
            try:
                self.api.server_close()
            except OSError:
                pass
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.cluster is not None:
            self.cluster.close()
        self.memory.release()


if __name__ == "__main__":
    sys.exit(main())
