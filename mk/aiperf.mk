# The reference benchmark client: NVIDIA's aiperf (PyPI), in its own venv. Included by the
# Makefile (`-include mk/*.mk`); tools/aiperf/README.md says how to use it.
#
#   make venv-aiperf    .venv-aiperf (Python 3.13) with aiperf from requirements/aiperf.in, pinned and
#                       hash-checked by requirements/constraints-aiperf-py313.txt (as the Makefile's venvs), plus
#                       the offline tokenizer .venv-aiperf/vllm-sim-tokenizer/ (tools/aiperf/make_tokenizer.py)
#   make lock-aiperf    re-resolve requirements/aiperf.in into constraints-aiperf-py313.txt (with hashes)
#   make clean-aiperf   remove .venv-aiperf

AIPERF_VENV      := .venv-aiperf
AIPERF_REQS      := requirements/aiperf.in requirements/constraints-aiperf-py313.txt
AIPERF_TOKENIZER := $(AIPERF_VENV)/vllm-sim-tokenizer/tokenizer.json
# The stamp is named after a hash of the requirement files (as the Makefile's VENV_STAMP): editing
# them rebuilds the venv, nothing else does. The Makefile defines its req_hash after including this
# file, so the hash is computed here.
AIPERF_VENV_STAMP := $(AIPERF_VENV)/.installed-$(shell cat $(AIPERF_REQS) 2>/dev/null | sha256sum | cut -c1-16)

.PHONY: venv-aiperf lock-aiperf clean-aiperf

venv-aiperf: $(AIPERF_VENV_STAMP) $(AIPERF_TOKENIZER) ## .venv-aiperf: NVIDIA aiperf (pinned) + offline tokenizer for the stand-in engine

$(AIPERF_VENV_STAMP):
	@printf '\n==> %s\n' "venv-aiperf: $(AIPERF_VENV) from requirements/aiperf.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-aiperf: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(AIPERF_VENV)
	$(PY313) -m venv $(AIPERF_VENV)
	$(AIPERF_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-aiperf-py313.txt pip >$(AIPERF_VENV)/pip-lock.txt
	$(AIPERF_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(AIPERF_VENV)/pip-lock.txt
	$(AIPERF_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/aiperf.in -c requirements/constraints-aiperf-py313.txt
	$(AIPERF_VENV)/bin/python -m pip check
	touch $@

# The tokenizer is derived from aiperf's own prompt corpus (in the venv), so it lives in the venv:
# rebuilt with it, or when the script changes.
$(AIPERF_TOKENIZER): tools/aiperf/make_tokenizer.py $(AIPERF_VENV_STAMP)
	$(AIPERF_VENV)/bin/python tools/aiperf/make_tokenizer.py $(dir $@)

lock-aiperf: ## refresh requirements/constraints-aiperf-py313.txt (full pip freeze of aiperf.in, hashed)
	@printf '\n==> %s\n' "lock-aiperf: requirements/aiperf.in -> constraints-aiperf-py313.txt"
	tools/ci/lock.sh $(PY313) requirements/aiperf.in requirements/constraints-aiperf-py313.txt .build/lock-aiperf-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-aiperf /' requirements/constraints-aiperf-py313.txt

clean-aiperf: ## remove .venv-aiperf
	rm -rf $(AIPERF_VENV)
