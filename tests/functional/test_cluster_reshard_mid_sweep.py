"""A Redis Cluster reshard while a sweep runs: what left the store is what the backup says was deleted.

A real 3-primary cluster on loopback (Redis 7.0, and Valkey 8.1); ``redis-cli --cluster reshard``
(``valkey-cli``) moves slots from one
primary to another while a rate-limited sweep works through them. The sweep either finishes
or stops saying that slots moved; either way the count, the store and the backup agree, a
re-run finishes and a restore brings every session back.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from harness.backups import restorable
from harness.module_process import run_sweep, start_sweep, wait_sweep
from harness.servers import LOOPBACK, RedisClusterSet
from harness.sessions import PREFIX, session

SESSIONS = 30_000


def sessions(cluster) -> dict:
    client = cluster.client()
    state = {}
    for node in cluster.nodes:
        server = node.client()
        keys = list(server.scan_iter(match=PREFIX + '*', count=5000))
        state.update(zip(keys, [client.hgetall(key) for key in keys]))
    return state


def node_id(node) -> str:
    return node.client().execute_command('CLUSTER', 'MYID').decode()


def reshard(cluster, source, target, slots: int) -> None:
    subprocess.run([cluster.cli, '--cluster', 'reshard', f'{LOOPBACK}:{cluster.nodes[0].port}',
                    '--cluster-from', node_id(source), '--cluster-to', node_id(target), '--cluster-slots', str(slots),
                    '--cluster-yes', '--cluster-pipeline', '50'], check=True, capture_output=True, timeout=300)


@pytest.mark.slow
def test_reshard_mid_sweep_keeps_count_store_and_backup_equal(tmp_path, store_kind):
    with RedisClusterSet(3, workdir=str(tmp_path / 'cluster'), kind=store_kind) as cluster:
        now = time.time()
        client = cluster.client()
        pipe = client.pipeline(transaction=False)
        for i in range(SESSIONS):
            pipe.hset(f'{PREFIX}e{i}', mapping=session(f'e{i}', str(int(now - 3600))))
        pipe.execute()
        original = sessions(cluster)
        assert len(original) == SESSIONS
        backup = tmp_path / 'sessions.jsonl'
        args = dict(backend='redis_cluster', login_host=LOOPBACK, login_port=cluster.nodes[0].port)

        process = start_sweep(tmp_path, None, state='swept', backup_path=str(backup), batch_size=100, max_rate=3000,
                              **args)
        time.sleep(1)
        reshard(cluster, cluster.nodes[0], cluster.nodes[1], 3000)
        first = wait_sweep(process)

        gone = set(original) - set(sessions(cluster))
        assert first['deleted'] == len(gone), first.get('msg')
        assert set(restorable(backup)) == gone, 'the backup and the store disagree on what was deleted'
        if first['_rc']:
            assert 'slots moved' in first['msg'] and '\n' not in first['msg'], first['msg']
            assert 're-run' in first['msg']

        rerun = run_sweep(tmp_path, None, state='swept', backup_path=str(backup), **args)
        assert rerun['_rc'] == 0, rerun.get('msg')
        assert first['deleted'] + rerun['deleted'] == SESSIONS and not sessions(cluster)
        assert set(restorable(backup)) == set(original)

        back = run_sweep(tmp_path, None, state='restored', backup_path=str(backup), **args)
        assert back['_rc'] == 0 and back['restored'] == SESSIONS, back.get('msg')
        assert sessions(cluster) == original
