"""dr_restore.yml and dr_rollback.yml where runs used to stop or lose sessions: the cache already gone, a store shared by hosts."""

from __future__ import annotations

import glob
import json
import os
import shutil
import time

import pytest
import redis
import yaml

from harness.backups import restorable
from harness.lab_runs import incident_lab
from harness.playbooks import playbook
from harness.reports import report_path
from harness.sessions import PREFIX, session


@pytest.fixture
def broken_lab(tmp_path):
    """The lab after the incident: snapshot taken, tokens rotated at the provider, snapshot restored."""
    with incident_lab(tmp_path) as lab:
        yield lab


def store(lab):
    return redis.Redis(host='127.0.0.1', port=lab.state['ports']['redis'], socket_timeout=10)


def sessions(lab) -> dict:
    client = store(lab)
    keys = list(client.scan_iter(match=PREFIX + '*', count=5000))
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hgetall(key)
    return dict(zip(keys, pipe.execute()))


def write_inventory(path, hosts: dict) -> str:
    path.write_text(yaml.safe_dump({'all': {'children': {'vllm': {'hosts': hosts}}}}))
    return str(path)


def test_runbook_completes_when_the_token_cache_is_already_gone(broken_lab, tmp_path):
    os.unlink(broken_lab.cache_path)
    host = broken_lab.inventory(str(tmp_path / 'reports'))['all']['children']['vllm']['hosts']['lab']
    inventory = write_inventory(tmp_path / 'inventory.yml', {'lab': host})
    before = sessions(broken_lab)
    rc, output = playbook(inventory, 'dr_restore.yml')
    assert rc == 0, output[-3000:]
    report = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    # the running gateway rebuilds a missing cache when the probe reaches it, as vLLM does: that new cache, if the
    # purge found it, was backed up (privately) before it went
    assert all(os.stat(path).st_mode & 0o777 == 0o600 for path in report['purge']['cache_backups']), report['purge']
    assert len(report['purge']['cache_backups']) <= 1 and report['purge']['sessions_deleted'] > 0
    backup = report['purge']['sessions_backup']
    assert os.stat(os.path.dirname(backup)).st_mode & 0o777 == 0o700
    rc, output = playbook(inventory, 'dr_rollback.yml', '-e', f'vllm_dr_rollback_dir={report["purge"]["backup_dir"]}')
    assert rc == 0, output[-3000:]
    after = sessions(broken_lab)
    service = (PREFIX + 'svc').encode()
    assert {k: v for k, v in after.items() if k != service} == {k: v for k, v in before.items() if k != service}


@pytest.mark.slow
def test_three_hosts_sharing_one_store_sweep_it_once_and_a_rollback_brings_every_session_back(broken_lab, tmp_path):
    client = store(broken_lab)
    now = time.time()
    pipe = client.pipeline(transaction=False)
    for i in range(20000):
        pipe.hset(f'{PREFIX}old{i}', mapping=session(f'old{i}', str(int(now - 7200 - i))))
    pipe.execute()
    before = sessions(broken_lab)
    template = broken_lab.inventory(str(tmp_path / 'reports'))['all']['children']['vllm']['hosts']['lab']
    hosts = {}
    for name in ('lab1', 'lab2', 'lab3'):
        # three replicas of one service: each its own cache and configuration, one session store
        own = tmp_path / name
        own.mkdir()
        shutil.copy2(broken_lab.cache_path, own / 'token_cache.db')
        shutil.copy2(broken_lab.config_path, own / 'vllm.yaml')
        hosts[name] = dict(template, vllm_dr_cache_path=str(own / 'token_cache.db'), vllm_dr_config_path=str(own / 'vllm.yaml'))
        if name != 'lab1':  # one lab gateway stands for the three services: it restarts once
            hosts[name]['vllm_dr_restart_command'] = 'true'
    inventory = write_inventory(tmp_path / 'inventory.yml', hosts)
    rc, output = playbook(inventory, 'dr_restore.yml', '--tags', 'purge', '-e', 'vllm_dr_sweep_select=expired')
    assert rc == 0, output[-3000:]
    assert output.count('the session store is shared with lab1, which swept it') == 2
    backups = glob.glob(str(tmp_path / 'lab' / 'backups' / '*' / 'sessions.jsonl'))
    assert len(backups) == 1 and '-lab1-' in backups[0]
    run_dirs = os.listdir(tmp_path / 'lab' / 'backups')
    assert len(run_dirs) == len(set(run_dirs)) == 3, 'every host has a run directory of its own'
    gone = set(before) - set(sessions(broken_lab))
    assert len(gone) >= 20000 and set(restorable(*backups)) == gone

    rc, output = playbook(inventory, 'dr_rollback.yml', '--limit', 'lab1',
                          '-e', f'vllm_dr_rollback_dir={os.path.dirname(backups[0])}')
    assert rc == 0, output[-3000:]
    assert sessions(broken_lab) == before


def test_a_report_that_cannot_be_written_fails_the_run_and_the_fleet_report_stays_beside_it(broken_lab, tmp_path):
    """The target's report directory cannot be made (its parent is a file, which stops root too): the run recovers
    the lab but fails, the fleet report says why, and nothing is written under $HOME, which the user never named."""
    blocker = tmp_path / 'not-a-directory'
    blocker.write_text('')
    host = broken_lab.inventory(str(blocker / 'reports'))['all']['children']['vllm']['hosts']['lab']
    inventory = write_inventory(tmp_path / 'inventory.yml', {'lab': host})
    home = tmp_path / 'home'
    home.mkdir()
    rc, output = playbook(inventory, 'dr_restore.yml', env=dict(os.environ, HOME=str(home)))
    assert rc != 0, output[-3000:]
    assert 'fleet: PASSED' not in output
    assert f'the parent of path {blocker / "reports"} is not a directory; choose another path' in output
    assert not [path for path in home.rglob('*') if 'fleet' in path.name or path.name.endswith('.json')], \
        'no report under $HOME: the fleet report goes beside the targets\' reports'
    assert not (home / '.local').exists()

    fleet_dir = tmp_path / 'fleet'
    rc, output = playbook(inventory, 'dr_restore.yml', '-e', f'vllm_dr_fleet_report_dir={fleet_dir}',
                          env=dict(os.environ, HOME=str(home)))
    assert rc != 0, output[-3000:]
    fleet = json.loads((fleet_dir / 'fleet.json').read_text())
    assert fleet['passed'] is False and fleet['failed'] == ['lab']
    assert "failed at step 'Write the report" in fleet['targets'][0]['reason']
    assert f'{blocker / "reports"} is not a directory' in fleet['targets'][0]['reason']
