# The simulated DGX Spark cluster on this machine's Docker engine (sim/README.md).
# Included by the Makefile (`-include sim/sim.mk`); uses its VENV when there is one.
#
#   make sim-up CLUSTER=sim3|sim4|sim8    start the cluster (or check the one running); idempotent
#   make sim-down CLUSTER=...             remove it: containers, networks, links, keys, nothing left
#   make sim-status CLUSTER=...           check a running cluster (SSH, fabric, engine image)
#   make sim-cut CLUSTER=... HOST=... PORT=...   a cable that passes nothing (sim-mend: back)
#   make sim-images                       build the node, python and engine images (cached)
#   make sim-docker                       install/start the Docker engine if it is not running
#   make sim-test                         pytest tests/sim (engine; sim3, sim4, sim8 in turn: up, checks, boots, down)
#   make sim-bench                        tools/bench_sim.py: build, start and memory figures

CLUSTER ?= sim3
SIM_ENGINE ?= 1
# stdlib-only scripts: any python3 runs them; the venv's when it is there.
SIM_PYTHON ?= $(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python3)
# the 30 slowest tests' times end the log, so that the stage's time can be read test by test
SIM_PYTEST_ARGS ?= --durations=30
# `make test` runs the simulated-cluster tests too (about a minute once the images are cached,
# a couple of minutes cold); SIM_IN_TEST=0 leaves them out.
SIM_IN_TEST ?= 1
ifeq ($(SIM_IN_TEST),1)
EXTRA_TEST_TARGETS += sim-test
endif

.PHONY: sim-docker sim-images sim-up sim-down sim-status sim-cut sim-mend sim-test sim-bench

sim-docker: ## Docker engine: install Debian's docker.io and start dockerd if needed
	@sim/cluster/ensure-docker.sh

sim-images: sim-docker ## build the simulated cluster's images offline (cached by their inputs)
	@sim/images/build.sh all >/dev/null

sim-up: sim-docker ## start the simulated cluster CLUSTER=sim3|sim4|sim8 (idempotent)
	$(SIM_PYTHON) sim/cluster/simctl.py up $(CLUSTER) $(if $(filter 0,$(SIM_ENGINE)),--no-engine)

sim-down: ## remove the simulated cluster CLUSTER and everything it made
	@if command -v docker >/dev/null && docker info >/dev/null 2>&1; then \
	    $(SIM_PYTHON) sim/cluster/simctl.py down $(CLUSTER); \
	else echo "sim-down: no Docker engine running: nothing to remove"; fi

sim-status: ## check the running simulated cluster CLUSTER
	$(SIM_PYTHON) sim/cluster/simctl.py status $(CLUSTER)

sim-cut: ## make one cable pass nothing: make sim-cut CLUSTER=sim3 HOST=sim3-worker1 PORT=enp1s0f0np0
	$(SIM_PYTHON) sim/cluster/simctl.py cut $(CLUSTER) $(HOST) $(PORT)

sim-mend: ## make that cable pass traffic again (same HOST= PORT=)
	$(SIM_PYTHON) sim/cluster/simctl.py mend $(CLUSTER) $(HOST) $(PORT)

sim-test: venv sim-docker promtool-bin ## pytest tests/sim: the stand-in engine, then sim3, sim4, sim8 in turn: up, checks, boots, down
	$(call stage,sim-test: pytest tests/sim (stand-in engine; simulated cluster on local Docker))
	$(VENV)/bin/python -m pytest -p no:cacheprovider tests/sim/engine tests/sim/cluster $(SIM_PYTEST_ARGS)

sim-bench: venv sim-docker ## tools/bench_sim.py: image build, cluster start and memory figures
	$(VENV)/bin/python tools/bench_sim.py

# molecule scenarios (extensions/molecule/, shared config.yml) run on the simulated clusters: each cluster
# is brought up once for its scenarios and taken down afterwards, whatever the result. The fabric scenario
# runs on sim3 (triangle) and on sim8 (switch); a scenario that no cluster lists fails the target, so none
# is skipped by accident.
MOLECULE_CLUSTERS ?= sim3 sim8
MOLECULE_SCENARIOS_sim3 ?= sim_smoke fabric fabric_cut kernel kernel_mismatch memguard memguard_hog vllm_container
MOLECULE_SCENARIOS_sim8 ?= fabric kernel
MOLECULE_ALL_SCENARIOS := $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard extensions/molecule/*/molecule.yml))))
ifeq ($(SIM_IN_TEST),1)
EXTRA_TEST_TARGETS += molecule
endif
.PHONY: molecule
molecule: venv sim-docker ## molecule scenarios on sim3 and sim8 (MOLECULE_CLUSTERS=, MOLECULE_SCENARIOS_simN=)
	$(call stage,molecule: $(foreach c,$(MOLECULE_CLUSTERS),$(c): $(MOLECULE_SCENARIOS_$(c));))
	@unlisted="$(filter-out $(foreach c,$(MOLECULE_CLUSTERS),$(MOLECULE_SCENARIOS_$(c))),$(MOLECULE_ALL_SCENARIOS))"; \
	if [ -n "$$unlisted" ]; then echo "molecule: scenario(s) on no cluster: $$unlisted (add them to MOLECULE_SCENARIOS_simN)"; exit 1; fi
	@rc=0; $(foreach c,$(MOLECULE_CLUSTERS),$(MAKE) --no-print-directory molecule-on CLUSTER=$(c) \
	    SCENARIOS="$(MOLECULE_SCENARIOS_$(c))" || rc=1;) exit $$rc

.PHONY: molecule-on
molecule-on: venv sim-docker # internal: CLUSTER up, molecule test -s each of SCENARIOS, CLUSTER down (always)
	@rc=0; $(MAKE) --no-print-directory sim-up CLUSTER=$(CLUSTER) || rc=1; \
	if [ $$rc = 0 ]; then for scenario in $(SCENARIOS); do \
	    echo "==> molecule: $$scenario on $(CLUSTER)"; \
	    PATH="$(CURDIR)/$(VENV)/bin:$$PATH" MOLECULE_SIM_CLUSTER=$(CLUSTER) \
	        $(VENV)/bin/molecule test -s $$scenario || { rc=1; echo "molecule: $$scenario on $(CLUSTER) FAILED"; }; \
	done; fi; \
	$(MAKE) --no-print-directory sim-down CLUSTER=$(CLUSTER); exit $$rc
