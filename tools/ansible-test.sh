#!/usr/bin/env bash
# Runs ansible-test on this checkout, offline and without containers.
# ansible-test needs the collection under .../ansible_collections/inferops/vllm_dr,
# so the tracked (and untracked, not ignored) files are staged into a temporary
# tree outside this checkout (inside it, ansible-test would ask this checkout's
# git for the file list and find the staged files ignored). Its results are
# copied back to reports/ansible-test/ (or $VLLM_DR_TEST_REPORTS).
# Its pip bootstrap script normally comes from a download; the project's own
# tools/get_pip_offline.py is put into ansible-test's cache instead.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_DR_VENV:-$root/.venv}
results=${VLLM_DR_TEST_REPORTS:-$root/reports/ansible-test}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vllm-dr-ansible-test.XXXXXX")
stage=$tmp/ansible_collections/inferops/vllm_dr
finish() {
  if [ -d "$stage/tests/output" ]; then
    mkdir -p "$results"
    cp -r "$stage/tests/output/." "$results/"
  fi
  rm -rf "$tmp"
}
trap finish EXIT

pip_version=$("$venv/bin/python" - <<'PY'
import pathlib, re
import ansible_test
source = pathlib.Path(ansible_test.__file__).parent / '_internal' / 'python_requirements.py'
print(re.search(r"pip='([0-9.]+)'", source.read_text()).group(1))
PY
)
cache=${HOME}/.ansible/test/cache
mkdir -p "$cache"
install -m 0644 "$root/tools/get_pip_offline.py" "$cache/get_pip_${pip_version//./_}.py"

mkdir -p "$stage"
(cd "$root" && git ls-files -co --exclude-standard -z \
  | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | xargs -0 cp --parents -t "$stage")

# The collections the modules import from (kubernetes.core: vllm_pod_logs's client and doc fragment) sit beside
# this one, as an installed dependency would: from the ansible-test venv, else from the project's venv (the core
# matrix's venvs hold ansible-core alone).
k8s_core=
for python in "$venv/bin/python" "$root/.venv/bin/python"; do
  if k8s_core=$("$python" -c "import ansible_collections.kubernetes.core as m; print(list(m.__path__)[0])" 2>/dev/null); then
    break
  fi
done
if [ -z "$k8s_core" ]; then
  echo "ansible-test.sh: kubernetes.core not found in $venv or $root/.venv; run make deps" >&2
  exit 2
fi
mkdir -p "$tmp/ansible_collections/kubernetes/core"
cp -r "$k8s_core/." "$tmp/ansible_collections/kubernetes/core/"

cd "$stage"
PATH=$venv/bin:$PATH "$venv/bin/ansible-test" "$@"
