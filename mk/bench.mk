# Benchmarks on the simulated clusters. Included by the Makefile (`-include mk/*.mk`).
#
#   make bench-node-facts   tools/bench_node_facts.py: node_facts against ping on sim3 and sim8
#   make bench-memguard     tools/bench_memguard.py: the memory guard's CPU, memory and trip latency
#   make bench-boot         tools/bench_boot.py: boot.yml --check against ping (sim3), sim8 against sim3, a real boot's overhead

.PHONY: bench-node-facts bench-memguard bench-boot

bench-node-facts: venv ## tools/bench_node_facts.py: node_facts vs ping wall time on sim3 and sim8 (--up)
	$(VENV)/bin/python tools/bench_node_facts.py --up

bench-memguard: venv ## tools/bench_memguard.py: memory guard CPU per sample, share of a core, RSS, trip latency
	$(VENV)/bin/python tools/bench_memguard.py

bench-boot: venv ## tools/bench_boot.py: boot.yml --check vs ping on sim3, sim8 vs sim3, a real boot beyond the load (--up)
	$(VENV)/bin/python tools/bench_boot.py --up
