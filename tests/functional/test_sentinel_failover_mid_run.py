"""A Sentinel failover while the module works: counted from the new primary, never a false success.

Real redis-server (a primary and a replica) and redis-sentinel on loopback, and the same of Valkey 8.1; the failover is
forced with SENTINEL FAILOVER while a sweep of 200k sessions runs (rate-limited) and while
the probe waits for a refresh answer. The old primary stays writable for seconds after it
lost its role; what it takes then is lost when it resyncs.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_connection
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_refresh_probe
from harness.backups import restorable
from harness.json_http import JsonAnswers
from harness.module_process import run_sweep, start_sweep, wait_sweep
from harness.modules import run_module
from harness.servers import RedisServer, SentinelServer
from harness.sessions import PREFIX, session
from harness.sessions import dump_hashes as sessions

SESSIONS = 200_000


def replicated(replica, count, timeout=60.0) -> None:
    deadline = time.monotonic() + timeout
    while replica.client().dbsize() != count:
        assert time.monotonic() < deadline, 'the replica did not catch up'
        time.sleep(0.1)


@contextlib.contextmanager
def serving(handler):
    """An HTTP server with ``handler`` on a free loopback port, in a thread, for the with block."""
    server = http.server.HTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{server.server_port}/v1/auth/refresh'
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def sentinel_pair(tmp_path, store_kind):
    """(primary, replica, sentinel) of each server kind: the replica follows the primary, one Sentinel watches them."""
    with RedisServer(workdir=str(tmp_path / 'primary'), kind=store_kind) as primary, \
            RedisServer(workdir=str(tmp_path / 'replica'), kind=store_kind) as replica:
        replica.client().replicaof('127.0.0.1', primary.port)
        with SentinelServer(primary, workdir=str(tmp_path / 'sentinel')) as sentinel:
            yield primary, replica, sentinel


def sentinel_args(sentinel, **extra):
    args = dict(backend='redis_sentinel', sentinel_hosts=[f'127.0.0.1:{sentinel.port}'],
                sentinel_service_name='mymaster', timeout=15)
    args.update(extra)
    return args


@pytest.mark.slow
def test_failover_mid_sweep_counts_only_what_left_the_new_primary_and_a_rerun_finishes(tmp_path, sentinel_pair):
    primary, replica, sentinel = sentinel_pair
    now = time.time()
    pipe = primary.client().pipeline(transaction=False)
    for i in range(SESSIONS):
        pipe.hset(f'{PREFIX}e{i}', mapping=session(f'e{i}', str(int(now - 3600))))
        if i % 10000 == 9999:
            pipe.execute()
    pipe.execute()
    original = sessions(primary.client())
    replicated(replica, SESSIONS)
    backup = tmp_path / 'sessions.jsonl'

    args = sentinel_args(sentinel, state='swept', backup_path=str(backup), max_rate=20000)
    process = start_sweep(tmp_path, None, **args)
    time.sleep(3)
    assert process.poll() is None, 'the sweep ended before the failover'
    new_port = sentinel.failover()
    assert new_port == replica.port
    failed = wait_sweep(process)

    assert failed['_rc'] == 1, 'a sweep whose primary changed under it reported success'
    assert '\n' not in failed['msg'] and 're-run' in failed['msg']
    assert f'from 127.0.0.1:{primary.port} to 127.0.0.1:{replica.port}' in failed['msg'], failed['msg']
    new_primary = replica.client()
    gone = set(original) - set(sessions(new_primary))
    assert failed['deleted'] == len(gone) and 0 < len(gone) < SESSIONS
    in_backup = set(restorable(backup))
    assert in_backup == gone, f'the backup claims {len(in_backup - gone)} deletes the new primary never saw'

    rerun = run_sweep(tmp_path, None, **sentinel_args(sentinel, state='swept', backup_path=str(backup)))
    assert rerun['_rc'] == 0, rerun.get('msg')
    assert failed['deleted'] + rerun['deleted'] == SESSIONS and new_primary.dbsize() == 0
    assert set(restorable(backup)) == set(original)

    back = run_sweep(tmp_path, None, **sentinel_args(sentinel, state='restored', backup_path=str(backup)))
    assert back['_rc'] == 0 and back['restored'] == SESSIONS, back.get('msg')
    assert sessions(new_primary) == original


class _RotatingEndpoint(JsonAnswers):
    """A refresh endpoint that forces a Sentinel failover, then answers with a rotated refresh token."""

    failover = None
    rotated = 'rt-probe-1-ROTATED-SECRET'

    def do_POST(self):  # pylint: disable=invalid-name
        self.read_body()
        type(self).failover()
        self.answer(200, json.dumps({'access_token': 'at-probe-1-SECRET', 'refresh_token': self.rotated,
                                     'expires_in': 3600}).encode())


def test_failover_during_the_refresh_writes_the_rotated_token_to_the_new_primary(capsys, sentinel_pair):
    primary, replica, sentinel = sentinel_pair
    primary.client().hset(PREFIX + 'probe', mapping=session('probe', str(int(time.time() + 600))))
    replicated(replica, 1)
    ports = []
    _RotatingEndpoint.failover = lambda: ports.append(sentinel.failover())
    with serving(_RotatingEndpoint) as url:
        result = run_module(vllm_refresh_probe, sentinel_args(
            sentinel, url=url, session_id='probe', write_back=True, retries=0, timeout=40), capsys)
    assert ports == [replica.port]
    held = replica.client().hget(PREFIX + 'probe', 'refresh_token')
    assert result.get('written_back') == 'written' and result['_rc'] == 0, result.get('msg')
    assert held == _RotatingEndpoint.rotated.encode(), 'the new primary kept the revoked token'
    assert _RotatingEndpoint.rotated not in json.dumps(result)


class _Rotating(_RotatingEndpoint):
    """The same endpoint without a failover: it only rotates."""

    failover = staticmethod(lambda: None)


def test_a_write_back_the_failover_lost_is_a_failure_naming_where_the_token_went(capsys, tmp_path, monkeypatch):
    """The Sentinels name the other server between the write-back and its confirmation (a failover in that gap)."""
    with RedisServer(workdir=str(tmp_path / 'took')) as took, RedisServer(workdir=str(tmp_path / 'other')) as other, \
            SentinelServer(took, workdir=str(tmp_path / 'sentinel')) as sentinel:
        for server in (took, other):
            server.client().hset(PREFIX + 'probe', mapping=session('probe', str(int(time.time() + 600))))
        named = []
        settled = redis_connection.settled_master

        def failover_after_the_write(*args):
            named.append(settled(*args))
            # connect, then the write-back: the server the Sentinel names; then the new primary
            return named[-1] if len(named) < 3 else ('127.0.0.1', other.port)

        monkeypatch.setattr(redis_connection, 'settled_master', failover_after_the_write)
        with serving(_Rotating) as url:
            result = run_module(vllm_refresh_probe, sentinel_args(
                sentinel, url=url, session_id='probe', write_back=True, retries=0), capsys)
        assert result['_rc'] == 1 and '\n' not in result['msg'], result
        assert f'written to 127.0.0.1:{took.port}' in result['msg'] and f'127.0.0.1:{other.port}' in result['msg']
        assert 'sign it in again' in result['msg']
        assert _Rotating.rotated not in json.dumps(result) and 'SECRET' not in result['msg']
        assert took.client().hget(PREFIX + 'probe', 'refresh_token') == _Rotating.rotated.encode()
        assert other.client().hget(PREFIX + 'probe', 'refresh_token') == b'rt-probe-0-SECRET'
