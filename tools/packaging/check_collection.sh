#!/usr/bin/env bash
# Build the collection as Galaxy gets it, install it into a clean collections path and check it there.
#
# Usage: tools/packaging/check_collection.sh VENV GALAXY_VENV WORKDIR
#   VENV         the collection's venv (.venv: ansible-core and the `ansible` package's collections,
#                which stand in for Galaxy for the dependencies)
#   GALAXY_VENV  .venv-galaxy (galaxy-importer, antsibull-docs)
#   WORKDIR      scratch directory, made afresh (.build/collection)
#
#  1. ansible-galaxy collection build; the tarball holds what a user installs and nothing of the
#     development tree (galaxy.yml's build_ignore);
#  2. ansible-galaxy collection install into WORKDIR/collections (no other copy of dgxspark.cluster is
#     visible: ansible.cfg and the checkout's link are out of the way);
#  3. playbooks/plan.yml from the installed copy (ansible-playbook dgxspark.cluster.plan) against the
#     installed example inventory inventories/spark3: it contacts no host;
#  4. galaxy-importer on the tarball (tools/packaging/galaxy-importer.cfg): no error and no warning;
#  5. antsibull-docs lint-collection-docs --plugin-docs on the installed copy, with the galaxy venv's ansible-core
#     and with VENV's (the newest supported one).
set -euo pipefail

venv=$(realpath "${1:?usage: $0 VENV GALAXY_VENV WORKDIR}")
galaxy_venv=$(realpath "${2:?}")
work=${3:?}
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
work=$(realpath "$work")
step() { printf '\n--> %s\n' "$*"; }
fail() { echo "collection-check: $*" >&2; exit 1; }

# Run Ansible as a user would: no project ansible.cfg, only the install path and the site-packages
# collections (community.docker, ansible.posix from the `ansible` package).
export ANSIBLE_CONFIG="$work/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$work/collections" ANSIBLE_NOCOLOR=1
printf '[defaults]\n' >"$ANSIBLE_CONFIG"
installed="$work/collections/ansible_collections/dgxspark/cluster"

step "build"
(cd "$root" && "$venv/bin/ansible-galaxy" collection build --force --output-path "$work" .) >/dev/null
tarball=$(ls "$work"/dgxspark-cluster-*.tar.gz)
echo "$tarball ($(du -h "$tarball" | cut -f1))"

step "contents: nothing of the development tree"
tar tzf "$tarball" | sed 's|/$||' | sort >"$work/contents.txt"
unwanted=$(grep -E '^(sim|tools|mk|tests|extensions|awx|requirements|\.ci|\.ansible|\.build|\.cache|\.venv[^/]*|inventories/sim[^/]*|inventories/fleet|changelogs/fragments)(/|$)|^(Makefile|pyproject\.toml|ansible\.cfg|requirements\.yml|execution-environment\.yml|\.gitignore|\.ansible-lint|playbooks/demo\.yml)$|__pycache__|\.pyc$' "$work/contents.txt" || true)
[[ -z $unwanted ]] || fail "the tarball holds files a user should not install:"$'\n'"$unwanted"
for wanted in MANIFEST.json FILES.json README.md LICENSE meta/runtime.yml plugins/modules/serving_profile.py \
    roles/boot/meta/argument_specs.yml playbooks/plan.yml playbooks/boot.yml inventories/spark3/hosts.yml \
    inventories/spark3/serving-profile.json schemas/serving-profile.v2.schema.json docs/profile.md; do
    grep -qxF "$wanted" "$work/contents.txt" || fail "the tarball lacks $wanted"
done
echo "$(wc -l <"$work/contents.txt") entries; none from the development tree"

step "install into a clean collections path"
"$venv/bin/ansible-galaxy" collection install --offline --no-deps -p "$work/collections" "$tarball" >/dev/null
found=$("$venv/bin/ansible-galaxy" collection list dgxspark.cluster --format json 2>/dev/null \
    | "$venv/bin/python" -c 'import json, sys; print(" ".join(p for p, c in json.load(sys.stdin).items() if "dgxspark.cluster" in c))')
[[ $found == "$work/collections/ansible_collections" ]] || fail "dgxspark.cluster resolves to '$found', not the installed copy"
echo "dgxspark.cluster from $found"

step "plan.yml from the installed copy (contacts no host)"
(cd "$work" && "$venv/bin/ansible-playbook" dgxspark.cluster.plan -i "$installed/inventories/spark3") >"$work/plan.log" 2>&1 \
    || { cat "$work/plan.log"; fail "plan.yml failed from the installed copy"; }
grep -q 'shape: tp3-triangle' "$work/plan.log" || { cat "$work/plan.log"; fail "plan.yml printed no plan"; }
grep -E '^(PLAY RECAP|spark-)' "$work/plan.log" | tail -4

step "galaxy-importer $("$galaxy_venv/bin/python" -c 'import importlib.metadata as m; print(m.version("galaxy-importer"))') (offline, no containers)"
(cd "$work" && GALAXY_IMPORTER_CONFIG="$root/tools/packaging/galaxy-importer.cfg" PATH="$galaxy_venv/bin:$PATH" \
    "$galaxy_venv/bin/python" -m galaxy_importer.main "$tarball") >"$work/galaxy-importer.log" 2>&1 \
    || { cat "$work/galaxy-importer.log"; fail "galaxy-importer failed"; }
if grep -E '^(WARNING|ERROR|CRITICAL)' "$work/galaxy-importer.log"; then fail "galaxy-importer reported the above"; fi
grep -q 'Importer processing completed successfully' "$work/galaxy-importer.log" || fail "galaxy-importer did not complete"
echo "no error, no warning"

# antsibull-docs reads the plugins' docs through the ansible-doc it finds first on PATH: lint with the galaxy venv's
# ansible-core and with VENV's (the newest supported core, what users and the EE run): a core may see a finding
# another does not (issue 28: O() of a name that is no option of the filter).
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for core_venv in "$galaxy_venv" "$venv"; do
    step "antsibull-docs lint-collection-docs --plugin-docs with $("$core_venv/bin/ansible-doc" --version | head -1) ($core_venv)"
    ANSIBLE_COLLECTIONS_PATH="$work/collections:$site" PATH="$core_venv/bin:$galaxy_venv/bin:$PATH" \
        "$galaxy_venv/bin/antsibull-docs" lint-collection-docs --plugin-docs "$installed"
    echo "no finding"
done
