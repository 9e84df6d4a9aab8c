"""The validate role's metrics textfile, written by drills on the incident lab and checked by promtool.

Run by `make observability` (it builds promtool first, see tools/observability/promtool.sh).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from harness.lab_runs import running_lab
from harness.playbooks import playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROMTOOL = os.path.join(ROOT, 'tools', 'observability', 'promtool.sh')


@pytest.fixture
def lab(tmp_path):
    with running_lab(tmp_path) as running:
        yield running


def check_metrics(path) -> subprocess.CompletedProcess:
    with open(path, 'rb') as handle:
        return subprocess.run(['bash', PROMTOOL, 'check', 'metrics'], stdin=handle, capture_output=True, text=True,
                              timeout=300, check=False)


def samples(path) -> dict:
    with open(path, encoding='utf-8') as handle:
        return {line.rsplit(' ', 1)[0]: float(line.rsplit(' ', 1)[1])
                for line in handle.read().splitlines() if line and not line.startswith('#')}


def test_drills_write_a_textfile_promtool_accepts_and_a_failed_one_keeps_the_last_success(lab, tmp_path):
    textfile = str(tmp_path / 'textfile' / 'vllm_dr.prom')
    os.makedirs(os.path.dirname(textfile))
    rc, output = playbook(lab.inventory_path, 'dr_drill.yml', '-e', f'vllm_dr_metrics_textfile={textfile}')
    assert rc == 0, output[-3000:]
    checked = check_metrics(textfile)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    passed = samples(textfile)
    assert passed['vllm_dr_validation_success'] == 1
    assert passed['vllm_dr_validation_check_success{check="refresh_probe_is_healthy"}'] == 1
    assert len([name for name in passed if name.startswith('vllm_dr_validation_check_success{')]) == 4
    assert passed['vllm_dr_validation_last_success_timestamp_seconds'] == \
        passed['vllm_dr_validation_last_run_timestamp_seconds']
    assert oct(os.stat(textfile).st_mode & 0o777) == '0o644'

    # sweeping only expired sessions cannot help: the snapshot's tokens were revoked, so this drill fails
    rc, output = playbook(lab.inventory_path, 'dr_drill.yml', '-e', f'vllm_dr_metrics_textfile={textfile}',
                          '-e', 'vllm_dr_sweep_select=expired')
    assert rc != 0
    checked = check_metrics(textfile)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    failed = samples(textfile)
    with open(textfile, encoding='utf-8') as handle:
        written = handle.read()
    assert failed['vllm_dr_validation_success'] == 0, written
    checks = {name: value for name, value in failed.items() if name.startswith('vllm_dr_validation_check_success{')}
    # the failing check is named with 0, whether validation ran (its four checks) or the run stopped before it
    assert checks and 0 in checks.values(), written
    assert failed['vllm_dr_validation_last_run_timestamp_seconds'] > passed['vllm_dr_validation_last_run_timestamp_seconds']
    assert failed['vllm_dr_validation_last_success_timestamp_seconds'] == \
        passed['vllm_dr_validation_last_success_timestamp_seconds']
