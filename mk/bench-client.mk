# The benchmark client's own benchmark. Included by the Makefile (`-include mk/*.mk`).
#
#   make bench-fidelity   tools/bench_fidelity.py: the client's TTFT and TPOT against known timing
#                         (stand-in engine on loopback, concurrency 1-64), its CPU and event-loop lag,
#                         and beside NVIDIA aiperf when .venv-aiperf exists (make venv-aiperf)

.PHONY: bench-fidelity

BENCH_FIDELITY_ARGS ?=

bench-fidelity: venv ## tools/bench_fidelity.py: bench client vs known timing (c=1..64) and vs aiperf
	$(VENV)/bin/python tools/bench_fidelity.py $(BENCH_FIDELITY_ARGS)
