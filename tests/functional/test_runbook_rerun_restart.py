"""A re-run after a run that changed the target but never restarted it: the purge, the configuration edit and the
sweep are done and there is nothing stale left on disk or in the store, but the service still runs with what it
loaded before (its open token cache, its sessions), and the refresh probe says so. The re-run restarts it."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from harness.lab_runs import incident_lab
from harness.playbooks import playbook
from test_runbook import with_inventory


@pytest.fixture
def lab(tmp_path):
    with incident_lab(tmp_path) as lab:
        yield with_inventory(lab, tmp_path)


def test_a_rerun_restarts_the_service_a_run_left_unrestarted(lab):
    # the first run's restart fails: every change is made, the restart is not
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml',
                          '-e', json.dumps({'vllm_dr_restart_command': 'false'}))
    assert rc != 0, output[-3000:]
    assert 'Restart the service with the configured command' in output
    record = os.path.join(lab.inventory(None)['all']['children']['vllm']['hosts']['lab']['vllm_dr_backup_dir'],
                          'restart-pending-lab.json')
    with open(record, encoding='utf-8') as handle:
        first_run = json.load(handle)['run']
    lab.state = lab._load()  # pylint: disable=protected-access
    gateway = lab.state['pids']['gateway']
    assert lab.refresh('svc')[0] != 200, 'the service still runs with what it loaded before the purge'

    rc, output = playbook(lab.inventory_path, 'dr_restore.yml')
    assert rc == 0, output[-3000:]
    pending = re.search(r'"msg": "run (\S+) changed the service at (\S+) and did not restart it: it still runs with '
                        r'what it loaded before the purge"', output)
    assert pending and pending.group(1) == first_run, output[-3000:]
    lab.state = lab._load()  # pylint: disable=protected-access
    assert lab.state['pids']['gateway'] != gateway
    assert lab.refresh('svc')[0] == 200
    assert not os.path.exists(record)

    # and the run after that has nothing to do: no restart again
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml')
    assert rc == 0, output[-3000:]
    assert lab._load()['pids']['gateway'] == lab.state['pids']['gateway']  # pylint: disable=protected-access

    # a forced run records the restart it owes before its first change, and leaves no record behind once it ended
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml', '-e', 'vllm_dr_force=true')
    assert rc == 0, output[-3000:]
    assert 'Record that this run changes the service and restarts it' in output
    assert not os.path.exists(record)


def test_a_run_that_changed_nothing_clears_its_record_even_with_a_restart_time_given(lab):
    """vllm_dr_restarted_at is also an input (validate's, as an extra variable that wins over the run's own): given,
    it must not make a run that changed nothing look restarted and leave its record behind for the next run."""
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml')
    assert rc == 0, output[-3000:]
    host = lab.inventory(None)['all']['children']['vllm']['hosts']['lab']
    record = os.path.join(host['vllm_dr_backup_dir'], 'restart-pending-lab.json')
    now = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    # a forced run with nothing to purge: no cache at the path it is given, the sessions fresh, the configuration set
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml', '-e', json.dumps({
        'vllm_dr_force': True, 'vllm_dr_restarted_at': now,
        'vllm_dr_cache_path': os.path.join(os.path.dirname(host['vllm_dr_cache_path']), 'no_cache_here.db')}))
    assert rc == 0, output[-3000:]
    assert 'Record that this run changes the service and restarts it' in output
    assert not os.path.exists(record), output[-3000:]
