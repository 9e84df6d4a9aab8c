#!/usr/bin/env bash
# The lab drill: reproduce the incident on the built-in lab, run dr_restore.yml against it,
# show what was found, what was done and the result. Exits 0 only when validation passed.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${VLLM_DR_VENV:-$root/.venv}
work=$(mktemp -d "${TMPDIR:-/tmp}/vllm-dr-demo.XXXXXX")
state=$work/lab
reports=${VLLM_DR_REPORT_DIR:-$root/reports/demo}
export ANSIBLE_COLLECTIONS_PATH=$root/build/collections ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=0

lab() { "$venv/bin/python" "$root/tests/lab/labctl.py" --state "$state" "$@"; }
phase() { printf '\n== %s\n' "$*"; }
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() { lab down >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

phase "1/4 Lab: redis-server, OAuth2 provider (Authlib), token gateway"
lab up >/dev/null
echo "up; refresh of session s0: $(lab refresh s0 | "$venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["status"])')"

phase "2/4 Incident: snapshot, tokens rotated at the provider, snapshot restored"
lab snapshot >/dev/null
lab rotate >/dev/null
lab restore >/dev/null
lab refresh s0 | "$venv/bin/python" -c 'import json, sys; r = json.load(sys.stdin); print("refresh of session s0 now: HTTP %s %s: %s" % (r["status"], r["error"], r["error_description"]))'
echo "gateway log:"
grep -E 'TokenRefreshError|Invalid token in session state|Failed to refresh token' "$state/logs/vllm.log" | tail -n 3 | sed 's/^/  /'

phase "3/4 Runbook: ansible-playbook inferops.vllm_dr.dr_restore"
mkdir -p "$reports"
lab inventory --report-dir "$reports" > "$work/inventory.yml"
start=$(date +%s%N)
status=0
"$venv/bin/ansible-playbook" -i "$work/inventory.yml" "$root/playbooks/dr_restore.yml" > "$reports/ansible.log" 2>&1 || status=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf 'runbook %s in %d.%03ds (full output: %s)\n' "$([ $status -eq 0 ] && echo finished || echo FAILED)" \
  $((elapsed_ms / 1000)) $((elapsed_ms % 1000)) "$reports/ansible.log"

phase "4/4 Result"
if [ -f "$reports/latest/lab.md" ]; then
  sed -n '/^## Found/,$p' "$reports/latest/lab.md"
else
  tail -n 20 "$reports/ansible.log"
fi
echo
echo "report: $(realpath -m "$reports/latest")/lab.{json,junit.xml,md}"
exit $status
