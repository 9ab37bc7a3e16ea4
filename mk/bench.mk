# Benchmarks on the simulated clusters. Included by the Makefile (`-include mk/*.mk`).
#
#   make bench-node-facts   tools/bench_node_facts.py: node_facts against ping on sim3 and sim8
#   make bench-memguard     tools/bench_memguard.py: the memory guard's CPU, memory and trip latency
#   make bench-boot         tools/bench_boot.py: boot.yml --check against ping (sim3), sim8 against sim3, a real boot's overhead
#   make bench-status       tools/bench_status.py: status.yml against ping on sim3 (issue 29: <= 1.5)
#   make bench-peer         tools/bench_peer.py: our boot and stop against sparkrun's launch and stop on CLUSTER (default
#                           sim3), same image and `vllm serve` arguments; ROUNDS (default 3), BENCH_PEER_ARGS for more
#   make bench-weights      tools/bench_weights.py: weights.yml against a plain copy over SSH on sim3, one target and two
#                           (under flock /tmp/sim.lock: the simulated clusters are shared); ROUNDS (default 3)
#   make venv-sparkrun      .venv-sparkrun (Python 3.13) with sparkrun 0.4.2 from PyPI (requirements/sparkrun.in),
#                           pinned and hash-checked by requirements/constraints-sparkrun-py313.txt (as the
#                           Makefile's venvs), for bench-peer only
#   make lock-sparkrun      re-resolve requirements/sparkrun.in into that lock (with hashes)
#   make clean-sparkrun     remove .venv-sparkrun

SPARKRUN_VENV       := .venv-sparkrun
SPARKRUN_REQS       := requirements/sparkrun.in requirements/constraints-sparkrun-py313.txt
SPARKRUN_VERSION    := $(shell sed -n 's/^sparkrun==//p' requirements/sparkrun.in 2>/dev/null)
# named after a hash of the requirement files, as the Makefile's VENV_STAMP
SPARKRUN_VENV_STAMP := $(SPARKRUN_VENV)/.installed-$(shell cat $(SPARKRUN_REQS) 2>/dev/null | sha256sum | cut -c1-16)
ROUNDS              ?= 3

.PHONY: bench-node-facts bench-memguard bench-boot bench-status bench-peer bench-weights venv-sparkrun lock-sparkrun clean-sparkrun

bench-node-facts: venv ## tools/bench_node_facts.py: node_facts vs ping wall time on sim3 and sim8 (--up)
	$(VENV)/bin/python tools/bench_node_facts.py --up

bench-memguard: venv ## tools/bench_memguard.py: memory guard CPU per sample, share of a core, RSS, trip latency
	$(VENV)/bin/python tools/bench_memguard.py

bench-boot: venv ## tools/bench_boot.py: boot.yml --check vs ping on sim3, sim8 vs sim3, a real boot beyond the load (--up)
	$(VENV)/bin/python tools/bench_boot.py --up

bench-status: venv ## tools/bench_status.py: status.yml vs ping on sim3, a ratio measured in one run (--up)
	$(VENV)/bin/python tools/bench_status.py --up

bench-peer: venv venv-sparkrun ## tools/bench_peer.py: boot/stop vs sparkrun run/stop on CLUSTER, same image and args
	$(VENV)/bin/python tools/bench_peer.py --cluster $(CLUSTER) --rounds $(ROUNDS) $(BENCH_PEER_ARGS)

bench-weights: venv ## tools/bench_weights.py: weights.yml vs a plain copy over SSH on sim3, one target and two at once
	flock /tmp/sim.lock $(VENV)/bin/python tools/bench_weights.py --rounds $(ROUNDS)

venv-sparkrun: $(SPARKRUN_VENV_STAMP) ## .venv-sparkrun: sparkrun (pinned) for tools/bench_peer.py

$(SPARKRUN_VENV_STAMP):
	@printf '\n==> %s\n' "venv-sparkrun: $(SPARKRUN_VENV) with sparkrun==$(SPARKRUN_VERSION) and $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-sparkrun: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13 (sparkrun needs >= 3.12)" >&2; exit 1; }
	rm -rf $(SPARKRUN_VENV)
	$(PY313) -m venv $(SPARKRUN_VENV)
	$(SPARKRUN_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-sparkrun-py313.txt pip >$(SPARKRUN_VENV)/pip-lock.txt
	$(SPARKRUN_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(SPARKRUN_VENV)/pip-lock.txt
	$(SPARKRUN_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/sparkrun.in -c requirements/constraints-sparkrun-py313.txt
	$(SPARKRUN_VENV)/bin/python -m pip check
	$(SPARKRUN_VENV)/bin/sparkrun --version
	touch $@

lock-sparkrun: ## refresh requirements/constraints-sparkrun-py313.txt (full pip freeze of sparkrun.in, hashed)
	tools/ci/lock.sh $(PY313) requirements/sparkrun.in requirements/constraints-sparkrun-py313.txt .build/lock-sparkrun-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-sparkrun /' requirements/constraints-sparkrun-py313.txt

clean-sparkrun: ## remove .venv-sparkrun
	rm -rf $(SPARKRUN_VENV)
