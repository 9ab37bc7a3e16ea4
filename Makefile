# Test and tooling entry points for the dgxspark.cluster Ansible collection.
#
#   make venv      .venv (Python 3.13, ansible-core 2.21) + the collection link for FQCNs
#   make lint      ruff, ansible-lint (production profile), antsibull-changelog lint
#   make units     pytest tests/unit
#   make sanity    ansible-test sanity on a clean copy of the tree (ansible-core 2.21)
#   make compat    units + ansible-test sanity under ansible-core 2.19 / Python 3.11
#   make test      all of the above, with a timing summary (what .ci/run runs)
#   make format    ruff --fix + ruff format (rewrites files)
#   make demo      ansible-playbook playbooks/demo.yml
#   make bench     validation and planning time (tools/bench_plan.py)
#   make schema    regenerate the JSON Schema and docs/profile-reference.md
#   make lock      re-resolve requirements/*.in into requirements/constraints-*.txt (hashed)
#   make lock-hashes  re-hash the locks' pinned versions from PyPI (versions unchanged)
#   make clean     remove build output and caches; `make distclean` also the venvs
#
# Works unattended (CI=true, no stdin) as root on a clean clone; the only things it
# needs on the machine are the interpreters below (pyenv on CI) and PyPI.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
# sanity and compat share .build/: one target at a time, even under make -j.
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules --no-print-directory

# --------------------------------------------------------------------------- settings
# Interpreters: pyenv's on CI; override on the command line (make PY313=/usr/bin/python3.13).
PYENV_ROOT ?= $(HOME)/.pyenv
find_python = $(firstword $(wildcard $(PYENV_ROOT)/versions/$(1).*/bin/python$(1)) \
                          $(shell command -v python$(1) 2>/dev/null))
PY313 ?= $(call find_python,3.13)
PY311 ?= $(call find_python,3.11)

# Wheels only, for every venv's install: in hash-checking mode pip passes over a wheel whose hash is not
# in the lock when the sdist's is, and builds the sdist instead (tried: a changed Jinja2 wheel hash gave
# a Jinja2 built by a flit_core the lock does not pin, with no error); wheels only, the install fails. Every pin has a wheel for Linux x86_64
# and aarch64 and for macOS arm64 but crick (aiperf's), which has none for Linux aarch64: there, build
# .venv-aiperf with PIP_ONLY_BINARY= (its build backend is then not hash-checked).
PIP_ONLY_BINARY ?= --only-binary :all:

VENV        := .venv
COMPAT_VENV := .venv-compat
BUILD       := .build

# requirement inputs and their locks (see requirements/*.in for what each set is for)
DEV_REQS    := requirements/dev.in requirements/constraints-py313.txt
COMPAT_REQS := requirements/compat.in requirements/constraints-py311.txt

# The collection as ansible sees it from the checkout (ansible.cfg: collections_path).
COLLECTION      := dgxspark.cluster
COLLECTION_LINK := .ansible/collections/ansible_collections/dgxspark/cluster
# ansible-test's clean copy of the tree (tools/ci/sanity-tree.sh) and its python links.
SANITY_ROOT := $(BUILD)/ansible_collections/dgxspark/cluster
PYTHON_LINKS := $(CURDIR)/$(BUILD)/bin

# Extra arguments, e.g. make units PYTEST_ARGS='-k profile -x', make sanity SANITY_ARGS='--test pep8'
PYTEST_ARGS ?=
SANITY_ARGS ?=
COMPAT_SANITY_ARGS ?=
# Sanity runs the per-Python tests (compile, import) on every interpreter it finds; set
# SANITY_PYTHON=3.13 (or COMPAT_SANITY_PYTHON=3.11) to test a single one, faster.
SANITY_PYTHON ?=
COMPAT_SANITY_PYTHON ?=
DEMO_ARGS ?=

# The stages of `make test`, in order. Other parts of the tree add stages (molecule,
# end-to-end, ...) by dropping a makefile into mk/ that defines its targets and does
# `EXTRA_TEST_TARGETS += <target>`; or pass them ad hoc: make test EXTRA_TEST_TARGETS=molecule
EXTRA_TEST_TARGETS ?=
-include $(sort $(wildcard mk/*.mk))
# The simulated cluster (sim/README.md): sim-up, sim-down, sim-test (part of `make test`).
-include sim/sim.mk
TEST_STAGES = lint units sanity compat $(EXTRA_TEST_TARGETS)

# Stamp files are named after a hash of the requirement files, so editing them (or a
# lock refresh) rebuilds the venv on the next run and nothing else does.
req_hash = $(shell cat $(1) 2>/dev/null | sha256sum | cut -c1-16)
VENV_STAMP        := $(VENV)/.installed-$(call req_hash,$(DEV_REQS))
COMPAT_VENV_STAMP := $(COMPAT_VENV)/.installed-$(call req_hash,$(COMPAT_REQS))

# $(call stage,text): a visible header per step
stage = @printf '\n==> %s\n' "$(1)"

export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PAGER := cat

.PHONY: help venv compat-venv collection-link lint lint-ruff lint-format lint-ansible lint-changelog format units sanity compat compat-units compat-sanity \
        test demo lock lock-hashes clean distclean sanity-prereqs shellcheck-bin get-pip-stub bench schema

# --------------------------------------------------------------------------- help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([^:]*:)?([a-z-]+):.*## /  \2\t/' | expand -t 16

# --------------------------------------------------------------------------- venvs
# Every venv (these two, and those of mk/*.mk) is built from scratch in pip's hash-checking mode from
# its lock, requirements/constraints-*.txt, where each pin carries the sha256 of every file the index
# holds for that version (tools/ci/lock_hashes.py): a file whose content changed on the index fails
# the install ("THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE"). Two steps:
#  1. pip itself, pinned, from its own hashed entry of the lock (`lock_hashes.py select`) with -r: the
#     pip that `python -m venv` bundles (ensurepip's: 24.2 on 3.13, 23.2.1 on 3.11) does not take a
#     requirement's hashes from a constraints file (tried: "Hashes are required in --require-hashes
#     mode, but they are missing from some requirements"). That bundled pip is the interpreter's own.
#  2. the .in under the lock, with --require-hashes: the pinned pip (26.3) takes each requirement's
#     hashes from the lock (tried: a changed hash there fails the install), and refuses any package,
#     dependencies included, that the lock does not pin with its hashes.
# venv: .venv from requirements/dev.in pinned by constraints-py313.txt (rebuilt from
# scratch only when those files change), plus the collection link.
venv: $(VENV_STAMP) collection-link ## .venv (Python 3.13, ansible-core 2.21) + collection link

$(VENV_STAMP):
	$(call stage,venv: $(VENV) from requirements/dev.in with $(PY313))
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "venv: no Python 3.13 found (looked in $(PYENV_ROOT)/versions and PATH); set PY313=/path/to/python3.13" >&2; exit 1; }
	rm -rf $(VENV)
	$(PY313) -m venv $(VENV)
	$(VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-py313.txt pip >$(VENV)/pip-lock.txt
	$(VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(VENV)/pip-lock.txt
	$(VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/dev.in -c requirements/constraints-py313.txt
	$(VENV)/bin/python -m pip check
	touch $@

# compat-venv: .venv-compat (Python 3.11, ansible-core 2.19) from requirements/compat.in.
compat-venv: $(COMPAT_VENV_STAMP) collection-link

$(COMPAT_VENV_STAMP):
	$(call stage,compat-venv: $(COMPAT_VENV) from requirements/compat.in with $(PY311))
	@[[ -n "$(PY311)" && -x "$(PY311)" ]] || { echo "compat-venv: no Python 3.11 found (looked in $(PYENV_ROOT)/versions and PATH); set PY311=/path/to/python3.11" >&2; exit 1; }
	rm -rf $(COMPAT_VENV)
	$(PY311) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python tools/ci/lock_hashes.py select requirements/constraints-py311.txt pip >$(COMPAT_VENV)/pip-lock.txt
	$(COMPAT_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) --no-deps -r $(COMPAT_VENV)/pip-lock.txt
	$(COMPAT_VENV)/bin/python -m pip install -q --require-hashes $(PIP_ONLY_BINARY) -r requirements/compat.in -c requirements/constraints-py311.txt
	$(COMPAT_VENV)/bin/python -m pip check
	touch $@

# collection-link: .ansible/collections/ansible_collections/dgxspark/cluster -> the checkout
# (relative, so the clone can move), then check that ansible resolves dgxspark.cluster there.
collection-link: $(VENV_STAMP)
	@mkdir -p $(dir $(COLLECTION_LINK))
	@if [[ "$$(readlink $(COLLECTION_LINK))" != "../../../.." ]]; then \
	    rm -rf $(COLLECTION_LINK) && ln -s ../../../.. $(COLLECTION_LINK) && echo "linked $(COLLECTION_LINK) -> ../../../.."; fi
	@$(VENV)/bin/ansible-doc -t module ansible.builtin.ping >/dev/null
	@found=$$($(VENV)/bin/ansible-galaxy collection list $(COLLECTION) --format json 2>/dev/null \
	    | $(VENV)/bin/python -c 'import json,sys; print(" ".join(p for p, c in json.load(sys.stdin).items() if "$(COLLECTION)" in c))'); \
	  if [[ "$$found" != "$(CURDIR)/.ansible/collections/ansible_collections" ]]; then \
	    echo "collection-link: ansible resolves $(COLLECTION) to '$$found', expected $(CURDIR)/.ansible/collections/ansible_collections (is ANSIBLE_CONFIG/ANSIBLE_COLLECTIONS_PATH set?)" >&2; exit 1; fi

# --------------------------------------------------------------------------- lint
# lint: Python style (ruff; settings in pyproject.toml), Ansible content (ansible-lint,
# production profile; .ansible-lint) and changelog fragments (antsibull-changelog).
# Each tool is its own target so `make -k lint` (and `make test`) reports all of them.
lint: lint-ruff lint-format lint-ansible lint-changelog ## ruff check + format check, ansible-lint, changelog lint

lint-ruff: venv
	$(call stage,lint: ruff check)
	$(VENV)/bin/ruff check --no-fix --output-format concise .

lint-format: venv
	$(call stage,lint: ruff format --check)
	$(VENV)/bin/ruff format --check --diff .

lint-ansible: venv
	$(call stage,lint: ansible-lint --profile production)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/ansible-lint --profile production --nocolor

# format: apply ruff's safe fixes and formatting to the tree (changes files; not part of test).
format: venv ## ruff check --fix + ruff format (rewrites files)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

lint-changelog: venv
	$(call stage,lint: antsibull-changelog lint)
	$(VENV)/bin/antsibull-changelog lint
	$(VENV)/bin/antsibull-changelog lint-changelog-yaml --strict changelogs/changelog.yaml

# --------------------------------------------------------------------------- units
# units: pytest tests/unit in .venv (pyproject.toml puts .ansible/collections on sys.path).
# pytest exits 5 when it collects nothing; that is a failure here, said plainly.
units: venv ## pytest tests/unit (Python 3.13, ansible-core 2.21)
	$(call stage,units: pytest tests/unit (Python 3.13, ansible-core 2.21))
	@$(VENV)/bin/python -m pytest $(PYTEST_ARGS) || { rc=$$?; \
	    if [[ $$rc == 5 ]]; then echo "units: pytest collected no tests under tests/unit" >&2; fi; exit $$rc; }

# --------------------------------------------------------------------------- sanity
# sanity-prereqs: what ansible-test needs on this machine and cannot fetch itself:
#  - shellcheck (Debian package; without it the shellcheck test is skipped silently),
#  - a get-pip.py stand-in in ~/.ansible/test/cache (tools/ci/get_pip_stub.py),
#  - pythonX.Y links for every interpreter ansible-test may test against.
sanity-prereqs: shellcheck-bin get-pip-stub
	@tools/ci/python-links.sh $(PYTHON_LINKS)

shellcheck-bin:
	@if ! command -v shellcheck >/dev/null; then \
	    echo "installing shellcheck (Debian package)"; \
	    [[ $$(id -u) == 0 ]] || { echo "shellcheck is missing and this is not root: apt-get install shellcheck" >&2; exit 1; }; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; fi
	@shellcheck --version | sed -n 2p

get-pip-stub: venv
	@$(VENV)/bin/python tools/ci/install_get_pip_stub.py

# sanity: every ansible-test sanity test, ansible-core 2.21, each in its own venv made by
# ansible-test (--venv; no containers). Controller tests run on Python 3.13, the per-Python
# tests (compile, import) on every target Python found (3.9 ... 3.13 on CI).
sanity: venv sanity-prereqs ## ansible-test sanity (ansible-core 2.21) on a clean copy in .build/
	$(call stage,sanity: clean copy of the tree in $(SANITY_ROOT))
	tools/ci/sanity-tree.sh $(BUILD) $(VENV)/bin/python
	$(call stage,sanity: ansible-test sanity (ansible-core 2.21, controller Python 3.13))
	cd $(SANITY_ROOT) && PATH="$(PYTHON_LINKS):$$PATH" \
	    $(CURDIR)/$(VENV)/bin/ansible-test sanity --venv $(if $(SANITY_PYTHON),--python $(SANITY_PYTHON)) --color no $(SANITY_ARGS)

# --------------------------------------------------------------------------- compat
# compat: the oldest supported controller, ansible-core 2.19 on Python 3.11 (.venv-compat):
# the unit tests, and ansible-test sanity on a fresh clean copy (same tree as `sanity`).
compat: compat-units compat-sanity ## units + sanity under ansible-core 2.19 / Python 3.11

compat-units: compat-venv
	$(call stage,compat: pytest tests/unit (Python 3.11, ansible-core 2.19))
	@$(COMPAT_VENV)/bin/python -m pytest -p no:cacheprovider $(PYTEST_ARGS) || { rc=$$?; \
	    if [[ $$rc == 5 ]]; then echo "compat: pytest collected no tests under tests/unit" >&2; fi; exit $$rc; }

compat-sanity: compat-venv sanity-prereqs
	@$(COMPAT_VENV)/bin/python tools/ci/install_get_pip_stub.py
	$(call stage,compat: clean copy of the tree in $(SANITY_ROOT))
	tools/ci/sanity-tree.sh $(BUILD) $(COMPAT_VENV)/bin/python
	$(call stage,compat: ansible-test sanity (ansible-core 2.19, controller Python 3.11))
	cd $(SANITY_ROOT) && PATH="$(PYTHON_LINKS):$$PATH" \
	    $(CURDIR)/$(COMPAT_VENV)/bin/ansible-test sanity --venv $(if $(COMPAT_SANITY_PYTHON),--python $(COMPAT_SANITY_PYTHON)) --color no $(COMPAT_SANITY_ARGS)

# --------------------------------------------------------------------------- test
# test: builds the venv, then runs every stage in TEST_STAGES in order (tools/ci/test-stages.sh),
# each in its own `make --keep-going` so that one failing check does not hide the others, each
# logged to .build/test-logs/STAGE.log; prints how long each took and, for every failed stage,
# its failing tests (or its last lines), and fails if any failed.
test: ## venv, then lint, units, sanity, compat (+ EXTRA_TEST_TARGETS), with timings
	@start=$$SECONDS; $(MAKE) venv; \
	MAKE="$(MAKE)" VENV_SECONDS=$$((SECONDS - start)) tools/ci/test-stages.sh $(BUILD)/test-logs $(TEST_STAGES)

# --------------------------------------------------------------------------- demo
demo: venv ## start the simulated sim3 cluster, then ansible-playbook playbooks/demo.yml on it (DEMO_ARGS=...)
	$(call stage,demo: the simulated three-node cluster (make sim-up CLUSTER=sim3))
	$(MAKE) sim-up CLUSTER=sim3
	$(call stage,demo: ansible-playbook playbooks/demo.yml -i inventories/sim3)
	$(VENV)/bin/ansible-playbook playbooks/demo.yml -i inventories/sim3 $(DEMO_ARGS)
	@echo "The cluster keeps running: make sim-down CLUSTER=sim3 removes it."

# --------------------------------------------------------------------------- tools
bench: venv ## tools/bench_plan.py: validation and planning time, shipped and synthetic profiles
	$(call stage,bench: validation and planning time)
	$(VENV)/bin/python tools/bench_plan.py

schema: venv ## regenerate schemas/serving-profile.v2.schema.json and docs/profile-reference.md
	$(VENV)/bin/python tools/gen_schema.py

# --------------------------------------------------------------------------- lock
# lock: resolve requirements/*.in afresh (newest versions PyPI offers) in throw-away venvs
# and write the full `pip freeze` to requirements/constraints-py3XX.txt, each pin with the sha256
# of every file PyPI holds for it (tools/ci/lock.sh, tools/ci/lock_hashes.py). Review the diff.
# The side venvs' locks: make lock-awx, lock-galaxy, lock-builder, lock-ee, lock-aiperf, lock-sparkrun.
lock: ## refresh requirements/constraints-py313.txt and constraints-py311.txt (with hashes)
	$(call stage,lock: requirements/dev.in -> constraints-py313.txt)
	tools/ci/lock.sh $(PY313) requirements/dev.in requirements/constraints-py313.txt $(BUILD)/lock-py313
	$(call stage,lock: requirements/compat.in -> constraints-py311.txt)
	tools/ci/lock.sh $(PY311) requirements/compat.in requirements/constraints-py311.txt $(BUILD)/lock-py311

# lock-hashes: the hashes of every lock afresh from PyPI, every pinned version kept (nothing is resolved); the
# EE's too (ansible-builder is given its name==version lines: mk/packaging.mk).
HASHED_LOCKS = $(wildcard requirements/constraints-*.txt)
lock-hashes: ## re-hash requirements/constraints-*.txt (every file of each pinned version), no version changes
	$(call stage,lock-hashes: $(HASHED_LOCKS))
	@[[ -n "$(PY313)" && -x "$(PY313)" ]] || { echo "lock-hashes: no Python 3.13 found; set PY313=/path/to/python3.13" >&2; exit 1; }
	$(PY313) tools/ci/lock_hashes.py hash $(HASHED_LOCKS)

# --------------------------------------------------------------------------- clean
clean: ## remove .build, tests/output and caches (keeps the venvs)
	rm -rf $(BUILD) tests/output .pytest_cache .ruff_cache .cache
	find . -path ./$(VENV) -prune -o -path ./$(COMPAT_VENV) -prune -o -path ./.ansible -prune -o \
	    -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## clean, and remove .venv, .venv-compat and the collection link
	rm -rf $(VENV) $(COMPAT_VENV) .ansible
