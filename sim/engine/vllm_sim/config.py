# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's own settings: environment variables, all prefixed SIM_ENGINE_ (see README.md).

They are deliberately not VLLM_* names: the collection compares every VLLM_* variable across ranks,
and a simulation knob (memory held, load time) may differ per host on purpose.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


class ConfigError(ValueError):
    pass


def _float(env, name: str, default: float | None, minimum: float = 0.0, allow_zero: bool = True) -> float | None:
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number") from None
    if value < minimum or (not allow_zero and value == 0):
        raise ConfigError(f"{name}={raw!r}: expected a number {'>' if not allow_zero else '>='} {minimum}")
    return value


def _bool(env, name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"{name}={raw!r}: expected 0 or 1")


SHAPE_NAMES = ("auto", "tp3", "tp4", "tp8-300k", "tp8-1m")


@dataclass
class SimConfig:
    serve_args_path: str | None = None
    shape: str = "auto"
    calibration_path: str | None = None
    time_scale: float = 1.0
    prefill_tokens_per_s: float | None = None
    load_seconds: float = 5.0
    memory_mib: float = 0.0
    load_peak_mib: float = 0.0
    watchdog_seconds: float | None = None
    join_timeout_seconds: float | None = None
    heartbeat_seconds: float = 1.0
    heartbeat_timeout_seconds: float = 10.0
    filler_tokens: int = 256
    garble: bool = False
    kv_bytes_per_token: float | None = None

    @classmethod
    def from_env(cls, env=None) -> SimConfig:
        env = os.environ if env is None else env
        shape = env.get("SIM_ENGINE_SHAPE", "").strip() or "auto"
        if shape not in SHAPE_NAMES:
            raise ConfigError(f"SIM_ENGINE_SHAPE={shape!r}: expected one of {', '.join(SHAPE_NAMES)}")
        filler = _float(env, "SIM_ENGINE_FILLER_TOKENS", 256, minimum=1)
        return cls(
            serve_args_path=env.get("SIM_ENGINE_SERVE_ARGS") or None,
            shape=shape,
            calibration_path=env.get("SIM_ENGINE_CALIBRATION") or None,
            time_scale=_float(env, "SIM_ENGINE_TIME_SCALE", 1.0, allow_zero=False),
            prefill_tokens_per_s=_float(env, "SIM_ENGINE_PREFILL_TOKENS_PER_S", None, allow_zero=False),
            load_seconds=_float(env, "SIM_ENGINE_LOAD_SECONDS", 5.0),
            memory_mib=_float(env, "SIM_ENGINE_MEMORY_MIB", 0.0),
            load_peak_mib=_float(env, "SIM_ENGINE_LOAD_PEAK_MIB", 0.0),
            watchdog_seconds=_float(env, "SIM_ENGINE_WATCHDOG_SECONDS", None, allow_zero=False),
            join_timeout_seconds=_float(env, "SIM_ENGINE_JOIN_TIMEOUT_SECONDS", None, allow_zero=False),
            heartbeat_seconds=_float(env, "SIM_ENGINE_HEARTBEAT_SECONDS", 1.0, allow_zero=False),
            heartbeat_timeout_seconds=_float(env, "SIM_ENGINE_HEARTBEAT_TIMEOUT_SECONDS", 10.0, allow_zero=False),
            filler_tokens=int(filler),
            garble=_bool(env, "SIM_ENGINE_GARBLE"),
            kv_bytes_per_token=_float(env, "SIM_ENGINE_KV_BYTES_PER_TOKEN", None, allow_zero=False),
        )
