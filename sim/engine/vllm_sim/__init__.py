# Copyright (c) dgxspark.cluster contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""vllm-sim: the stand-in engine of the simulated DGX Spark cluster (dgxspark.cluster).

This is NOT vLLM. It parses ``vllm serve`` exactly as vLLM 0.33.0's argument parser does (from the
collection's generated option table), joins ranks over TCP as multi-node vLLM does, and serves an
OpenAI-compatible API whose tokens arrive on a schedule calibrated from the seed documents.
Python standard library only (it runs on a bare Debian bookworm python3).
"""

__version__ = "0.1.0"
EMULATED_VLLM_VERSION = "0.33.0"
BANNER = (
    f"vllm-sim {__version__}: STAND-IN ENGINE of the simulated DGX Spark cluster (dgxspark.cluster). "
    f"This is NOT vLLM: it accepts `vllm serve` as vLLM {EMULATED_VLLM_VERSION} does, joins ranks over TCP "
    "and serves an OpenAI-compatible API with timing calibrated from the seed documents; no model runs."
)
