#!/usr/bin/env bash
# The dependency floors: every lower bound in requirements.txt installed exactly (redis>=5.0.0 ->
# redis==5.0.0, ...) in a virtualenv of its own, with the tests' other pins from
# tests/requirements.txt, then the session-store, probe and token-cache integration tests run
# against them. A floor the tests do not pass with is not a floor.
# The virtualenv lives under ~/.cache/inferops-vllm-dr/floors-py<X.Y>; results in reports/floors.xml.
# Then the collection floor: the oldest `ansible` the collection supports (tests/cores/ansible-floor.txt: `ansible` 9,
# ansible-core 2.16 and the kubernetes.core galaxy.yml's range starts at), in floors-ansible-py<X.Y>: the release
# tarball installed offline with its dependencies resolved, and the Kubernetes runbook end to end on the suite's
# control plane (three tests of tests/functional/k8s/test_kubernetes_platform.py); results in reports/floors-ansible.xml.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${VLLM_DR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/inferops-vllm-dr}
python=${PYTHON:-${VLLM_DR_VENV:-$root/.venv}/bin/python}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$cache/floors-py$version
mkdir -p "$cache" "$root/reports"

floors=$cache/floors.txt
# "name>=X" -> "name==X"; every requirement of requirements.txt must have a floor
awk '/^[A-Za-z]/ { if ($0 !~ />=/) { print "no lower bound: " $0 > "/dev/stderr"; exit 1 }
                  sub(/>=/, "=="); sub(/[,;].*/, ""); print }' "$root/requirements.txt" > "$floors"
names=$(sed -E 's/==.*//' "$floors" | paste -sd'|')
others=$cache/floors-others.txt
# the tests' other pins. Out: tools that pin their own ansible-core, and the `ansible` bundle (these tests use
# no collection but this one; its ~40,000 files took minutes to install). hiredis 2.0.0 has no wheel for
# Python 3.11 or newer: pip builds it from source (a C compiler and the Python headers, about a minute).
grep -vE "^(${names}|ansible|ansible-lint|molecule|pytest-testinfra|antsibull-changelog|check-jsonschema)[=<>]" \
  "$root/tests/requirements.txt" | grep -E '^[A-Za-z]' > "$others"

# shellcheck source=tools/side-venv.sh
. "$root/tools/side-venv.sh"
cat "$floors" "$others" > "$cache/floors-inputs.txt"
side_venv "$python" "$venv" "$cache/floors-inputs.txt" -r "$floors" -r "$others"

# what is installed must be the floors themselves (pip could resolve another version)
"$venv/bin/python" - "$floors" <<'PY'
import sys
from importlib.metadata import version
bad = []
for line in open(sys.argv[1]):
    name, want = line.strip().split('==')
    if version(name) != want:
        bad.append(f'{name} {version(name)} installed, floor is {want}')
if bad:
    sys.exit('floors: ' + '; '.join(bad))
print('floors: testing with ' + ', '.join(line.strip() for line in open(sys.argv[1])))
PY

cd "$root"
status=0
"$venv/bin/python" -m pytest -p no:cacheprovider --junitxml="$root/reports/floors.xml" \
  tests/functional/test_session_sweep_redis.py \
  tests/functional/test_session_sweep_topologies.py \
  tests/functional/test_redis_wire_readers.py \
  tests/functional/test_redis_scripts_one_way.py \
  tests/unit/plugins/module_utils/test_redis_wire.py \
  tests/functional/test_session_store_errors.py \
  tests/functional/test_lab_and_probe.py \
  tests/functional/test_refresh_probe_hostile.py \
  tests/functional/test_cache_files_and_links.py \
  "$@" || status=$?

# The collection floor: the `ansible` pin of tests/cores/ansible-floor.txt with the tests' other pins
ansible_floor=$(grep -E '^ansible==' "$root/tests/cores/ansible-floor.txt")
ansible_venv=$cache/floors-ansible-py$version
grep -vE '^(ansible|ansible-core|ansible-lint|molecule|pytest-testinfra|antsibull-changelog|check-jsonschema)[=<>]' \
  "$root/tests/requirements.txt" | grep -E '^[A-Za-z]' > "$cache/floors-ansible-others.txt"
cat "$root/tests/cores/ansible-floor.txt" "$cache/floors-ansible-others.txt" > "$cache/floors-ansible-inputs.txt"
side_venv "$python" "$ansible_venv" "$cache/floors-ansible-inputs.txt" "$ansible_floor" \
  -r "$cache/floors-ansible-others.txt"
# each collection galaxy.yml depends on is there at the lower bound of its range: the floor tested is the floor
"$ansible_venv/bin/python" - "$root/galaxy.yml" <<'PY' || status=1
import json, os, re, sys, sysconfig
from importlib.metadata import version
import yaml
bundle = os.path.join(sysconfig.get_paths()['purelib'], 'ansible_collections')
with open(sys.argv[1], encoding='utf-8') as handle:
    dependencies = yaml.safe_load(handle).get('dependencies') or {}
found, bad = [], []
for name, spec in dependencies.items():
    manifest = os.path.join(bundle, *name.split('.'), 'MANIFEST.json')
    have = json.load(open(manifest, encoding='utf-8'))['collection_info']['version'] if os.path.isfile(manifest) else None
    floor = re.search(r'>=\s*([0-9.]+)', spec)
    found.append(f'{name} {have}')
    if not floor or have != floor.group(1):
        bad.append(f"galaxy.yml's {name} {spec}: the floor `ansible` bundles {have}; make the range start there")
print(f"floors: the collection on ansible {version('ansible')}, ansible-core {version('ansible-core')}, "
      + ', '.join(found))
sys.exit('floors: ' + '; '.join(bad) if bad else 0)
PY
# the Kubernetes suite's control plane, built once and cached (unless KUBECONFIG names a cluster)
[ -n "${KUBECONFIG:-}" ] || bash "$root/tools/k8s/build.sh" >/dev/null
# From the Kubernetes platform's file: the drill (diagnose, purge, restart, validate, a second run that changes
# nothing, the rollback), the Velero restore time and a missing permission named. The drill runs the playbook four
# times, on ansible-core 2.16 slower than on the newest: its time limit is the file's three runs' worth.
"$ansible_venv/bin/python" -m pytest -p no:cacheprovider --junitxml="$root/reports/floors-ansible.xml" \
  --timeout 1800 tests/functional/test_galaxy_tarball_install.py tests/functional/k8s/test_kubernetes_platform.py \
  -k 'not k8s or drill_on_the_control_plane or latest_finished_velero_restore or missing_a_verb' || status=$?
exit $status
