# AWX resources and Galaxy packaging (issue 14). Included by the Makefile (`-include mk/*.mk`); both
# checks are stages of `make test` (EXTRA_TEST_TARGETS below).
#
#   make awx-resources      regenerate awx/resources.yml from the argument specs and inventories
#                           (tools/awx/gen_resources.py; `make units` fails when it is out of date)
#   make awx-check          awx/resources.yml through awxkit's own `awx import` code, offline, against a
#                           stand-in AWX (tests/awx), in .venv-awx
#   make collection-check   build the collection, check what the tarball holds, install it into a clean
#                           collections path, run plan.yml from there, galaxy-importer and antsibull-docs
#                           lint-collection-docs (tools/packaging/check_collection.sh), in .venv-galaxy
#   make venv-awx / venv-galaxy     the two side venvs, pinned by requirements/constraints-{awx,galaxy}-py313.txt
#   make lock-awx / lock-galaxy     re-resolve requirements/{awx,galaxy}.in into those locks
#   make clean-packaging            remove .venv-awx, .venv-galaxy and .build/collection

AWX_VENV    := .venv-awx
AWX_REQS    := requirements/awx.in requirements/constraints-awx-py313.txt
GALAXY_VENV := .venv-galaxy
GALAXY_REQS := requirements/galaxy.in requirements/constraints-galaxy-py313.txt
# Stamps named after a hash of the requirement files, as the Makefile's VENV_STAMP (its req_hash is
# defined after this file is included, so the hash is computed here).
AWX_VENV_STAMP    := $(AWX_VENV)/.installed-$(shell cat $(AWX_REQS) 2>/dev/null | sha256sum | cut -c1-16)
GALAXY_VENV_STAMP := $(GALAXY_VENV)/.installed-$(shell cat $(GALAXY_REQS) 2>/dev/null | sha256sum | cut -c1-16)

EXTRA_TEST_TARGETS += awx-check collection-check

.PHONY: awx-resources awx-check collection-check venv-awx venv-galaxy lock-awx lock-galaxy clean-packaging

awx-resources: venv ## regenerate awx/resources.yml (AWX job templates, surveys from the argument specs)
	$(VENV)/bin/python tools/awx/gen_resources.py

awx-check: venv-awx ## awx/resources.yml through awxkit's `awx import` code against a stand-in AWX (offline)
	@printf '\n==> %s\n' "awx-check: awxkit import of awx/resources.yml (tests/awx, $(AWX_VENV))"
	$(AWX_VENV)/bin/python -m pytest -p no:cacheprovider -W ignore::DeprecationWarning -o pythonpath=tests/awx tests/awx

collection-check: venv venv-galaxy ## build, install to a clean path, plan.yml from there, galaxy-importer, antsibull-docs lint
	@printf '\n==> %s\n' "collection-check: the collection as Galaxy gets it (tools/packaging/check_collection.sh)"
	tools/packaging/check_collection.sh $(VENV) $(GALAXY_VENV) .build/collection

venv-awx: $(AWX_VENV_STAMP) ## .venv-awx: awxkit (pinned) for make awx-check

$(AWX_VENV_STAMP):
	@printf '\n==> %s\n' "venv-awx: $(AWX_VENV) from requirements/awx.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-awx: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(AWX_VENV)
	$(PY313) -m venv $(AWX_VENV)
	$(AWX_VENV)/bin/python -m pip install -q -c requirements/constraints-awx-py313.txt pip
	$(AWX_VENV)/bin/python -m pip install -q -r requirements/awx.in -c requirements/constraints-awx-py313.txt
	$(AWX_VENV)/bin/python -m pip check
	touch $@

venv-galaxy: $(GALAXY_VENV_STAMP) ## .venv-galaxy: galaxy-importer and antsibull-docs (pinned) for make collection-check

$(GALAXY_VENV_STAMP):
	@printf '\n==> %s\n' "venv-galaxy: $(GALAXY_VENV) from requirements/galaxy.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-galaxy: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(GALAXY_VENV)
	$(PY313) -m venv $(GALAXY_VENV)
	$(GALAXY_VENV)/bin/python -m pip install -q -c requirements/constraints-galaxy-py313.txt pip
	$(GALAXY_VENV)/bin/python -m pip install -q -r requirements/galaxy.in -c requirements/constraints-galaxy-py313.txt
	$(GALAXY_VENV)/bin/python -m pip check
	touch $@

lock-awx: ## refresh requirements/constraints-awx-py313.txt (full pip freeze of awx.in)
	tools/ci/lock.sh $(PY313) requirements/awx.in requirements/constraints-awx-py313.txt .build/lock-awx-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-awx /' requirements/constraints-awx-py313.txt

lock-galaxy: ## refresh requirements/constraints-galaxy-py313.txt (full pip freeze of galaxy.in)
	tools/ci/lock.sh $(PY313) requirements/galaxy.in requirements/constraints-galaxy-py313.txt .build/lock-galaxy-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-galaxy /' requirements/constraints-galaxy-py313.txt

clean-packaging: ## remove .venv-awx, .venv-galaxy and .build/collection
	rm -rf $(AWX_VENV) $(GALAXY_VENV) .build/collection
