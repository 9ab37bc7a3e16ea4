# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scheduler: max_num_seqs, a FIFO waiting queue, and token times from the calibration table.

Concurrency ``c`` is the number of running requests (admitted: prefilling or decoding), which is
what ``vllm:num_requests_running`` shows; the rest wait. Each running request advances towards its
next event at a rate set by the current ``c``: the first token after ``TTFT(c) + prefill_extra``, every
further token ``ITL(c)`` after the previous one. When ``c`` changes, the remaining time to each
request's next event is rescaled to the new rate (a fluid model, so a burst of 4 requests that arrive
a few milliseconds apart all see c = 4). Event times are absolute deadlines on the monotonic clock:
the next deadline is computed from the previous *deadline*, never from the time the thread woke, so
scheduling jitter does not accumulate (a late wake-up emits the due tokens at once and catches up).
"""

from __future__ import annotations

import collections
import itertools
import queue
import threading
import time

from .calibration import Timing

_ids = itertools.count(1)


class Request:
    __slots__ = (
        "id",
        "prompt_tokens",
        "tokens",
        "finish_reason",
        "prefill_extra",
        "arrival",
        "events",
        "deadline",
        "emitted",
        "state",
        "first_token_at",
        "last_token_at",
        "admitted_at",
    )

    def __init__(self, prompt_tokens: int, tokens: list[str], finish_reason: str, prefill_extra: float):
        self.id = next(_ids)
        self.prompt_tokens = prompt_tokens
        self.tokens = tokens
        self.finish_reason = finish_reason
        self.prefill_extra = prefill_extra
        self.arrival = time.monotonic()
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.deadline: float | None = None
        self.emitted = 0
        self.state = "waiting"
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.admitted_at: float | None = None


# Prometheus histogram buckets (seconds), vLLM's for TTFT / ITL / e2e latency.
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, b in enumerate(self.buckets):
            if value <= b:
                self.counts[i] += 1


class Stats:
    def __init__(self):
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = collections.Counter()
        self.aborted = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)


class Scheduler:
    def __init__(self, timing: Timing, max_num_seqs: int, kv_capacity_tokens: int):
        self.timing = timing
        self.max_num_seqs = max(1, max_num_seqs)
        self.kv_capacity_tokens = max(1, kv_capacity_tokens)
        self.cond = threading.Condition()
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.hung = False
        self.stopped = False
        self.stats = Stats()
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            for r in list(self.running) + list(self.waiting):
                r.events.put(("abort", None))
            self.running.clear()
            self.waiting.clear()
            self.cond.notify_all()

    def hang(self) -> None:
        """A peer rank is gone: the next collective never completes, no token is produced any more."""
        with self.cond:
            self.hung = True
            self.cond.notify_all()

    # ------------------------------------------------------------------ requests
    def submit(self, req: Request) -> None:
        with self.cond:
            now = time.monotonic()
            if not self.hung:
                self._advance(now)
            self.waiting.append(req)
            self._admit(now)
            self.cond.notify_all()

    def abort(self, req: Request) -> None:
        with self.cond:
            now = time.monotonic()
            if not self.hung:
                self._advance(now)
            if req.state == "waiting" and req in self.waiting:
                self.waiting.remove(req)
                self.stats.aborted += 1
            elif req.state == "running" and req in self.running:
                self._remove(req, now)
                self.stats.aborted += 1
            req.state = "aborted"
            self.cond.notify_all()

    def counts(self) -> tuple[int, int]:
        with self.cond:
            return len(self.running), len(self.waiting)

    def kv_usage(self) -> float:
        with self.cond:
            used = sum(r.prompt_tokens + r.emitted for r in self.running)
        return min(1.0, used / self.kv_capacity_tokens)

    # ------------------------------------------------------------------ the model
    def _period(self, req: Request, c: int) -> float:
        if req.emitted == 0:
            return self.timing.ttft(c) + req.prefill_extra
        return self.timing.itl(c)

    def _rescale(self, now: float, c_old: int, c_new: int) -> None:
        if c_old == c_new or c_old == 0:
            return
        for r in self.running:
            if r.deadline is None:
                continue
            remaining = r.deadline - now
            if remaining > 0:
                r.deadline = now + remaining * self._period(r, c_new) / self._period(r, c_old)

    def _admit(self, now: float) -> None:
        while self.waiting and len(self.running) < self.max_num_seqs:
            r = self.waiting.popleft()
            c_old = len(self.running)
            self._rescale(now, c_old, c_old + 1)
            self.running.append(r)
            r.state = "running"
            r.admitted_at = now
            r.deadline = now + self._period(r, c_old + 1)
            self.stats.prompt_tokens += r.prompt_tokens

    def _remove(self, r: Request, now: float) -> None:
        c_old = len(self.running)
        self.running.remove(r)
        r.deadline = None
        self._rescale(now, c_old, c_old - 1)
        self._admit(now)

    def _advance(self, now: float) -> None:
        """Emit every token due by ``now``, in deadline order, each at its own deadline."""
        while self.running:
            r = min(self.running, key=lambda x: x.deadline)
            t = r.deadline
            if t > now:
                return
            tok = r.tokens[r.emitted]
            r.emitted += 1
            self.stats.generation_tokens += 1
            if r.first_token_at is None:
                r.first_token_at = t
                self.stats.ttft.observe(t - r.arrival)
            else:
                self.stats.itl.observe(t - r.last_token_at)
            r.last_token_at = t
            r.events.put(("token", tok))
            if r.emitted >= len(r.tokens):
                r.state = "done"
                self.stats.success[r.finish_reason] += 1
                self.stats.e2e.observe(t - r.arrival)
                r.events.put(("end", r.finish_reason))
                self._remove(r, t)
            else:
                r.deadline = t + self._period(r, len(self.running))

    def _loop(self) -> None:
        with self.cond:
            while not self.stopped:
                now = time.monotonic()
                timeout = 1.0
                if not self.hung:
                    self._advance(now)
                    if self.running:
                        nxt = min(r.deadline for r in self.running)
                        timeout = max(0.0, nxt - time.monotonic())
                self.cond.wait(timeout)
