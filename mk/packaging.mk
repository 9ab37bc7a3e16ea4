# AWX resources, Galaxy packaging and the execution environment (issue 14). Included by the Makefile
# (`-include mk/*.mk`); the three checks are stages of `make test` (EXTRA_TEST_TARGETS below); ee-check builds
# the EE's image first (cached).
#
#   make awx-resources      regenerate awx/resources.yml from the argument specs and inventories
#                           (tools/awx/gen_resources.py; `make units` fails when it is out of date)
#   make awx-check          awx/resources.yml through awxkit's own `awx import` code, offline, against a
#                           stand-in AWX (tests/awx), in .venv-awx
#   make awx-workflows      the workflows of awx/resources.yml node by node as AWX runs them, ansible-runner in the
#                           EE, on sim3 and sim4 (tools/awx/run_workflow.py; part of make sim-test too; starts and
#                           removes the clusters: run it alone)
#   make collection-check   build the collection, check what the tarball holds, install it into a clean
#                           collections path, run plan.yml from there, galaxy-importer and antsibull-docs
#                           lint-collection-docs with the galaxy venv's ansible-core and .venv's, the newest supported
#                           (tools/packaging/check_collection.sh), in .venv-galaxy
#   make ee-context         the execution environment's build context in .build/ee: the collection built, the
#                           collections it depends on staged, `ansible-builder create` (no image is built;
#                           tools/packaging/ee_context.py), in .venv-builder
#   make ee-image           ee-context, then the EE's image, offline (tools/packaging/ee_image.py): the base
#                           dgxspark-ee/base:<hash> from Debian trixie packages (sim/images/build.sh ee-base), the
#                           wheels downloaded on this machine, `docker build`: dgxspark-ee/ee:<hash> and :latest,
#                           each built only when its inputs changed (seconds when nothing did)
#   make ee-check           ee-image, then tests/ee: the Containerfile starts from the local base image only,
#                           the collections install offline as the EE's galaxy stage installs them, the Python
#                           requirements are the pinned ones (requirements/constraints-ee-py313.txt); the image
#                           holds them, runs the templates' playbooks' syntax checks and an ansible-runner job
#   make venv-awx / venv-galaxy / venv-builder      the side venvs, pinned and hash-checked by
#                           requirements/constraints-{awx,galaxy,builder}-py313.txt (as the Makefile's venvs)
#   make lock-awx / lock-galaxy / lock-builder      re-resolve requirements/{awx,galaxy,builder}.in into those locks
#                           (with hashes; `make lock-hashes` re-hashes them without resolving)
#   make lock-ee            re-resolve requirements/ee.in into constraints-ee-py313.txt (the EE's Python packages)
#   make clean-packaging    remove the side venvs, .build/collection and the EE's context

AWX_VENV    := .venv-awx
AWX_REQS    := requirements/awx.in requirements/constraints-awx-py313.txt
GALAXY_VENV := .venv-galaxy
GALAXY_REQS := requirements/galaxy.in requirements/constraints-galaxy-py313.txt
BUILDER_VENV := .venv-builder
BUILDER_REQS := requirements/builder.in requirements/constraints-builder-py313.txt
EE_STAGE     := .build/ee-collections
EE_CONTEXT   := .build/ee
# the EE's wheels, build log and current.env (EE_IMAGE=dgxspark-ee/ee:<hash>)
EE_CACHE     := .cache/ee
# Stamps named after a hash of the requirement files, as the Makefile's VENV_STAMP (its req_hash is
# defined after this file is included, so the hash is computed here).
AWX_VENV_STAMP    := $(AWX_VENV)/.installed-$(shell cat $(AWX_REQS) 2>/dev/null | sha256sum | cut -c1-16)
GALAXY_VENV_STAMP := $(GALAXY_VENV)/.installed-$(shell cat $(GALAXY_REQS) 2>/dev/null | sha256sum | cut -c1-16)
BUILDER_VENV_STAMP := $(BUILDER_VENV)/.installed-$(shell cat $(BUILDER_REQS) 2>/dev/null | sha256sum | cut -c1-16)

EXTRA_TEST_TARGETS += awx-check collection-check ee-check

.PHONY: awx-resources awx-check awx-workflows collection-check ee-context ee-image ee-check venv-awx venv-galaxy venv-builder lock-awx \
        lock-galaxy lock-builder lock-ee clean-packaging

awx-resources: venv ## regenerate awx/resources.yml (AWX job templates, surveys from the argument specs)
	$(VENV)/bin/python tools/awx/gen_resources.py

awx-check: venv-awx ## awx/resources.yml through awxkit's `awx import` code against a stand-in AWX (offline)
	@printf '\n==> %s\n' "awx-check: awxkit import of awx/resources.yml (tests/awx, $(AWX_VENV))"
	$(AWX_VENV)/bin/python -m pytest -p no:cacheprovider -W ignore::DeprecationWarning -o pythonpath=tests/awx tests/awx

awx-workflows: venv ## both workflows of awx/resources.yml as AWX runs them, on sim3 and sim4 (tools/awx/run_workflow.py)
	@printf '\n==> %s\n' "awx-workflows: the workflows through ansible-runner in the EE on sim3 and sim4 (tests/sim/cluster/test_awx_workflows.py)"
	$(VENV)/bin/python -m pytest -p no:cacheprovider tests/sim/cluster/test_awx_workflows.py

collection-check: venv venv-galaxy ## build, install to a clean path, plan.yml from there, galaxy-importer, antsibull-docs lint
	@printf '\n==> %s\n' "collection-check: the collection as Galaxy gets it (tools/packaging/check_collection.sh)"
	tools/packaging/check_collection.sh $(VENV) $(GALAXY_VENV) .build/collection

ee-context: venv venv-builder ## the execution environment's build context in .build/ee (ansible-builder create; no image)
	@printf '\n==> %s\n' "ee-context: execution-environment.yml -> $(EE_CONTEXT) (tools/packaging/ee_context.py)"
	$(VENV)/bin/python tools/packaging/ee_context.py --venv $(VENV) --builder-venv $(BUILDER_VENV) --context $(EE_CONTEXT)

ee-image: ee-context ## the EE's image dgxspark-ee/ee:<hash> (and :latest), built offline, cached by its inputs
	@printf '\n==> %s\n' "ee-image: the execution environment's image, offline (tools/packaging/ee_image.py)"
	$(VENV)/bin/python tools/packaging/ee_image.py --context $(EE_CONTEXT) --pip-python $(BUILDER_VENV)/bin/python --cache $(EE_CACHE)

ee-check: ee-image ## .build/ee and the EE's image: local base only, offline, pinned; the image runs the templates (tests/ee)
	@printf '\n==> %s\n' "ee-check: the execution environment's build context and image (tests/ee, $(BUILDER_VENV))"
	EE_CHECK_VENV=$(VENV) EE_CHECK_CONTEXT=$(EE_CONTEXT) EE_IMAGE=$$(sed -n 's/^EE_IMAGE=//p' $(EE_CACHE)/current.env) \
	    $(BUILDER_VENV)/bin/python -m pytest -p no:cacheprovider -o pythonpath= tests/ee

venv-awx: $(AWX_VENV_STAMP) ## .venv-awx: awxkit (pinned) for make awx-check

$(AWX_VENV_STAMP):
	@printf '\n==> %s\n' "venv-awx: $(AWX_VENV) from requirements/awx.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-awx: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(AWX_VENV)
	$(PY313) -m venv $(AWX_VENV)
	$(AWX_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-awx-py313.txt pip >$(AWX_VENV)/pip-lock.txt
	$(AWX_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(AWX_VENV)/pip-lock.txt
	$(AWX_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/awx.in -c requirements/constraints-awx-py313.txt
	$(AWX_VENV)/bin/python -m pip check
	touch $@

venv-galaxy: $(GALAXY_VENV_STAMP) ## .venv-galaxy: galaxy-importer and antsibull-docs (pinned) for make collection-check

$(GALAXY_VENV_STAMP):
	@printf '\n==> %s\n' "venv-galaxy: $(GALAXY_VENV) from requirements/galaxy.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-galaxy: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(GALAXY_VENV)
	$(PY313) -m venv $(GALAXY_VENV)
	$(GALAXY_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-galaxy-py313.txt pip >$(GALAXY_VENV)/pip-lock.txt
	$(GALAXY_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(GALAXY_VENV)/pip-lock.txt
	$(GALAXY_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/galaxy.in -c requirements/constraints-galaxy-py313.txt
	$(GALAXY_VENV)/bin/python -m pip check
	touch $@

venv-builder: $(BUILDER_VENV_STAMP) ## .venv-builder: ansible-builder (pinned) for make ee-check

$(BUILDER_VENV_STAMP):
	@printf '\n==> %s\n' "venv-builder: $(BUILDER_VENV) from requirements/builder.in with $(PY313)"
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv-builder: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(BUILDER_VENV)
	$(PY313) -m venv $(BUILDER_VENV)
	$(BUILDER_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-builder-py313.txt pip >$(BUILDER_VENV)/pip-lock.txt
	$(BUILDER_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(BUILDER_VENV)/pip-lock.txt
	$(BUILDER_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/builder.in -c requirements/constraints-builder-py313.txt
	$(BUILDER_VENV)/bin/python -m pip check
	touch $@

lock-awx: ## refresh requirements/constraints-awx-py313.txt (full pip freeze of awx.in, hashed)
	tools/ci/lock.sh $(PY313) requirements/awx.in requirements/constraints-awx-py313.txt .build/lock-awx-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-awx /' requirements/constraints-awx-py313.txt

lock-galaxy: ## refresh requirements/constraints-galaxy-py313.txt (full pip freeze of galaxy.in, hashed)
	tools/ci/lock.sh $(PY313) requirements/galaxy.in requirements/constraints-galaxy-py313.txt .build/lock-galaxy-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-galaxy /' requirements/constraints-galaxy-py313.txt

lock-builder: ## refresh requirements/constraints-builder-py313.txt (full pip freeze of builder.in, hashed)
	tools/ci/lock.sh $(PY313) requirements/builder.in requirements/constraints-builder-py313.txt .build/lock-builder-py313
	sed -i 's/^# Regenerate with: make lock /# Regenerate with: make lock-builder /' requirements/constraints-builder-py313.txt

# The EE's lock leaves pip out: the EE's base image brings its own (Debian's pip wheel, sim/images/ee-base/).
# It is hashed like every other lock (pip removed first, then tools/ci/lock_hashes.py), but ansible-builder cannot
# install with the hashes: its introspection reads the file line by line and adds the collections' own requirements
# unpinned (community.docker's `docker`), which hash-checking mode refuses. So tools/packaging/ee_context.py gives
# ansible-builder the lock's name==version lines, and tools/packaging/ee_image.py checks every wheel it downloads
# for the build against the lock's hashes before the wheel enters the context (docs/security.md).
lock-ee: ## refresh requirements/constraints-ee-py313.txt (full pip freeze of ee.in, without pip, hashed)
	tools/ci/lock.sh --no-hashes $(PY313) requirements/ee.in requirements/constraints-ee-py313.txt .build/lock-ee-py313
	sed -i -e 's/^# Regenerate with: make lock .*/# Regenerate with: make lock-ee   (do not edit by hand; pip left out: the base image has Debian'"'"'s)/' \
	    -e '/^pip==/d' requirements/constraints-ee-py313.txt
	$(PY313) tools/ci/lock_hashes.py hash requirements/constraints-ee-py313.txt

clean-packaging: ## remove the side venvs, .build/collection, the EE's context and its wheels (not its images)
	rm -rf $(AWX_VENV) $(GALAXY_VENV) $(BUILDER_VENV) .build/collection $(EE_STAGE) $(EE_CONTEXT) $(EE_CACHE)
