# Prometheus rules and Grafana dashboard (issue 29; docs/monitoring.md). Included by the Makefile
# (`-include mk/*.mk`); prometheus-check is a stage of `make test` (EXTRA_TEST_TARGETS below).
#
#   make prometheus-check   promtool check rules (the collection's rules and sim3's thresholds, which
#                           playbooks/prometheus_targets.yml writes) and promtool test rules
#                           (extras/prometheus/tests/dgxspark.test.yml: every alert fires on one series and not on
#                           another), and promtool check metrics on the guard's textfile (the unit test that the
#                           units stage skips when promtool is not yet installed). promtool comes from Debian's
#                           prometheus package, installed when it is missing (root only), with its service kept
#                           from starting (policy-rc.d for the install). The
#                           dashboard's metric names are checked by `make units` (tests/unit/test_prometheus.py).

PROMTOOL ?= promtool
PROMETHEUS_RULES := extras/prometheus/rules/dgxspark.rules.yml extras/prometheus/tests/sim3.thresholds.yml

EXTRA_TEST_TARGETS += prometheus-check

.PHONY: prometheus-check promtool-bin

promtool-bin:
	@if ! command -v $(PROMTOOL) >/dev/null; then \
	    echo "installing promtool (Debian package prometheus; its service is not started)"; \
	    [[ $$(id -u) == 0 ]] || { echo "promtool is missing and this is not root: apt-get install prometheus" >&2; exit 1; }; \
	    policy=/usr/sbin/policy-rc.d; made=; \
	    if [[ ! -e $$policy ]]; then printf '#!/bin/sh\nexit 101\n' >$$policy && chmod 0755 $$policy && made=1; fi; \
	    if DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	       DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	    then rc=0; else rc=$$?; fi; \
	    if [[ -n $$made ]]; then rm -f $$policy; fi; \
	    [[ $$rc == 0 ]] || exit $$rc; fi
	@$(PROMTOOL) --version 2>&1 | head -1

prometheus-check: promtool-bin venv ## promtool check rules + promtool test rules (extras/prometheus)
	$(PROMTOOL) check rules $(PROMETHEUS_RULES)
	$(PROMTOOL) check config --syntax-only extras/prometheus/prometheus.yml
	cd extras/prometheus/tests && $(PROMTOOL) test rules dgxspark.test.yml
	DGXSPARK_PROMTOOL="$$(command -v $(PROMTOOL))" $(VENV)/bin/python -m pytest -q -p no:cacheprovider \
	    tests/unit/memguard/test_textfile.py -k promtool
