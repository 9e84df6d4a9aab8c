"""Deletes the store refuses are never recorded as deleted: the backup's deleted set is what left the store.

Real servers on loopback: Redis with an ACL user that lacks UNLINK or HMGET, a read-only
replica given as the target, and etcd with a user who may only read. Each sweep fails, the
store stays intact, and the backup (read by its documented format) says no session was deleted.
"""

from __future__ import annotations

import json
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep
from harness.backups import restorable
from harness.modules import run_module
from harness.servers import EtcdServer, RedisServer
from harness.sessions import ETCD_PREFIX, dump_redis, seed_redis

ADMIN = ('admin', 'admin-secret')
# Everything a sweep needs (see test_session_sweep_topologies.SWEEPER_ACL), then one command taken away.
SWEEPER = ('user sweeper on >sweeper-secret ~vllm:session:* resetchannels -@all '
           '+ping +hello +scan +evalsha +script|load +script|exists +type +pttl '
           '+hgetall +get +hget +hmget +unlink +exists +hset +set +pexpireat +time')


def sweep(capsys, backup, **args):
    return run_module(vllm_session_sweep, dict(args, state='swept', backup_path=str(backup), batch_size=100), capsys)


def deleted_by_the_backup(backup):
    return set(restorable(backup)) if backup.exists() else set()


@pytest.mark.parametrize('missing', ['unlink', 'hmget'])
def test_acl_user_without_a_delete_command_deletes_nothing_and_the_backup_says_so(capsys, tmp_path, missing):
    with RedisServer(workdir=str(tmp_path / 'redis'), admin=ADMIN,
                     config=['user default off', f'{SWEEPER} -{missing}']) as server:
        client = server.client()
        seed_redis(client, expired=2000, valid=50)
        before = dump_redis(client)
        backup = tmp_path / 'b.jsonl'
        result = sweep(capsys, backup, login_host='127.0.0.1', login_port=server.port, login_user='sweeper',
                       login_password='sweeper-secret')
        assert result['failed'] is True and 'no session was deleted' in result['msg'], result['msg']
        assert result['deleted'] == 0
        assert dump_redis(client) == before
        assert deleted_by_the_backup(backup) == set(), 'the backup claims sessions this run never removed'


def test_read_only_replica_as_the_target_deletes_nothing_and_the_backup_says_so(capsys, tmp_path):
    with RedisServer(workdir=str(tmp_path / 'primary')) as primary, \
            RedisServer(workdir=str(tmp_path / 'replica')) as replica:
        seed_redis(primary.client(), expired=2000, valid=50)
        replica.client().replicaof('127.0.0.1', primary.port)
        deadline = time.monotonic() + 20
        while replica.client().dbsize() != 2050 and time.monotonic() < deadline:
            time.sleep(0.1)
        before = dump_redis(replica.client())
        backup = tmp_path / 'b.jsonl'
        result = sweep(capsys, backup, login_host='127.0.0.1', login_port=replica.port)
        assert result['failed'] is True and 'read-only replica' in result['msg'], result['msg']
        assert 'no session was deleted' in result['msg'] and result['deleted'] == 0
        assert dump_redis(replica.client()) == before == dump_redis(primary.client())
        assert deleted_by_the_backup(backup) == set()


def test_etcd_user_who_may_only_read_deletes_nothing_and_the_backup_says_so(capsys, tmp_path):
    with EtcdServer(workdir=str(tmp_path / 'etcd')) as server:
        now = time.time()
        for i in range(300):
            server.put(f'{ETCD_PREFIX}e{i}', json.dumps({'refresh_token': f'rt-e{i}-SECRET', 'expires_at': int(now - 60)}))
        server.enable_auth({'reader': ('reader-pass', {ETCD_PREFIX: 'READ'})})
        before = server.keys(ETCD_PREFIX)
        backup = tmp_path / 'b.jsonl'
        result = sweep(capsys, backup, backend='etcd', etcd_endpoints=[server.url], etcd_user='reader',
                       etcd_password='reader-pass')
        assert result['failed'] is True and 'denied deleting or writing' in result['msg'], result['msg']
        assert 'no session was deleted' in result['msg'] and result['deleted'] == 0
        assert server.keys(ETCD_PREFIX) == before
        assert deleted_by_the_backup(backup) == set(), 'the backup claims sessions this run never removed'
        assert 'SECRET' not in json.dumps(result)
