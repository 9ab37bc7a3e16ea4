# Benchmarks on the simulated clusters. Included by the Makefile (`-include mk/*.mk`).
#
#   make bench-node-facts   tools/bench_node_facts.py: node_facts against ping on sim3 and sim8

.PHONY: bench-node-facts

bench-node-facts: venv ## tools/bench_node_facts.py: node_facts vs ping wall time on sim3 and sim8 (--up)
	$(VENV)/bin/python tools/bench_node_facts.py --up
