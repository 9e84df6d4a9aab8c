"""dr_detect.yml on the incident lab: healthy gives 0 and no change; the incident fails without a change; with
vllm_dr_auto_repair the incident is repaired and validated. Each run's metrics textfile passes promtool."""

from __future__ import annotations

import os
import subprocess

import pytest
import redis

from harness.lab_runs import running_lab
from harness.playbooks import playbook, recap
from harness.reports import report_path
from harness.sessions import dump_redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROMTOOL = os.path.join(ROOT, 'tools', 'observability', 'promtool.sh')


@pytest.fixture
def lab(tmp_path):
    with running_lab(tmp_path) as running:
        yield running


def state(lab):
    """What a detection must not change: the cache file (the gateway itself writes the probe's new token into it, so
    its inode and the absence of any backup), the sessions, the running gateway."""
    backups = sorted(name for _dir, _subdirs, names in os.walk(lab.path('backups')) for name in names)
    cache = (os.stat(lab.cache_path).st_ino, backups)
    client = redis.Redis(host='127.0.0.1', port=lab.state['ports']['redis'], socket_timeout=10)
    sessions = {key: value for key, value in dump_redis(client).items()
                if key != f'vllm:session:{lab.state["service_session"]}'.encode()}  # the probe session rotates its token
    return cache, sessions, lab._load()['pids']['gateway']


def metrics(path) -> dict:
    with open(path, 'rb') as handle:
        checked = subprocess.run(['bash', PROMTOOL, 'check', 'metrics'], stdin=handle, capture_output=True, text=True,
                                 timeout=600, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with open(path, encoding='utf-8') as handle:
        return {line.split()[0]: float(line.split()[1]) for line in handle if line.strip() and line[0] != '#'}


def detect(lab, textfile, *extra):
    return playbook(lab.inventory_path, 'dr_detect.yml', '-e', f'vllm_dr_detect_metrics_textfile={textfile}', *extra)


def test_detection_is_quiet_when_healthy_fails_on_the_incident_and_repairs_when_allowed(lab, tmp_path):
    textfile = str(tmp_path / 'vllm_dr_detect.prom')

    before = state(lab)
    rc, output = detect(lab, textfile)
    assert rc == 0, output[-4000:]
    assert 'refresh path healthy: nothing to repair' in output
    assert recap(output)['changed'] == 0 and state(lab) == before
    assert metrics(textfile)['vllm_dr_detection_stale'] == 0

    lab.snapshot()
    lab.rotate()
    lab.restore()
    before = state(lab)
    rc, output = detect(lab, textfile)
    assert rc != 0
    assert 'stale refresh tokens: the provider rejects the probe session\'s token' in output, output[-4000:]
    assert 'set vllm_dr_auto_repair=true' in output
    assert recap(output)['changed'] == 0 and state(lab) == before
    found = metrics(textfile)
    assert (found['vllm_dr_detection_stale'], found['vllm_dr_detection_repair_started']) == (1, 0)

    rc, output = detect(lab, textfile, '-e', 'vllm_dr_auto_repair=true')
    assert rc == 0, output[-4000:]
    assert 'repairing (vllm_dr_auto_repair)' in output
    assert state(lab)[2] != before[2], 'the gateway was restarted'
    assert lab.refresh('svc')[0] == 200
    assert metrics(textfile)['vllm_dr_detection_repair_started'] == 1
    report = report_path(lab.reports, 'lab.md').read_text()
    assert 'PASSED' in report.splitlines()[0]


def test_detection_without_a_probe_is_refused_in_one_line(lab):
    rc, output = playbook(lab.inventory_path, 'dr_detect.yml', '-e', 'vllm_dr_refresh_url=')
    assert rc != 0
    assert 'detection probes the refresh path: set vllm_dr_refresh_url and vllm_dr_probe_session' in output
