"""The run lock on the host platform, in the lab's Redis: one run at a time (runbook or rollback), given back at the
end also on failure, expiring after a crash, broken by vllm_dr_force_unlock, never taken in check mode."""

from __future__ import annotations

import json
import re
import time

import pytest

from harness.lab_runs import incident_lab
from harness.playbooks import playbook
from harness.reports import report_path
from test_runbook import lab_state, store, with_inventory

KEY = b'vllm_dr:lock:vllm-dr'
OTHER = 'bob@other-controller run 0123456789ab'
TAKE = r'TASK \[inferops\.vllm_dr\.purge : Hold the run lock of the target: acquired\] \*+\n(\w+): \[lab\]'
GIVE_BACK = r'TASK \[inferops\.vllm_dr\.purge : Hold the run lock of the target: released\] \*+\n(\w+): \[lab\]'


@pytest.fixture
def lab(tmp_path):
    with incident_lab(tmp_path) as lab:
        yield with_inventory(lab, tmp_path)


def run(lab, *extra):
    return playbook(lab.inventory_path, 'dr_restore.yml', *extra)


def hold(lab, owner: str = OTHER, seconds: float = 600) -> float:
    """Another run's lock, as vllm_run_lock writes it; returns when it was taken."""
    taken = time.time() - 5
    store(lab).set(KEY, json.dumps({'holder': owner, 'acquired_at': taken}), px=int(seconds * 1000))
    return taken


def holder(lab):
    raw = store(lab).get(KEY)
    return json.loads(raw)['holder'] if raw else None


def test_a_second_run_refuses_with_one_line_naming_the_holder_and_changes_nothing(lab):
    taken = hold(lab)
    before = lab_state(lab)
    rc, output = run(lab)
    assert rc != 0
    since = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(taken))
    line = re.search(r'"msg": "(the run lock vllm_dr:lock:vllm-dr in Redis is held by [^"]*)"', output)
    assert line, output[-3000:]
    assert line.group(1).count('\n') == 0 and re.fullmatch(
        rf'the run lock vllm_dr:lock:vllm-dr in Redis is held by {re.escape(OTHER)} since {since}, until '
        r'\S+Z \(expires in (\d+) s\): another recovery run is working on this target; wait for it to end, or, '
        r'if that run is dead, wait until the lock expires or re-run with vllm_dr_force_unlock=true', line.group(1))
    left = int(re.search(r'expires in (\d+) s', line.group(1)).group(1))
    assert 300 < left <= 600
    assert lab_state(lab) == before
    assert holder(lab) == OTHER
    assert not re.search(GIVE_BACK, output)


def test_the_run_takes_the_lock_before_the_purge_and_gives_it_back_at_the_end(lab):
    rc, output = run(lab)
    assert rc == 0, output[-3000:]
    assert re.search(TAKE, output).group(1) == 'changed'
    assert output.index('Hold the run lock of the target: acquired') < output.index('Purge the token cache, keeping a backup')
    assert re.search(GIVE_BACK, output).group(1) == 'changed'
    assert store(lab).exists(KEY) == 0
    assert lab.refresh('svc')[0] == 200


def test_the_lock_of_a_crashed_run_expires_and_the_next_run_takes_it(lab):
    hold(lab, seconds=1)
    time.sleep(1.2)
    rc, output = run(lab)
    assert rc == 0, output[-3000:]
    assert re.search(TAKE, output).group(1) == 'changed'
    assert store(lab).exists(KEY) == 0


def test_force_unlock_breaks_the_lock_of_another_run_and_names_it(lab):
    hold(lab)
    rc, output = run(lab, '-e', 'vllm_dr_force_unlock=true')
    assert rc == 0, output[-3000:]
    assert re.search(r'\[WARNING\]: the run lock vllm_dr:lock:vllm-dr in Redis: removed the lock of '
                     + re.escape(OTHER) + r' \(taken \S+Z, expiring \S+Z\) by force', output), output[-3000:]
    assert store(lab).exists(KEY) == 0


def test_check_mode_takes_no_lock_and_runs_while_another_run_holds_it(lab):
    hold(lab)
    rc, output = run(lab, '--check')
    assert rc == 0, output[-3000:]
    assert re.search(TAKE, output).group(1) == 'skipping'
    assert holder(lab) == OTHER


def test_a_failed_run_gives_the_lock_back(lab):
    # the restart fails: after the purge and the sweep, with the lock held
    rc, output = run(lab, '-e', 'vllm_dr_restart_command=false')
    assert rc != 0
    assert re.search(TAKE, output).group(1) == 'changed'
    assert re.search(GIVE_BACK, output).group(1) == 'changed', output[-3000:]
    assert store(lab).exists(KEY) == 0


def test_a_rollback_holds_the_lock_too_and_refuses_while_a_run_holds_it(lab):
    rc, output = run(lab)
    assert rc == 0, output[-3000:]
    run_dir = json.loads(report_path(lab.reports, 'lab.json').read_text())['purge']['backup_dir']
    rollback = ('dr_rollback.yml', '-e', f'vllm_dr_rollback_dir={run_dir}')

    # another run holds the target: the rollback puts nothing back and names it in one line
    hold(lab)
    before = lab_state(lab)
    rc, output = playbook(lab.inventory_path, *rollback)
    assert rc != 0
    assert re.search(r'"msg": "the run lock vllm_dr:lock:vllm-dr in Redis is held by ' + re.escape(OTHER)
                     + r' since \S+Z, until \S+Z \(expires in \d+ s\): another recovery run', output), output[-3000:]
    assert lab_state(lab) == before
    assert holder(lab) == OTHER

    # free again: the rollback takes the lock before its first change and gives it back at its end
    store(lab).delete(KEY)
    rc, output = playbook(lab.inventory_path, *rollback)
    assert rc == 0, output[-3000:]
    assert re.search(TAKE, output).group(1) == 'changed'
    assert output.index('Hold the run lock of the target: acquired') < output.index('TASK [Put the token cache back]')
    assert re.search(GIVE_BACK, output).group(1) == 'changed', output[-3000:]
    assert store(lab).exists(KEY) == 0
