#!/usr/bin/env bash
# The AWX / Automation Platform gates, in a virtualenv of their own (build/aap/venv) on the oldest supported
# ansible-core (what the stock AAP execution environments ship) with ansible-runner and ansible-builder:
#   ee       ansible-builder create on extensions/ee, then every step of its Containerfile that runs without a
#            container runtime, for real (tests/aap/test_ee_context.py): the galaxy stage's collection install
#            offline, the builder's introspection, bindep on a RHEL 9 profile, the Python requirements into a clean
#            Python 3.12 virtualenv, the kubectl step against a loopback mirror
#   assets   syntax checks of extensions/aap and the survey/injector consistency test (ansible-lint covers
#            extensions/aap in `make lint`)
#   job      the restore and rollback jobs as AWX runs them (tests/aap/test_awx_job.py): ansible-runner, an
#            unprivileged user, the collection read-only
#   awx      the real AWX 24.6.1 (tests/aap/test_awx_api.py): every asset loaded by configure.yml with awx.awx, twice,
#            the workflow launched, approved and its restore job run by AWX against the lab. AWX, receptor and a
#            migrated database are built once into ~/.cache/inferops-vllm-dr (tools/aap/awx-build.sh); the job's
#            environment (what the EE definition installs) into build/aap/ee-venv
# The virtualenv is made from the system's python3 (not one under /root): the job's unprivileged user runs it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${AAP_PYTHON:-/usr/bin/python3}
venv=$root/build/aap/venv
mkdir -p "$root/build/aap" "$root/reports"

core=$(awk '/^[0-9]/ {print $2; exit}' "$root/tests/cores/matrix.txt")
drill=$root/build/aap/lab-requirements.txt
# the lab and the tests, without the collection bundle and tools that pin their own ansible-core
grep -vE '^(ansible|ansible-core|ansible-lint|antsibull-changelog|molecule|pytest-testinfra)[=<>]' \
  "$root/tests/requirements.txt" > "$drill"
# shellcheck source=tools/side-venv.sh
. "$root/tools/side-venv.sh"
cat "$root/requirements.txt" "$drill" "$root/tests/aap/requirements.txt" > "$root/build/aap/inputs.txt"
side_venv "$python" "$venv" "$root/build/aap/inputs.txt" "$core" -r "$root/requirements.txt" -r "$drill" \
  -r "$root/tests/aap/requirements.txt"
chmod -R a+rX "$root/build/aap"

pytest() { (cd "$root" && "$venv/bin/python" -m pytest -p no:cacheprovider "$@"); }

case ${1:-all} in
  ee|all)
    # the collection tarball goes next to the definition, where the definition takes it from
    rm -rf "$root/build/aap/ee-context" "$root/build/aap/dist"
    "$venv/bin/ansible-galaxy" collection build --force --output-path "$root/build/aap/dist" "$root" >/dev/null
    cp "$root"/build/aap/dist/inferops-vllm_dr-*.tar.gz "$root/extensions/ee/inferops-vllm_dr.tar.gz"
    "$venv/bin/ansible-builder" create -f "$root/extensions/ee/execution-environment.yml" \
      -c "$root/build/aap/ee-context" --output-filename Containerfile -v 1 >/dev/null
    # Python 3.12, the base image's (found, not assumed); kubernetes.core as the site's automation hub would serve it:
    # the project virtualenv's `ansible` bundle (the build itself fetches it from the hub)
    # shellcheck source=tools/find-python.sh
    . "$root/tools/find-python.sh"
    ee_python=$(find_python 3.12) || { echo "ee: no Python 3.12 (on PATH, pyenv, /usr/local/bin or /usr/bin); install one" >&2; exit 1; }
    project_python=${VLLM_DR_VENV:-$root/.venv}/bin/python
    hub=$("$project_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections
    VLLM_DR_EE_CONTEXT=$root/build/aap/ee-context VLLM_DR_EE_PYTHON=$ee_python VLLM_DR_EE_HUB=$hub \
      VLLM_DR_EE_PIP=$project_python pytest tests/aap/test_ee_context.py --junitxml="$root/reports/aap-ee.xml"
    ;;&
  assets|all)
    # with the project's own virtualenv: its `ansible` package has awx.awx and kubernetes.core, whose docs it reads
    (cd "$root" && "${VLLM_DR_VENV:-$root/.venv}/bin/python" -m pytest -p no:cacheprovider tests/aap/test_aap_assets.py \
      --junitxml="$root/reports/aap-assets.xml")
    ;;&
  job|all)
    pytest tests/aap/test_awx_job.py --junitxml="$root/reports/aap-job.xml"
    ;;&
  awx|all)
    # with the project's own virtualenv: its `ansible` package ships awx.awx
    (cd "$root" && "${VLLM_DR_VENV:-$root/.venv}/bin/python" -m pytest -p no:cacheprovider tests/aap/test_awx_api.py \
      --junitxml="$root/reports/aap-awx.xml")
    ;;
esac
