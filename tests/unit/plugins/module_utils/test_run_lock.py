"""The run lock in a real Redis and a real etcd: taken once, refused to a second run with one line, given back only by
its owner, expiring after a crash, taken by one of two racing runs only, broken by force."""

from __future__ import annotations

import re
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils import _run_lock
from ansible_collections.inferops.vllm_dr.plugins.module_utils._run_lock import (
    LockHeld, LockLost, acquire, current_time, hold, release)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_run_lock
from harness.modules import run_module
from harness.servers import EtcdServer, RedisServer

ALICE = 'alice@ctl run 0000aaaa'
BOB = 'bob@ctl run 1111bbbb'
REFUSAL = (r'the run lock {where} is held by alice@ctl run 0000aaaa since \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ, '
           r'until \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(expires in \d+ s\): another recovery run is working on this '
           r'target; wait for it to end, or, if that run is dead, wait until the lock expires or re-run with '
           r'vllm_dr_force_unlock=true')


def _params(**values) -> dict:
    params = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}
    params.update(lock='store', name='t', namespace=None, k8s_auth={}, duration=60)
    params.update(values)
    return params


@pytest.fixture(params=['redis', 'etcd'])
def store_params(request, tmp_path):
    """Lock options for a real store, with a lock name of its own per test (the etcd server is shared)."""
    name = f't{time.monotonic_ns()}'
    if request.param == 'redis':
        server = request.getfixturevalue('redis_server')
        return _params(login_host='127.0.0.1', login_port=server.port, name=name)
    server = request.getfixturevalue('etcd_server')
    return _params(backend='etcd', etcd_endpoints=[server.url], name=name)


def _lock(params):
    lock, store = _run_lock.open_lock(params)
    return lock, store


def _where(lock) -> str:
    return re.escape(lock.where[len('the run lock '):])


def test_a_second_run_is_refused_with_one_line_naming_the_holder_and_the_times(store_params):
    lock, store = _lock(store_params)
    try:
        taken = acquire(lock, ALICE, 60, current_time())
        assert taken['action'] == 'acquired' and taken['holder']['owner'] == ALICE
        with pytest.raises(LockHeld) as refused:
            acquire(lock, BOB, 60, current_time())
        message = str(refused.value)
        assert '\n' not in message
        assert re.fullmatch(REFUSAL.format(where=_where(lock)), message), message
        left = int(re.search(r'expires in (\d+) s', message).group(1))
        assert 55 <= left <= 60
        assert lock.read().owner == ALICE
    finally:
        store.close()


def test_the_owner_renews_its_lock_and_keeps_the_moment_it_took_it(store_params):
    lock, store = _lock(store_params)
    try:
        first = acquire(lock, ALICE, 30, current_time())
        again = acquire(lock, ALICE, 60, current_time())
        assert again['action'] == 'renewed'
        assert again['holder']['acquired_at'] == first['holder']['acquired_at']
        assert lock.read().expires_at - current_time() > 40
    finally:
        store.close()


def test_only_the_owner_releases_the_lock(store_params):
    lock, store = _lock(store_params)
    try:
        acquire(lock, ALICE, 60, current_time())
        assert release(lock, BOB, current_time())['action'] == 'held_by_other'
        assert lock.read().owner == ALICE
        assert release(lock, ALICE, current_time())['action'] == 'released'
        assert lock.read() is None
        assert release(lock, ALICE, current_time())['action'] == 'absent'
    finally:
        store.close()


def test_the_lock_of_a_crashed_run_expires_and_the_next_run_takes_it(store_params):
    lock, store = _lock(store_params)
    try:
        acquire(lock, ALICE, 1, current_time())
        deadline = time.monotonic() + 10
        while True:
            try:
                taken = acquire(lock, BOB, 60, current_time())
                break
            except LockHeld:
                assert time.monotonic() < deadline, 'the lock never expired'
                time.sleep(0.25)
        assert taken['action'] in ('acquired', 'taken_over')
        assert lock.read().owner == BOB
    finally:
        store.close()


def test_of_two_runs_taking_one_expired_lock_only_one_gets_it(store_params):
    lock, store = _lock(store_params)
    try:
        acquire(lock, ALICE, 60, current_time())
        seen = lock.read()
        # both read the same lock (as if it had expired), then both try to replace it
        lock.replace(seen, BOB, 60, current_time(), current_time())
        with pytest.raises(LockHeld) as lost:
            lock.replace(seen, 'carol@ctl run 2222cccc', 60, current_time(), current_time())
        assert lost.value.holder.owner == BOB
        assert lock.read().owner == BOB
        # the loser cannot delete the winner's lock with what it read either
        lock.delete(seen)
        assert lock.read().owner == BOB
    finally:
        store.close()


def test_force_takes_over_or_removes_the_lock_of_a_run_that_stopped_renewing_it(store_params):
    lock, store = _lock(store_params)
    try:
        # taken, and last renewed, 700 s ago: more than stale_after (600), its run is dead
        acquire(lock, ALICE, 1800, current_time() - 700)
        taken = acquire(lock, BOB, 1800, current_time(), force=True)
        assert taken['action'] == 'taken_over' and taken['previous_holder']['owner'] == ALICE
        assert lock.read().owner == BOB
        # BOB renews it (it just took it): removed by hand only when named
        removed = release(lock, 'a human', current_time(), force=True, force_holder=BOB)
        assert removed['action'] == 'released' and removed['previous_holder']['owner'] == BOB
        assert lock.read() is None
    finally:
        store.close()


LIVE = (r'the run lock {where} is held by alice@ctl run 0000aaaa, which renewed it \d+ s ago \(taken '
        r'\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\): that run is still working, so vllm_dr_force_unlock=true does not '
        r'take its lock \(a holder counts as dead once it has not renewed for 600 s\); wait for it to end, or, to '
        r'stop it before its next change, re-run with vllm_dr_force_unlock=true and '
        r'vllm_dr_force_unlock_holder="alice@ctl run 0000aaaa"')


def test_force_refuses_the_lock_of_a_run_still_renewing_it_unless_the_holder_is_named(store_params):
    lock, store = _lock(store_params)
    try:
        # taken 700 s ago, renewed just now: its run is working
        acquire(lock, ALICE, 1800, current_time() - 700)
        hold(lock, ALICE, 1800, current_time())
        for attempt in (lambda: acquire(lock, BOB, 60, current_time(), force=True),
                        lambda: release(lock, 'a human', current_time(), force=True),
                        lambda: acquire(lock, BOB, 60, current_time(), force=True, force_holder='someone else')):
            with pytest.raises(StoreError) as refused:
                attempt()
            assert re.fullmatch(LIVE.format(where=_where(lock)), str(refused.value)), str(refused.value)
            assert lock.read().owner == ALICE
        taken = acquire(lock, BOB, 60, current_time(), force=True, force_holder=ALICE)
        assert taken['action'] == 'taken_over' and lock.read().owner == BOB
    finally:
        store.close()


def test_a_run_renews_its_lock_before_each_change_and_keeps_when_it_took_it(store_params):
    lock, store = _lock(store_params)
    try:
        taken = acquire(lock, ALICE, 5, current_time() - 100)
        renewed = hold(lock, ALICE, 60, current_time(), before='the restart')
        assert renewed['action'] == 'renewed' and renewed['holder']['acquired_at'] == taken['holder']['acquired_at']
        seen = lock.read()
        assert seen.expires_at - current_time() > 40 and current_time() - seen.renewed_at < 5
    finally:
        store.close()


LOST = (r'the run lock {where} is no longer held by this run \(alice@ctl run 0000aaaa\): {why}; stopped before the '
        r'next change \(the restart\) so that two runs never change the target at once; check what the other run '
        r'did, then re-run')


def test_a_run_whose_lock_expired_or_was_taken_stops_before_its_next_change_with_one_line(store_params):
    lock, store = _lock(store_params)
    try:
        acquire(lock, ALICE, 1, current_time())
        deadline = time.monotonic() + 10
        while lock.read() is not None:
            assert time.monotonic() < deadline, 'the lock never expired'
            time.sleep(0.2)
        with pytest.raises(LockLost) as expired:
            hold(lock, ALICE, 60, current_time(), before='the restart')
        why = r'it expired \(no renewal within its duration\) and nobody holds it now'
        assert re.fullmatch(LOST.format(where=_where(lock), why=why), str(expired.value)), str(expired.value)
        assert lock.read() is None

        acquire(lock, ALICE, 60, current_time() - 700)
        acquire(lock, BOB, 60, current_time(), force=True)
        with pytest.raises(LockLost) as taken:
            hold(lock, ALICE, 60, current_time(), before='the restart')
        why = r'bob@ctl run 1111bbbb took it at \S+Z'
        assert re.fullmatch(LOST.format(where=_where(lock), why=why), str(taken.value)), str(taken.value)
        assert lock.read().owner == BOB
    finally:
        store.close()


@pytest.mark.parametrize('renamed, command', [
    (['EVAL', 'EVALSHA'], 'EVALSHA'),
    (['EVALSHA'], 'EVALSHA'),
    (['SCRIPT'], 'SCRIPT'),
])
def test_a_redis_that_cannot_run_the_release_script_is_refused_before_the_lock_is_taken(tmp_path, renamed, command):
    config = [f'rename-command {name} ""' for name in renamed]
    with RedisServer(workdir=str(tmp_path / 'redis'), config=config) as server:
        lock, store = _lock(_params(login_host='127.0.0.1', login_port=server.port))
        try:
            with pytest.raises(StoreError) as refused:
                acquire(lock, ALICE, 60, current_time())
        finally:
            store.close()
        message = str(refused.value)
        assert '\n' not in message
        assert message.startswith(f'the run lock vllm_dr:lock:t in Redis cannot be taken: the Redis server refused '
                                  f'{command} (')
        assert message.endswith(f'so it is not taken with SET NX alone and nothing was changed; remove the '
                                f'rename-command line for {command} from the Redis configuration (EVALSHA and '
                                'SCRIPT must both keep their names) and restart Redis, then re-run'), message
        assert server.client().keys('*') == []


def test_a_redis_user_denied_evalsha_is_refused_with_the_grant_before_the_lock_is_taken(tmp_path):
    admin = ('admin', 'admin-pass')
    config = ['user default off', 'user locker on >locker-pass ~* &* +@all -evalsha']
    with RedisServer(workdir=str(tmp_path / 'redis'), config=config, admin=admin) as server:
        lock, store = _lock(_params(login_host='127.0.0.1', login_port=server.port, login_user='locker',
                                    login_password='locker-pass'))
        try:
            with pytest.raises(StoreError) as refused:
                acquire(lock, ALICE, 60, current_time())
        finally:
            store.close()
        assert re.fullmatch(r'the run lock vllm_dr:lock:t in Redis cannot be taken: the Redis server refused EVALSHA '
                            r'\(.*\); the lock is renewed, released and forced only through EVALSHA and SCRIPT LOAD, so '
                            r'it is not taken with SET NX alone and nothing was changed; grant it to the store user '
                            r'\(ACL SETUSER <user> \+evalsha \+script\|load\), or give login_user a user that has it, '
                            r'then re-run', str(refused.value)), str(refused.value)
        assert server.client().keys('*') == []


@pytest.mark.parametrize('grants, operation', [
    ({'vllm/session/': 'READWRITE'}, 'reading'),
    ({'vllm/session/': 'READWRITE', 'vllm_dr/lock/': 'READ'}, 'deleting or writing'),
])
def test_an_etcd_user_without_rights_on_the_lock_is_told_the_lock_prefix_and_readwrite(tmp_path, grants, operation):
    with EtcdServer(workdir=str(tmp_path / 'etcd')) as server:
        server.enable_auth({'sweeper': ('sweeper-pass', grants)})
        params = _params(backend='etcd', etcd_endpoints=[server.url], etcd_user='sweeper', etcd_password='sweeper-pass')
        lock, store = _lock(params)
        try:
            with pytest.raises(StoreError) as refused:
                acquire(lock, ALICE, 60, current_time())
        finally:
            store.close()
        assert re.fullmatch(
            rf"etcd at \S+ denied {operation} under the prefix 'vllm_dr/lock/' to user 'sweeper' \(.*\); grant its "
            r"role readwrite on that prefix \(etcdctl role grant-permission ROLE --prefix readwrite vllm_dr/lock/\), "
            r"or fix etcd_user", str(refused.value)), str(refused.value)
        assert server.keys('vllm_dr/lock/') == {}


def test_check_mode_takes_and_releases_nothing(store_params):
    lock, store = _lock(store_params)
    try:
        assert acquire(lock, ALICE, 60, current_time(), check_mode=True)['action'] == 'acquired'
        assert lock.read() is None
        acquire(lock, ALICE, 60, current_time())
        assert release(lock, ALICE, current_time(), check_mode=True)['action'] == 'released'
        assert lock.read().owner == ALICE
    finally:
        store.close()


def test_a_key_that_is_no_run_lock_is_refused_not_overwritten(redis_server):
    params = _params(login_host='127.0.0.1', login_port=redis_server.port)
    redis_server.client().set('vllm_dr:lock:t', 'something else')
    lock, store = _lock(params)
    try:
        with pytest.raises(StoreError, match=r'^the run lock vllm_dr:lock:t in Redis holds a value that is not a run '
                                             r'lock; check the lock name, or delete that key if nothing else uses it$'):
            acquire(lock, ALICE, 60, current_time())
    finally:
        store.close()
    assert redis_server.client().get('vllm_dr:lock:t') == b'something else'


def test_the_module_refuses_a_second_owner_and_releases_for_the_first(redis_server, capsys):
    args = {'login_host': '127.0.0.1', 'login_port': redis_server.port, 'owner': ALICE}
    assert run_module(vllm_run_lock, args, capsys)['changed'] is True
    again = run_module(vllm_run_lock, args, capsys)
    assert again['action'] == 'renewed' and again['changed'] is False
    refused = run_module(vllm_run_lock, dict(args, owner=BOB), capsys)
    assert refused['failed'] and refused['holder']['owner'] == ALICE
    assert refused['msg'].startswith('the run lock vllm_dr:lock:vllm-dr in Redis is held by alice@ctl run 0000aaaa')
    released = run_module(vllm_run_lock, dict(args, state='released'), capsys)
    assert released['changed'] is True and redis_server.client().get('vllm_dr:lock:vllm-dr') is None


@pytest.mark.parametrize('args, message', [
    ({'duration': 0}, 'duration 0 is out of range; give the seconds the lock lasts without renewal, 1 to 86400, '
                      'longer than the whole run (default 1800)'),
    ({'lock': 'lease'}, 'lock is lease but all of the following are missing: namespace'),
])
def test_bad_options_fail_with_one_line_before_anything_is_touched(redis_server, capsys, args, message):
    options = {'login_host': '127.0.0.1', 'login_port': redis_server.port, 'owner': ALICE}
    result = run_module(vllm_run_lock, dict(options, **args), capsys)
    assert result['failed'] and result['msg'] == message
    assert redis_server.client().keys('*') == []


def test_hosts_of_one_run_racing_for_the_lock_share_it(store_params):
    lock, store = _lock(store_params)
    try:
        # the other host of the run created the lock between this host's read and its create
        lock.create(ALICE, 60, current_time())
        assert acquire(_Unread(lock), ALICE, 60, current_time())['action'] == 'renewed'
        with pytest.raises(LockHeld):
            acquire(_Unread(lock), BOB, 60, current_time())
    finally:
        store.close()


def test_hosts_of_one_run_renewing_the_lock_at_once_both_keep_it(store_params):
    lock, store = _lock(store_params)
    try:
        acquire(lock, ALICE, 60, current_time())
        seen = lock.read()
        # the other host of the run renewed it between this host's read and its renewal
        hold(lock, ALICE, 60, current_time(), before='the sweep')
        renewed = hold(_ReadOnce(lock, seen), ALICE, 60, current_time(), before='the sweep')
        assert renewed['action'] == 'renewed' and lock.read().owner == ALICE
        # a renewal that lost the lock to another run still stops the run
        lock.replace(lock.read(), BOB, 60, current_time(), current_time())
        with pytest.raises(LockLost):
            hold(_ReadOnce(lock, seen), ALICE, 60, current_time(), before='the sweep')
    finally:
        store.close()


class _ReadOnce:
    """The lock as a host read it before another host changed it: ``seen`` first, then as it is."""

    def __init__(self, lock, seen):
        self._lock, self._seen = lock, [seen]
        self.where = lock.where

    def read(self):
        return self._seen.pop() if self._seen else self._lock.read()

    def replace(self, current, owner, duration, now, acquired_at):
        return self._lock.replace(current, owner, duration, now, acquired_at)


class _Unread:
    """The lock as a host saw it just before another host created it: free."""

    def __init__(self, lock):
        self._lock = lock
        self.where = lock.where

    def read(self):
        return None

    def can_release(self):
        return self._lock.can_release()

    def create(self, owner, duration, now):
        return self._lock.create(owner, duration, now)
