# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ranks join as multi-node vLLM's do: workers connect to the head at --master-addr:--master-port.

Protocol (JSON lines over one TCP connection per worker; the head listens):

1. worker -> head ``{"type": "hello", "rank": R, "nnodes": N, ...}``; the head answers nothing until
   every rank 1..N-1 has said hello, then sends ``{"type": "joined"}`` to all (the rendezvous).
2. every rank loads (SIM_ENGINE_LOAD_SECONDS, memory held), then enters the first collective:
   worker -> head ``{"type": "loaded", "hash": H, "settings": {...}}``. The head compares every H
   with its own. All equal: head -> all ``{"type": "ready"}`` and the head serves. Any difference: no
   one is told anything (an NCCL collective with mismatched shapes just hangs), and every rank's
   watchdog, armed when it entered the collective, fires after SIM_ENGINE_WATCHDOG_SECONDS: the rank
   prints torch's ProcessGroupNCCL watchdog error and exits 134 (SIGABRT's status).
3. from the rendezvous on, both ends send ``{"type": "hb"}`` every SIM_ENGINE_HEARTBEAT_SECONDS. A peer
   whose connection closes or stays silent for SIM_ENGINE_HEARTBEAT_TIMEOUT_SECONDS is lost: the head
   stops producing tokens (the next collective would never complete) and both ends die when the
   watchdog fires, SIM_ENGINE_WATCHDOG_SECONDS after the loss.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

PROTOCOL = "vllm-sim/1"


class Fatal(Exception):
    """A start-up failure: printed as is, the process exits with ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


class Stopped(Exception):
    """SIGTERM/SIGINT arrived while waiting."""


class Conn:
    def __init__(self, sock: socket.socket, peer: str):
        self.sock = sock
        self.peer = peer
        self.buf = b""
        self.lock = threading.Lock()
        self.last_heard = time.monotonic()
        self.closed = False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, obj: dict) -> bool:
        data = (json.dumps(obj, default=str, sort_keys=True) + "\n").encode()
        try:
            with self.lock:
                self.sock.sendall(data)
            return True
        except OSError:
            return False

    def recv(self, timeout: float) -> dict | None:
        """One message, or None after ``timeout``; EOFError when the peer closed."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            except OSError as exc:
                raise EOFError(str(exc)) from None
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, _newline, self.buf = self.buf.partition(b"\n")
        self.last_heard = time.monotonic()
        try:
            msg = json.loads(line)
        except ValueError:
            raise EOFError("garbage from peer") from None
        return msg if isinstance(msg, dict) else {}

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class Watchdog:
    """torch's ProcessGroupNCCL watchdog: fires ``timeout`` after the hung collective started."""

    def __init__(self, timeout: float, fire: Callable[[float, str], None]):
        self.timeout = timeout
        self.fire = fire
        self.cond = threading.Condition()
        self.started: float | None = None
        self.reason = ""
        self.thread = threading.Thread(target=self._run, name="nccl-watchdog", daemon=True)
        self.thread.start()

    def arm(self, started: float, reason: str) -> None:
        with self.cond:
            if self.started is None or started < self.started:
                self.started = started
                self.reason = reason
            self.cond.notify_all()

    def disarm(self) -> None:
        with self.cond:
            self.started = None
            self.reason = ""
            self.cond.notify_all()

    def _run(self) -> None:
        with self.cond:
            while True:
                if self.started is None:
                    self.cond.wait()
                    continue
                left = self.started + self.timeout - time.monotonic()
                if left <= 0:
                    ran = time.monotonic() - self.started
                    reason = self.reason
                    break
                self.cond.wait(left)
        self.fire(ran, reason)


class Cluster:
    """Common part; ``SingleNode`` (nnodes 1), ``Head`` (rank 0) and ``Worker`` specialise it."""

    def __init__(self, ns, cfg, log, stop: threading.Event, watchdog: Watchdog):
        self.ns = ns
        self.cfg = cfg
        self.log = log
        self.stop = stop
        self.watchdog = watchdog
        self.nnodes = int(ns.nnodes)
        self.rank = int(ns.node_rank)
        self.addr = (ns.master_addr, int(ns.master_port))
        self.join_timeout = cfg.join_timeout_seconds
        self.on_lost: Callable[[str], None] = lambda who: None
        self.lost: str | None = None
        self.mismatch: list[str] = []
        self.cond = threading.Condition()

    def _wait(self, predicate: Callable[[], bool], deadline: float | None = None) -> bool:
        """Wait for predicate under self.cond; False at the deadline; Stopped on SIGTERM."""
        with self.cond:
            while not predicate():
                if self.stop.is_set():
                    raise Stopped()
                left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def _peer_lost(self, who: str) -> None:
        with self.cond:
            if self.lost is not None or self.stop.is_set():
                return
            self.lost = who
            self.cond.notify_all()
        self.watchdog.arm(time.monotonic(), f"{who} went away")
        self.on_lost(who)

    def rendezvous(self) -> None:
        raise NotImplementedError

    def agree(self, digest: str, settings: dict) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class SingleNode(Cluster):
    def rendezvous(self) -> None:
        return

    def agree(self, digest: str, settings: dict) -> None:
        return


class Head(Cluster):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.peers: dict[int, Conn] = {}
        self.loaded: dict[int, tuple[str, dict]] = {}
        self.phase = "joining"
        self.listener: socket.socket | None = None

    def listen(self) -> None:
        """Bind the rendezvous port at once (as torch's TCPStore server does), before anything else."""
        try:
            infos = socket.getaddrinfo(self.addr[0], self.addr[1], type=socket.SOCK_STREAM)
            family, sockaddr = infos[0][0], infos[0][4]
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(128)
        except OSError as exc:
            code = {98: "EADDRINUSE", 99: "EADDRNOTAVAIL"}.get(exc.errno or 0, "EINVAL")
            raise Fatal(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                f"address. port: {self.addr[1]}, useIpv6: false, code: -{exc.errno or 22}, name: {code}, "
                f"message: {exc.strerror or exc} (master address {self.addr[0]})"
            ) from None
        self.listener = sock
        threading.Thread(target=self._accept_loop, name="rendezvous-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        while not self.stop.is_set():
            try:
                sock, peer = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(Conn(sock, f"{peer[0]}:{peer[1]}"),), daemon=True).start()

    def _handle(self, conn: Conn) -> None:
        try:
            hello = conn.recv(30.0)
        except EOFError:
            conn.close()
            return
        if not hello or hello.get("type") != "hello":
            conn.close()
            return
        rank = hello.get("rank")
        with self.cond:
            if self.phase != "joining":
                conn.send({"type": "reject", "reason": "the process group has already formed"})
                conn.close()
                self.log.warning("rank %s (%s) tried to join a process group that has already formed", rank, conn.peer)
                return
            if not isinstance(rank, int) or rank <= 0 or rank >= self.nnodes:
                conn.close()  # a rank this group does not have: it never joins (and times out itself)
                self.log.warning(
                    "ignoring a join from %s with rank %r: this head expects ranks 1..%d",
                    conn.peer,
                    rank,
                    self.nnodes - 1,
                )
                return
            old = self.peers.get(rank)
            if old is not None:
                old.close()
            self.peers[rank] = conn
            self.log.info(
                "rank %d joined from %s (%s) [%d/%d ranks]",
                rank,
                hello.get("host", "?"),
                conn.peer,
                len(self.peers) + 1,
                self.nnodes,
            )
            self.cond.notify_all()
        self._read_loop(rank, conn)

    def _read_loop(self, rank: int, conn: Conn) -> None:
        while not self.stop.is_set():
            try:
                msg = conn.recv(min(self.cfg.heartbeat_seconds, 0.5))
            except EOFError:
                break
            if msg is None:
                with self.cond:
                    joined = self.phase != "joining"
                if joined and time.monotonic() - conn.last_heard > self.cfg.heartbeat_timeout_seconds:
                    break
                continue
            if msg.get("type") == "loaded":
                with self.cond:
                    self.loaded[rank] = (str(msg.get("hash")), msg.get("settings") or {})
                    self.cond.notify_all()
        if self.stop.is_set():
            return
        with self.cond:
            current = self.peers.get(rank) is conn
            if self.phase == "joining" and current:
                del self.peers[rank]
                self.log.warning("rank %d left before every rank had joined", rank)
                self.cond.notify_all()
                return
        if current:
            self._peer_lost(f"rank {rank}")

    def rendezvous(self) -> None:
        deadline = time.monotonic() + self.join_timeout
        started = time.monotonic()
        last_note = 0.0
        while True:
            with self.cond:
                if len(self.peers) == self.nnodes - 1:
                    self.phase = "joined"
                    peers = dict(self.peers)
                    for conn in peers.values():  # silence counts from here: before, a rank just waits
                        conn.last_heard = time.monotonic()
                    break
            if time.monotonic() >= deadline:
                with self.cond:
                    joined = len(self.peers) + 1
                raise Fatal(
                    f"torch.distributed.DistStoreError: Timed out after {int(time.monotonic() - started) + 1} seconds "
                    f"waiting for clients. {joined}/{self.nnodes} clients joined."
                )
            if time.monotonic() - last_note >= 10:
                last_note = time.monotonic()
                with self.cond:
                    self.log.info(
                        "waiting for ranks to join at %s:%d: %d/%d joined",
                        self.addr[0],
                        self.addr[1],
                        len(self.peers) + 1,
                        self.nnodes,
                    )
            self._wait(lambda: len(self.peers) == self.nnodes - 1, min(deadline, time.monotonic() + 1.0))
        for conn in peers.values():
            conn.send({"type": "joined", "nnodes": self.nnodes})
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        self.log.info("all %d ranks joined the process group", self.nnodes)

    def _heartbeat(self) -> None:
        while not self.stop.wait(self.cfg.heartbeat_seconds):
            with self.cond:
                peers = list(self.peers.values())
            for conn in peers:
                conn.send({"type": "hb"})

    def agree(self, digest: str, settings: dict) -> None:
        with self.cond:
            self.phase = "collective"
        self.watchdog.arm(time.monotonic(), "the first collective did not complete")
        self._wait(lambda: len(self.loaded) == self.nnodes - 1 and self.lost is None or self.lost is not None)
        with self.cond:
            differing = {r: s for r, (h, s) in self.loaded.items() if h != digest}
        if self.lost is None and not differing:
            with self.cond:
                peers = list(self.peers.values())
                self.phase = "serving"
            for conn in peers:
                conn.send({"type": "ready"})
            self.watchdog.disarm()
            return
        # Ranks disagree (or one is gone): nothing is said, the collective hangs until the watchdog.
        for rank, theirs in sorted(differing.items()):
            keys = sorted(set(settings) | set(theirs))
            diffs = [
                f"{k}: rank 0 = {settings.get(k)!r}, rank {rank} = {theirs.get(k)!r}"
                for k in keys
                if json.dumps(settings.get(k), default=str, sort_keys=True)
                != json.dumps(theirs.get(k), default=str, sort_keys=True)
            ]
            self.mismatch.append(f"rank {rank} disagrees with rank 0 on " + "; ".join(diffs))
        self._wait(lambda: False)  # until SIGTERM or the watchdog

    def close(self) -> None:
        if self.listener is not None:
            try:
                self.listener.close()
            except OSError:
                pass
        with self.cond:
            peers = list(self.peers.values())
        for conn in peers:
            conn.close()


class Worker(Cluster):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.conn: Conn | None = None
        self.ready = False
        self.host_ip = None

    def _connect(self) -> Conn:
        source = self.host_ip
        sock = socket.create_connection(self.addr, timeout=2.0, source_address=(source, 0) if source else None)
        return Conn(sock, f"{self.addr[0]}:{self.addr[1]}")

    def rendezvous(self) -> None:
        import os

        self.host_ip = os.environ.get("VLLM_HOST_IP") or None
        deadline = time.monotonic() + self.join_timeout
        started = time.monotonic()
        connected_once = False
        last_note = 0.0
        while True:
            if self.stop.is_set():
                raise Stopped()
            if time.monotonic() >= deadline:
                if connected_once:
                    raise Fatal(
                        f"torch.distributed.DistStoreError: Timed out after {int(time.monotonic() - started) + 1} "
                        f"seconds waiting for clients. The store at {self.addr[0]}:{self.addr[1]} never "
                        "reported every rank as joined."
                    )
                raise Fatal(
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{int(self.join_timeout * 1000)}ms while trying to connect to ({self.addr[0]}, {self.addr[1]})."
                )
            try:
                conn = self._connect()
            except OSError as exc:
                if self.host_ip and exc.errno == 99:
                    raise Fatal(
                        f"OSError: [Errno 99] Cannot assign requested address: VLLM_HOST_IP={self.host_ip} is not "
                        "an address of this host"
                    ) from None
                if time.monotonic() - last_note >= 10:
                    last_note = time.monotonic()
                    self.log.info("waiting for the head at %s:%d (%s)", self.addr[0], self.addr[1], exc.strerror or exc)
                self.stop.wait(0.25)
                continue
            connected_once = True
            conn.send(
                {
                    "type": "hello",
                    "rank": self.rank,
                    "nnodes": self.nnodes,
                    "host": socket.gethostname(),
                    "protocol": PROTOCOL,
                }
            )
            try:
                while True:
                    if self.stop.is_set():
                        conn.close()
                        raise Stopped()
                    if time.monotonic() >= deadline:
                        break
                    msg = conn.recv(0.25)
                    if msg is None:
                        continue
                    if msg.get("type") == "joined":
                        self.conn = conn
                        break
                    if msg.get("type") == "reject":
                        self.log.warning("the head refused this rank: %s", msg.get("reason"))
                        break
            except EOFError:
                pass
            if self.conn is not None:
                break
            conn.close()
            self.stop.wait(0.5)
        threading.Thread(target=self._read_loop, name="rendezvous-read", daemon=True).start()
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()
        self.log.info(
            "joined the process group at %s:%d as rank %d of %d", self.addr[0], self.addr[1], self.rank, self.nnodes
        )

    def _read_loop(self) -> None:
        conn = self.conn
        while not self.stop.is_set():
            try:
                msg = conn.recv(min(self.cfg.heartbeat_seconds, 0.5))
            except EOFError:
                break
            if msg is None:
                if time.monotonic() - conn.last_heard > self.cfg.heartbeat_timeout_seconds:
                    break
                continue
            if msg.get("type") == "ready":
                with self.cond:
                    self.ready = True
                    self.cond.notify_all()
        if not self.stop.is_set():
            self._peer_lost("the head (rank 0)")

    def _heartbeat(self) -> None:
        while not self.stop.wait(self.cfg.heartbeat_seconds):
            if self.conn is not None:
                self.conn.send({"type": "hb"})

    def agree(self, digest: str, settings: dict) -> None:
        self.conn.send({"type": "loaded", "hash": digest, "settings": settings})
        self.watchdog.arm(time.monotonic(), "the first collective did not complete")
        self._wait(lambda: self.ready)
        self.watchdog.disarm()
        if self.lost is not None:  # the head went away before it said ready
            self.watchdog.arm(time.monotonic(), f"{self.lost} went away")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
