"""The run lock on the host platform, in the lab's Redis: one run at a time (runbook, rollback, drill, detection's
repair), given back at the end on every path, renewed before each change (a run that lost it stops before its next
change), expiring after a crash, broken by vllm_dr_force_unlock only when its holder is dead or named, never taken in
check mode; three runs (slow, forced, re-run after a kill -9) never change the target at once."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time

import pytest
import redis

from harness.change_times import Run, moment, overlaps
from harness.lab_runs import incident_lab, running_lab
from harness.playbooks import playbook
from harness.reports import report_path
from harness.sessions import dump_redis
from test_runbook import digest, lab_state, store, with_inventory

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


def hold(lab, owner: str = OTHER, seconds: float = 600, renewed_ago: float = 5) -> float:
    """Another run's lock, as vllm_run_lock writes it, taken 5 s ago and renewed `renewed_ago` s ago (a run that
    stopped renewing it longer ago than vllm_dr_lock_stale_after, 600 s, is dead); returns when it was taken."""
    taken = time.time() - max(5, renewed_ago)
    record = {'holder': owner, 'acquired_at': taken, 'renewed_at': time.time() - renewed_ago}
    store(lab).set(KEY, json.dumps(record), px=int(seconds * 1000))
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


def test_force_unlock_breaks_the_lock_of_a_dead_run_and_names_it(lab):
    hold(lab, renewed_ago=700)
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


def test_force_unlock_refuses_a_run_still_renewing_its_lock_unless_its_holder_is_named(lab):
    hold(lab, renewed_ago=20)
    before = lab_state(lab)
    rc, output = run(lab, '-e', 'vllm_dr_force_unlock=true')
    assert rc != 0
    line = re.search(r'"msg": ("the run lock vllm_dr:lock:vllm-dr in Redis is held by (?:[^"\\]|\\.)*")', output)
    assert line, output[-3000:]
    message = json.loads(line.group(1))
    assert re.fullmatch(
        rf'the run lock vllm_dr:lock:vllm-dr in Redis is held by {re.escape(OTHER)}, which renewed it (\d+) s ago '
        r'\(taken \S+Z\): that run is still working, so vllm_dr_force_unlock=true does not take its lock \(a holder '
        r'counts as dead once it has not renewed for 600 s\); wait for it to end, or, to stop it before its next '
        rf'change, re-run with vllm_dr_force_unlock=true and vllm_dr_force_unlock_holder="{re.escape(OTHER)}"',
        message), message
    assert 20 <= int(re.search(r'renewed it (\d+) s ago', message).group(1)) < 600
    assert lab_state(lab) == before and holder(lab) == OTHER

    # the holder's name has spaces: given as JSON
    rc, output = run(lab, '-e', 'vllm_dr_force_unlock=true', '-e', json.dumps({'vllm_dr_force_unlock_holder': OTHER}))
    assert rc == 0, output[-3000:]
    assert 'removed the lock of ' + OTHER in output
    assert store(lab).exists(KEY) == 0 and lab.refresh('svc')[0] == 200


def _sessions_config_and_service(lab) -> dict:
    """What a run changes after its cache purge: the sessions, the configuration, the running service."""
    return {'store': dump_redis(store(lab)), 'config': digest(lab.config_path), 'gateway_pid': lab.state['pids']['gateway']}


@pytest.mark.parametrize('how', ['taken', 'expired'])
def test_a_run_that_lost_its_lock_stops_before_its_next_change_with_one_line_and_fails(lab, how):
    before = _sessions_config_and_service(lab)
    client = store(lab)

    def mine() -> bool:
        raw = client.get(KEY)
        return raw is not None and json.loads(raw)['holder'] != OTHER

    def lose() -> None:
        # as soon as the run took its lock: another run forces it, or it expires
        if how == 'taken':
            client.set(KEY, json.dumps({'holder': OTHER, 'acquired_at': time.time(), 'renewed_at': time.time()}),
                       px=600000)
        else:
            client.delete(KEY)

    watcher = threading.Thread(target=lambda: _when(mine, lose), daemon=True)
    watcher.start()
    rc, output = run(lab)
    watcher.join(timeout=5)
    assert rc != 0
    why = rf'{re.escape(OTHER)} took it at \S+Z' if how == 'taken' else \
        r'it expired \(no renewal within its duration\) and nobody holds it now'
    line = re.search(r'"msg": "(the run lock vllm_dr:lock:vllm-dr in Redis is no longer held [^"]*)"', output)
    assert line and re.fullmatch(
        r'the run lock vllm_dr:lock:vllm-dr in Redis is no longer held by this run \(\S+@\S+ run [0-9a-f]{12}\): '
        + why + r'; stopped before the next change \(the configuration edit\) so that two runs never change the '
        r'target at once; check what the other run did, then re-run', line.group(1)), output[-3000:]
    # nothing after the loss: the configuration, the sessions and the running service are as they were
    assert _sessions_config_and_service(lab) == before
    assert 'TASK [inferops.vllm_dr.purge : Set session_state_store.refresh_on_startup to true]' not in output
    # the other run's lock is left to it; an expired one stays gone
    assert holder(lab) == (OTHER if how == 'taken' else None)
    assert re.search(r'lab\s+:.*failed=1', output), output[-1500:]


def _when(condition, action, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            action()
            return
        time.sleep(0.02)


@pytest.mark.parametrize('name, extra, passes', [
    ('dr_detect.yml', ('-e', 'vllm_dr_auto_repair=true'), True),
    ('dr_detect.yml', ('-e', 'vllm_dr_auto_repair=true', '-e', 'vllm_dr_restart_command=false'), False),
    # under --check the probe is skipped, so detection cannot tell and fails: no lock either way
    ('dr_detect.yml', ('-e', 'vllm_dr_auto_repair=true', '--check'), None),
    ('dr_drill.yml', (), True),
    ('dr_drill.yml', ('-e', 'vllm_dr_restart_command=false'), False),
    ('dr_restore.yml', ('-e', 'vllm_dr_report_dir={tmp}/not-a-directory/reports'), None),
], ids=['detect-repair', 'detect-repair-fails', 'detect-check', 'drill', 'drill-fails', 'restore-report-not-written'])
def test_every_playbook_that_takes_the_lock_gives_it_back_on_every_path(tmp_path, name, extra, passes):
    # the drill breaks a healthy target itself; the others start from the incident
    with (running_lab(tmp_path) if name == 'dr_drill.yml' else incident_lab(tmp_path)) as lab:
        _gives_the_lock_back(with_inventory(lab, tmp_path), tmp_path, name, extra, passes)


def _gives_the_lock_back(lab, tmp_path, name, extra, passes):
    (tmp_path / 'not-a-directory').write_text('')
    extra = tuple(part.format(tmp=tmp_path) for part in extra)
    seen = []

    def locked() -> bool:
        try:
            return bool(store(lab).exists(KEY))
        except redis.RedisError:  # the drill restores the store: Redis restarts meanwhile
            return False

    watcher = threading.Thread(target=lambda: _when(locked, lambda: seen.append(holder(lab))), daemon=True)
    watcher.start()
    rc, output = playbook(lab.inventory_path, name, *extra)
    if passes is not None:
        assert (rc == 0) == passes, output[-3000:]
    if '--check' in extra:
        taken = re.search(TAKE, output)
        assert taken is None or taken.group(1) == 'skipping'
    else:
        # the lock was taken by this run, and given back
        assert re.search(TAKE, output).group(1) == 'changed', output[-3000:]
        assert seen and re.fullmatch(r'\S+@\S+ run [0-9a-f]{12}', seen[0]), seen
        assert re.search(GIVE_BACK, output).group(1) == 'changed', output[-3000:]
    assert store(lab).exists(KEY) == 0


def test_three_runs_slow_forced_and_rerun_after_a_kill_never_change_the_target_at_once(lab, tmp_path):
    times = str(tmp_path / 'change-times.jsonl')
    restart = lab.inventory(str(lab.reports))['all']['children']['vllm']['hosts']['lab']['vllm_dr_restart_command']
    # the slow run: its restart takes 120 s (it is killed before it ends)
    slow = Run('slow', lab.inventory_path, times, 'dr_restore.yml',
               '-e', json.dumps({'vllm_dr_restart_command': f"sh -c 'sleep 120; {restart}'"}))
    _when(lambda: slow.process.poll() is not None or any(
        event['task'].endswith(': Restart the service with the configured command') for event in slow.events()),
        lambda: None, timeout=300)
    assert slow.process.poll() is None, slow.wait()[1][-3000:]

    # the forced run, while the slow one still renews its lock: refused before any change
    forced = Run('forced', lab.inventory_path, times, 'dr_restore.yml', '-e', 'vllm_dr_force_unlock=true')
    rc, forced_output = forced.wait()
    assert rc != 0
    assert re.search(r'"msg": "the run lock vllm_dr:lock:vllm-dr in Redis is held by \S+@\S+ run [0-9a-f]{12}, '
                     r'which renewed it \d+ s ago \(taken \S+Z\): that run is still working', forced_output), \
        forced_output[-3000:]
    assert slow.process.poll() is None, 'the slow run ended before it was killed'

    # kill -9 of the slow run, in its restart; its lock stays behind, renewed no more
    slow.kill()
    dead = json.loads(store(lab).get(KEY))

    # the killed run purged the cache, edited the configuration and swept, but never restarted: the cache is stale
    # again (the snapshot's, as after a second restore), so that the re-run has changes of its own to make
    shutil.copy2(os.path.join(lab.dir, 'snapshot', 'token_cache.db'), lab.cache_path)

    # the re-run names the dead run; once it has not renewed its lock for 20 s, vllm_dr_force_unlock takes it
    rc, output = playbook(lab.inventory_path, 'dr_restore.yml')
    assert rc != 0 and f'is held by {dead["holder"]} since' in output, output[-3000:]
    while time.time() - dead['renewed_at'] < 25:
        time.sleep(0.5)
    rerun = Run('rerun', lab.inventory_path, times, 'dr_restore.yml', '-e', 'vllm_dr_force_unlock=true',
                '-e', 'vllm_dr_lock_stale_after=20', '-e', 'vllm_dr_force=true')
    rc, output = rerun.wait()
    assert rc == 0, output[-3000:]
    assert 'removed the lock of ' + dead['holder'] in output
    assert store(lab).exists(KEY) == 0 and lab.refresh('svc')[0] == 200

    runs = [slow, forced, rerun]
    table = [f'{run.name:7} {moment(start)} - {moment(end)}  {task}' for run in runs for start, end, task in run.changes()]
    table.append(f'slow    killed at {moment(slow.killed_at)}')
    forced_times = [event['t'] for event in forced.events()]
    table.append(f'forced  ran {moment(min(forced_times))} - {moment(max(forced_times))}, refused: no change')
    print('\nchanges to the target (UTC):\n' + '\n'.join(table))
    with open(os.path.join(str(tmp_path), 'change-times.txt'), 'w', encoding='utf-8') as handle:
        handle.write('\n'.join(table) + '\n')
    assert slow.changes() and rerun.changes() and not forced.changes(), table
    assert overlaps(runs) == [], table
    assert max(change[1] for change in slow.changes()) <= slow.killed_at <= min(change[0] for change in rerun.changes())
