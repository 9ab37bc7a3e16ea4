# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 26, the guard: it cannot be crashed, flooded or fooled. Each test names the finding it covers.

The daemons run in threads (conftest.py) over real sockets on 127.0.0.0/8, where 127.0.0.1, .2 and .3 stand
for three nodes, with a fake Docker engine (daemon_rig.py)."""

from __future__ import annotations

import json
import math
import pathlib
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from daemon_rig import KEY, SLACK, STOP, free_ports, wait_for

from ansible_collections.dgxspark.cluster.plugins.plugin_utils.plan import memguard as memguard_plan

NOW = 1_800_000_000.0
FUZZ_SECONDS = 2.0
FUZZ_SEED = 26


def signed(memguard: ModuleType, **changes: Any) -> bytes:
    """A peer-trip from spark-a, dated NOW, with ``changes`` to its body (None removes a field), signed."""
    body: dict[str, Any] = {"type": "peer-trip", "from": "spark-a", "reason": "x", "time": NOW, "nonce": "ab" * 16}
    body.update(changes)
    body = {k: v for k, v in body.items() if v is not None}
    return (json.dumps({**body, "mac": memguard.sign(KEY, body)}) + "\n").encode()


def send_from(source: str, port: int, data: bytes, answer: bool = False) -> bytes:
    """Send ``data`` from ``source`` to the guard on 127.0.0.1:``port``; what it answered when ``answer``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(data)
        if not answer:
            return b""
        received = b""
        while not received.endswith(b"\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
        return received


# ----------------------------------------------------------------------------- bounded numbers, never raised


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"time": 10**400}, "its date is not a number"),  # the finding: OverflowError in math.isfinite
        ({"time": -(10**400)}, "its date is not a number"),
        ({"time": 1e308}, "its date is not a number"),
        ({"time": -1}, "its date is not a number"),
        ({"time": True}, "its date is not a number"),
        ({"time": "1800000000"}, "its date is not a number"),
        ({"time": [NOW]}, "its date is not a number"),
        ({"time": None}, "fields"),
        ({"from": 7}, "from is not a string"),
        ({"from": ""}, "from is not a string"),
        ({"from": "a" * 256}, "from is too long"),
        ({"reason": {"nested": [1, 2]}}, "reason is not a string"),
        ({"reason": "r" * 1001}, "reason is too long"),
        ({"nonce": 10**30}, "nonce is not a string"),
        ({"nonce": "not-hex-at-all-but-long"}, "no nonce"),
        ({"nonce": None}, "no nonce"),
        ({"extra": 1}, "fields"),
        ({"type": "peer-ack"}, "unknown type"),
        ({"type": ["peer-trip"]}, "unknown type"),
    ],
)
def test_a_signed_message_out_of_bounds_is_refused_never_raised(
    memguard: ModuleType, changes: dict[str, Any], error: str
) -> None:
    """Finding: a correctly signed message with "time": 10**400 raised OverflowError and the daemon exited
    (five such messages left the unit failed, StartLimitBurst=5). Every field is checked and bounded first."""
    with pytest.raises(ValueError, match=error):
        memguard.check_peer_message(KEY, signed(memguard, **changes), NOW)


def test_nan_and_infinity_are_refused(memguard: ModuleType) -> None:
    for value in ("NaN", "Infinity", "-Infinity"):
        raw = signed(memguard).replace(json.dumps(NOW).encode(), value.encode())
        body = json.loads(raw)
        body.pop("mac")
        raw = (json.dumps({**body, "mac": memguard.sign(KEY, body)}) + "\n").encode()
        with pytest.raises(ValueError, match="its date is not a number"):
            memguard.check_peer_message(KEY, raw, NOW)


def test_a_huge_date_does_not_end_the_daemon(
    memguard: ModuleType, node: Callable, start: Callable, engine: Callable
) -> None:
    """The finding end to end: six such messages from a planned peer's address, then a real trip still works."""
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],
    )
    docker = engine("b")
    guard = start(settings)
    for index in range(6):
        send_from("127.0.0.1", port, signed(memguard, time=10**400, nonce=f"{index:032x}"))
    assert wait_for(lambda: guard.daemon.rejections["total"] >= 6 or guard.error, SLACK) is True
    assert guard.error is None and guard.thread.is_alive()
    assert guard.decisions("peer-rejected")[0]["reason"].endswith("its date is not a number of seconds since the epoch")
    answer = send_from("127.0.0.1", port, memguard.peer_message(KEY, "spark-a", "real", time.time()), answer=True)
    assert json.loads(answer)["type"] == "peer-ack"
    assert wait_for(docker.stops, SLACK) == [STOP]


# ----------------------------------------------------------------------------- the fuzz


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value: numbers at and past every bound, strings of every size, nesting, wrong types."""
    pick = rng.randrange(12 if depth < 4 else 8)
    if pick == 0:
        return rng.choice([0, -1, 1, 2**63, -(2**63), 10 ** rng.randrange(1, 4000), -(10 ** rng.randrange(1, 4000))])
    if pick == 1:
        return rng.choice([0.0, -0.0, 1e308, -1e308, 5e-324, NOW, NOW + rng.uniform(-1e4, 1e4), rng.random()])
    if pick == 2:
        return rng.choice([True, False, None])
    if pick == 3:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _i in range(rng.randrange(0, 64)))
    if pick == 4:
        return rng.choice(["peer-trip", "peer-ack", "spark-a", "ab" * 16, "x" * rng.randrange(900, 5000), ""])
    if pick == 5:
        return f"{rng.getrandbits(128):032x}"
    if pick == 6:
        return rng.choice([float("nan"), float("inf"), -float("inf")])
    if pick == 7:
        return NOW
    if pick in (8, 9):
        return [_value(rng, depth + 1) for _i in range(rng.randrange(0, 4))]
    return {
        rng.choice(["type", "from", "reason", "time", "nonce", "mac", "k"]): _value(rng, depth + 1) for _i in range(3)
    }


def _body(rng: random.Random) -> dict[str, Any]:
    """A peer-trip whose fields are each kept, dropped or replaced by a random value; sometimes one more."""
    body: dict[str, Any] = {
        "type": "peer-trip",
        "from": "spark-a",
        "reason": "x",
        "time": NOW,
        "nonce": f"{rng.getrandbits(128):032x}",
    }
    for field in list(body):
        roll = rng.random()
        if roll < 0.25:
            body[field] = _value(rng)
        elif roll < 0.3:
            del body[field]
    if rng.random() < 0.1:
        body[str(_value(rng))[:40] if rng.random() < 0.5 else "extra"] = _value(rng)
    return {str(k): v for k, v in body.items()}


def _raw(rng: random.Random) -> bytes:
    """Bytes as a peer may send them: signed random bodies, unsigned random JSON, deep nesting, cut or
    flipped bytes of a good message, huge numbers as text."""
    kind = rng.randrange(6)
    if kind in (0, 1):
        body = _body(rng)
        try:
            mac = hmac_of(body)
        except (TypeError, ValueError, OverflowError, RecursionError):
            mac = "0" * 64
        try:
            return json.dumps({**body, "mac": mac}).encode()
        except (ValueError, OverflowError):
            return b"{}"
    if kind == 2:
        try:
            return json.dumps(_value(rng)).encode()
        except (ValueError, OverflowError):
            return b"[]"
    if kind == 3:
        depth = rng.randrange(100, 3000)
        return rng.choice([b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth])
    if kind == 4:
        good = bytearray(_MEMGUARD.peer_message(KEY, "spark-a", "x", NOW).rstrip(b"\n"))
        for _flip in range(rng.randrange(1, 4)):
            good[rng.randrange(len(good))] = rng.randrange(256)
        return bytes(good[: rng.randrange(len(good) + 1)])
    return b'{"time": ' + b"9" * rng.randrange(1, 5000) + b"}"


_MEMGUARD: Any = None


def hmac_of(body: dict[str, Any]) -> str:
    return _MEMGUARD.sign(KEY, body)


def _bounded(message: dict[str, Any]) -> bool:
    return (
        set(message) == {"type", "from", "reason", "time", "nonce"}
        and all(isinstance(message[k], str) for k in ("type", "from", "reason", "nonce"))
        and len(message["reason"]) <= 1000
        and len(message["from"]) <= 255
        and isinstance(message["time"], float)
        and math.isfinite(message["time"])
    )


@pytest.fixture
def fuzzed(memguard: ModuleType) -> Iterator[ModuleType]:
    global _MEMGUARD  # noqa: PLW0603 - the generator's helpers sign with the module under test
    _MEMGUARD = memguard
    yield memguard
    _MEMGUARD = None


def test_the_parser_fuzzed_refuses_or_takes_never_raises(fuzzed: ModuleType) -> None:
    """Random JSON, huge numbers, deep nesting, wrong types and huge strings, signed and not, for a fixed time
    (seeded: a failure names its seed and round). check_peer_message either takes a bounded message or raises
    ValueError; no other exception, which would end the daemon's loop."""
    memguard = fuzzed
    rng = random.Random(FUZZ_SEED)
    seen: dict[str, float] = {}
    rounds = taken = 0
    ends = time.monotonic() + FUZZ_SECONDS
    while time.monotonic() < ends:
        raw = _raw(rng)
        try:
            message = memguard.check_peer_message(KEY, raw, NOW, seen=seen, senders={"spark-a"})
        except memguard.ClockSkew as skew:
            assert math.isfinite(skew.skew_s), (FUZZ_SEED, rounds, raw[:200])
        except ValueError:
            pass
        except Exception as error:  # noqa: BLE001 - what the test is for
            pytest.fail(f"seed {FUZZ_SEED}, round {rounds}: {type(error).__name__}: {error} from {raw[:200]!r}")
        else:
            taken += 1
            assert _bounded(message), (FUZZ_SEED, rounds, message)
        rounds += 1
    assert rounds >= 500, f"only {rounds} rounds in {FUZZ_SECONDS} s"
    assert taken >= 1  # the generator also makes good messages: the parser is not refusing everything


def test_the_daemon_fuzzed_keeps_guarding(fuzzed: ModuleType, node: Callable) -> None:
    """The same bytes through the daemon's own handling of a peer's line (its loop's code path, without the
    sockets), for a fixed time: nothing raises, and nothing but a well-formed trip trips the guard."""
    memguard = fuzzed
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="local",  # a message taken is recorded as ignored: the fuzz does not stop a container
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],
    )
    daemon = memguard.Daemon(memguard.Config(settings), clock=lambda: NOW)
    try:
        rng = random.Random(FUZZ_SEED + 1)
        rounds = 0
        ends = time.monotonic() + FUZZ_SECONDS
        while time.monotonic() < ends:
            raw = _raw(rng)
            try:
                message = daemon._peer("127.0.0.1", raw, rounds)
                if message is not None:
                    daemon._ack(message)
            except Exception as error:  # noqa: BLE001 - what the test is for
                pytest.fail(f"seed {FUZZ_SEED + 1}, round {rounds}: {type(error).__name__}: {error} from {raw[:200]!r}")
            rounds += 1
        assert rounds >= 200 and daemon.guard.tripped is None
        assert daemon.rejections["total"] + daemon.clock_skew_total >= rounds // 2
    finally:
        _close(daemon)


# ----------------------------------------------------------------------------- slots per peer, acknowledged stop-all


def _guards(node: Callable, ports: dict[str, int], names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Guards b (127.0.0.1) and c (127.0.0.2) planned with a (127.0.0.3, no guard there: a flood's source)."""
    addresses = {"a": "127.0.0.3", "b": "127.0.0.1", "c": "127.0.0.2"}
    made = {}
    for name in names:
        made[name] = node(
            name,
            cluster_policy="stop-all",
            peer_key=KEY,
            peer_listen={"address": addresses[name], "port": ports[name]},
            peers=[
                {"host": f"spark-{other}", "address": addresses[other], "port": ports[other]}
                for other in ("a", "b", "c")
                if other != name
            ],
        )
    return made


def _flood(source: str, port: int, stop: threading.Event, held: int) -> Iterator[threading.Thread]:
    """A client at ``source`` opening connections to the guard as fast as it can and holding ``held`` open."""

    def run() -> None:
        open_ = []
        while not stop.is_set():
            try:
                sock = socket.socket()
                sock.bind((source, 0))
                sock.settimeout(1)
                sock.connect(("127.0.0.1", port))
                open_.append(sock)
            except OSError:
                time.sleep(0.001)
            while len(open_) > held:
                open_.pop(0).close()
        for sock in open_:
            sock.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield thread


def test_a_flood_from_one_peer_does_not_drop_anothers_stop_all(
    memguard: ModuleType, node: Callable, start: Callable, engine: Callable
) -> None:
    """Finding: the 16-connection cap counted every peer together; a client at one planned peer's address kept
    the slots full and 5 of 5 trips were lost, each sender reporting ok. Now each peer's address has its own
    slots: a flood from spark-a's address does not keep spark-c's trip from stopping spark-b, and spark-c's
    stop-all is acknowledged."""
    ports = dict(zip("abc", free_ports(3), strict=True))
    settings = _guards(node, ports, ("b", "c"))
    docker_b, _docker_c = engine("b"), engine("c")
    guard_b, guard_c = start(settings["b"]), start(settings["c"])
    stop = threading.Event()
    flood = next(_flood("127.0.0.3", ports["b"], stop, held=4 * memguard.PEER_SLOTS))
    try:
        assert wait_for(lambda: guard_b.daemon.rejections["total"] > 2 * memguard.PEER_SLOTS, SLACK)
        guard_c.ask({"command": "trip", "reason": "flood test"})
        assert wait_for(docker_b.stops, SLACK) == [STOP]
        [told] = wait_for(lambda: guard_c.decisions("stop-all"), memguard.STOP_ALL_DEADLINE_S + SLACK)
    finally:
        stop.set()
        flood.join(5)
    assert told["acknowledged"] == ["spark-b"]  # spark-a has no guard here: not acknowledged, and said so
    assert [m["host"] for m in told["not_acknowledged"]] == ["spark-a"] and told["ok"] is False
    flooded = [c for c in guard_b.daemon.connections.values() if c.address == "127.0.0.3"]
    assert len(flooded) <= memguard.PEER_SLOTS


def test_a_stop_all_not_acknowledged_is_retried_then_reported(
    memguard: ModuleType, node: Callable, start: Callable, engine: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding: no acknowledgement, so a sender reported ok for trips that were dropped. A peer that takes the
    message but does not acknowledge it (an old guard, a fake) is tried again with a fresh message until the
    deadline, then named in the stop-all record and in the trip kept in its file."""
    monkeypatch.setattr(memguard, "STOP_ALL_DEADLINE_S", 1.5)
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(64)
    taken: list[bytes] = []

    def read_and_say_nothing() -> None:
        mute.settimeout(0.2)
        while True:
            try:
                sock, _address = mute.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with sock:
                sock.settimeout(1)
                try:
                    taken.append(sock.recv(4096))
                except OSError:
                    pass

    thread = threading.Thread(target=read_and_say_nothing, daemon=True)
    thread.start()
    port = free_ports(1)[0]
    settings = node(
        "a",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-b", "address": "127.0.0.1", "port": mute.getsockname()[1]}],
    )
    engine("a")
    guard = start(settings)
    try:
        guard.ask({"command": "trip", "reason": "no ack test"})
        [told] = wait_for(lambda: guard.decisions("stop-all"), 1.5 + SLACK)
    finally:
        mute.close()
        thread.join(5)
    assert told["ok"] is False and told["acknowledged"] == []
    [missing] = told["not_acknowledged"]
    assert missing["host"] == "spark-b" and missing["tries"] >= 2 and missing["error"].startswith("no acknowledgement")
    assert told["reason"].startswith("not acknowledged (deadline): spark-b (no acknowledgement")
    nonces = {json.loads(line)["nonce"] for line in taken if line}
    assert len(nonces) >= 2  # each try a fresh message: a peer that took the last one would refuse a replay
    kept = json.loads(pathlib.Path(settings["trip_path"]).read_text(encoding="utf-8"))
    assert kept["stop_all"]["ok"] is False and kept["stop_all"]["not_acknowledged"][0]["host"] == "spark-b"


def test_an_acknowledgement_is_bound_to_its_message(memguard: ModuleType) -> None:
    ack = memguard.peer_ack(KEY, "spark-b", "spark-a", "ab" * 16, NOW, "stopping")
    assert memguard.check_peer_ack(KEY, ack, "spark-b", "spark-a", "ab" * 16)["outcome"] == "stopping"
    for host, to, nonce in (
        ("spark-c", "spark-a", "ab" * 16),
        ("spark-b", "spark-c", "ab" * 16),
        ("spark-b", "spark-a", "cd" * 16),
    ):
        with pytest.raises(ValueError, match="another"):
            memguard.check_peer_ack(KEY, ack, host, to, nonce)
    with pytest.raises(ValueError, match="bad signature"):
        memguard.check_peer_ack("another-key-of-enough-characters", ack, "spark-b", "spark-a", "ab" * 16)


# ----------------------------------------------------------------------------- stale and skewed messages


def test_a_stale_message_replayed_is_counted_once(
    memguard: ModuleType, node: Callable, start: Callable, engine: Callable
) -> None:
    """Finding: a signed message older than 120 s was handled before the nonce and sender checks: replayed 50
    times it wrote 50 peer-clock-skew records. Now its nonce is kept: one clock skew, 49 replays (rate-limited)."""
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],
    )
    docker = engine("b")
    guard = start(settings)
    stale = memguard.peer_message(KEY, "spark-a", "old", time.time() - 300)
    for _index in range(50):
        send_from("127.0.0.1", port, stale)
    assert wait_for(lambda: guard.daemon.rejections["total"] == 49, SLACK)
    assert len(guard.decisions("peer-clock-skew")) == 1 and guard.daemon.clock_skew_total == 1
    assert len(guard.decisions("peer-rejected")) == memguard.REJECTIONS_BURST
    assert all("replayed" in d["reason"] for d in guard.decisions("peer-rejected"))
    assert docker.stops() == []


def test_skewed_messages_are_rate_limited(memguard: ModuleType, node: Callable, start: Callable) -> None:
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],
    )
    guard = start(settings)
    for _index in range(30):  # 30 different messages, each dated 300 s back
        send_from("127.0.0.1", port, memguard.peer_message(KEY, "spark-a", "old", time.time() - 300))
    assert wait_for(lambda: guard.daemon.clock_skew_total == 30, SLACK)
    assert len(guard.decisions("peer-clock-skew")) == memguard.REJECTIONS_BURST
    state = wait_for(lambda: guard.state()["peers"]["clock_skew_total"] == 30 and guard.state(), SLACK)
    assert state["peers"]["clock_skew"]["total"] == 30 and state["health"]["ok"] is False


def test_a_stale_message_signed_as_another_host_is_no_clock_skew(
    memguard: ModuleType, node: Callable, start: Callable
) -> None:
    """Finding: the stale message recorded a sender the address check would have refused. The sender is checked
    first: a message signed as spark-c from spark-a's address is refused as such, and sets no clock skew."""
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.1", "port": peer_port}],
    )
    guard = start(settings)
    send_from("127.0.0.1", port, memguard.peer_message(KEY, "spark-c", "old", time.time() - 300))
    [rejected] = wait_for(lambda: guard.decisions("peer-rejected"), SLACK)
    assert "signed as 'spark-c', but sent from the address of ['spark-a']" in rejected["reason"]
    assert guard.decisions("peer-clock-skew") == [] and guard.daemon.clock_skew is None
    assert guard.ask({"command": "status"})["state"]["health"]["ok"] is True


def test_a_stale_message_from_an_address_not_planned_is_not_counted(
    memguard: ModuleType, node: Callable, start: Callable
) -> None:
    port, peer_port = free_ports(2)
    settings = node(
        "b",
        cluster_policy="stop-all",
        peer_key=KEY,
        peer_listen={"address": "127.0.0.1", "port": port},
        peers=[{"host": "spark-a", "address": "127.0.0.2", "port": peer_port}],
    )
    guard = start(settings)
    send_from("127.0.0.3", port, memguard.peer_message(KEY, "spark-a", "old", time.time() - 300))
    [rejected] = wait_for(lambda: guard.decisions("peer-rejected"), SLACK)
    assert rejected["reason"] == "from 127.0.0.3: not a planned peer's address"
    assert guard.daemon.clock_skew_total == 0 and guard.daemon.clock_skew is None


# ----------------------------------------------------------------------------- wildcards

WILDCARDS = [
    "",
    " ",
    "*",
    "[*]",
    "0.0.0.0",
    " 0.0.0.0 ",
    "::",
    "[::]",
    "::0",
    "0::",
    "0:0:0:0:0:0:0:0",
    "[0:0::0]",
    "::ffff:0.0.0.0",
    "[::ffff:0.0.0.0]",
    "::ffff:0:0",
    "::FFFF:0000:0000",
    "::0.0.0.0",
    "::%eth0",
    "0",
    "0.0",
    "0.0.0",
    "00.00.00.00",
    "0x0",
    "0x00000000",
    "000",
]
NOT_WILDCARDS = [
    "127.0.0.1",
    "10.0.0.11",
    "::1",
    "::ffff:10.0.0.11",
    "fe80::1%eth0",
    "spark-a",
    "0.0.0.1",
    "::ffff:0.0.0.1",
]


@pytest.mark.parametrize("address", WILDCARDS)
def test_every_spelling_of_a_wildcard_is_refused(memguard: ModuleType, settings: Callable, address: str) -> None:
    """Finding: ``::ffff:0.0.0.0`` passed both wildcard checks (the guard's and the plan's) and listened on
    every IPv4 address. Both normalize the address (IPv4-mapped included) and refuse every spelling."""
    with pytest.raises(ValueError, match="peer_listen.address: .*never a wildcard"):
        memguard.Config(settings(peer_key=KEY, peer_listen={"address": address, "port": 7391}))
    assert memguard_plan._is_wildcard(address) is True


@pytest.mark.parametrize("address", NOT_WILDCARDS)
def test_an_address_is_not_a_wildcard(memguard: ModuleType, address: str) -> None:
    assert memguard._is_wildcard(address) is False
    assert memguard_plan._is_wildcard(address) is False


def test_a_name_that_resolves_to_a_wildcard_is_not_bound(
    memguard: ModuleType, node: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name passes the configuration's check; what it resolves to is checked again before the bind."""
    monkeypatch.setattr(memguard, "resolve", lambda address, port=0: [(socket.AF_INET6, "::ffff:0.0.0.0")])
    settings = node(
        "a",
        peer_key=KEY,
        cluster_policy="stop-all",
        peer_listen={"address": "spark-a.example", "port": free_ports(1)[0]},
        peers=[{"host": "spark-b", "address": "127.0.0.2", "port": 1}],
    )
    daemon = memguard.Daemon(memguard.Config(settings))
    try:
        assert daemon.peer_server is None and daemon.listen_state["listening"] is False
        assert "is a wildcard: refused" in daemon.listen_state["error"]
    finally:
        _close(daemon)


def _close(daemon: Any) -> None:
    daemon.selector.close()
    daemon.control.close()
    if daemon.peer_server is not None:
        daemon.peer_server.close()
    daemon._close_log()
