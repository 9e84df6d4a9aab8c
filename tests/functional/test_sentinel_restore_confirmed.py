"""A restore behind Sentinels is confirmed as the sweep's deletes are: WAIT for every replica, and ROLE.

Real redis-server (a primary and a replica) and redis-sentinel on loopback. A replica that
stops answering (SIGSTOP) cannot hold the restored sessions; the restore says so and asks for
a re-run instead of reporting sessions a failover would lose. Once it answers again, the
re-run restores the rest and the replica holds every session.
"""

from __future__ import annotations

import os
import signal
import time

from harness.backups import restorable
from harness.module_process import run_sweep
from harness.servers import RedisServer, SentinelServer
from harness.sessions import PREFIX, session
from harness.sessions import dump_hashes as sessions

SESSIONS = 300


def wait_online(primary, replica, timeout: float = 30.0) -> None:
    """Until the primary lists the replica in ROLE: a replica still in its first sync is not counted by WAIT."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        role = primary.client().execute_command('ROLE')
        if any(int(entry[1]) == replica.port for entry in role[2]):
            return
        time.sleep(0.1)
    raise AssertionError(f'the replica on port {replica.port} did not come online within {timeout} s')


def test_restore_not_confirmed_by_the_replicas_fails_and_a_rerun_finishes(tmp_path):
    with RedisServer(workdir=str(tmp_path / 'primary')) as primary, \
            RedisServer(workdir=str(tmp_path / 'replica')) as replica:
        replica.client().replicaof('127.0.0.1', primary.port)
        wait_online(primary, replica)
        with SentinelServer(primary, workdir=str(tmp_path / 'sentinel')) as sentinel:
            pipe = primary.client().pipeline(transaction=False)
            for i in range(SESSIONS):
                pipe.hset(f'{PREFIX}e{i}', mapping=session(f'e{i}', str(int(time.time() - 3600))))
            pipe.execute()
            original = sessions(primary.client())
            backup = tmp_path / 'sessions.jsonl'
            args = dict(backend='redis_sentinel', sentinel_hosts=[f'127.0.0.1:{sentinel.port}'],
                        sentinel_service_name='mymaster', backup_path=str(backup), timeout=3)
            swept = run_sweep(tmp_path, None, state='swept', **args)
            assert swept['_rc'] == 0 and swept['deleted'] == SESSIONS, swept.get('msg')
            assert set(restorable(backup)) == set(original)

            os.kill(replica.process.pid, signal.SIGSTOP)
            try:
                stuck = run_sweep(tmp_path, None, state='restored', **args)
            finally:
                os.kill(replica.process.pid, signal.SIGCONT)
            assert stuck['_rc'] == 1, 'a restore the replica never took reported success'
            assert '\n' not in stuck['msg'] and 'did not confirm the restored sessions' in stuck['msg'], stuck['msg']
            assert f'127.0.0.1:{primary.port}' in stuck['msg'] and 're-run the restore' in stuck['msg']

            back = run_sweep(tmp_path, None, state='restored', **args)
            assert back['_rc'] == 0, back.get('msg')
            assert sessions(primary.client()) == original
            assert sessions(replica.client()) == original
