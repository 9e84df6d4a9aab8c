"""The read-only diagnosis asks the store whether its user may do what the sweep and its restore need.

Real servers on loopback: Redis 7 (and Valkey) with ACL users, asked with ACL DRYRUN; etcd with a role that may
only read, asked with a transaction that can never delete. Nothing in the store changes by being asked.
"""

from __future__ import annotations

import json
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_info
from harness.modules import run_module
from harness.servers import STORE_SERVERS, EtcdServer, RedisServer
from harness.sessions import ETCD_PREFIX, dump_redis, seed_redis

ADMIN = ('admin', 'admin-secret')
# what the diagnosis is given: read the sessions, and ask ACL DRYRUN
READS = ('~vllm:session:* resetchannels -@all +ping +hello +info +acl|dryrun +scan +type +pttl +hgetall +get +hget '
         '+hmget +exists +time')
READER = f'user reader on >reader-secret {READS}'
# and what the sweep and its restore need besides (errors.SWEEPER_GRANTS)
SWEEPER = f'user sweeper on >sweeper-secret {READS} +evalsha +script|load +script|exists +unlink +hset +set +pexpireat'


def info(capsys, **args):
    return run_module(vllm_session_info, dict(args, check_permissions=True), capsys)


def redis_user(server, name):
    return dict(login_host='127.0.0.1', login_port=server.port, login_user=name, login_password=f'{name}-secret')


@pytest.mark.parametrize('kind', STORE_SERVERS)
def test_acl_user_that_may_only_read_is_named_with_the_grant_and_the_store_is_unchanged(capsys, tmp_path, kind):
    with RedisServer(workdir=str(tmp_path / 'redis'), admin=ADMIN, kind=kind,
                     config=['user default off', READER, SWEEPER]) as server:
        client = server.client()
        seed_redis(client, expired=20, valid=5)
        before = dump_redis(client)
        reader = info(capsys, **redis_user(server, 'reader'))
        sweeper = info(capsys, **redis_user(server, 'sweeper'))
        assert dump_redis(client) == before
    permissions = reader['permissions']
    assert permissions['checked'] is True, permissions
    assert permissions['missing'] == ['script|load', 'evalsha', 'unlink', 'hset', 'set', 'pexpireat'], permissions
    assert permissions['grant'] == 'ACL SETUSER reader +script|load +evalsha +unlink +hset +set +pexpireat'
    refusal = permissions['refusal']
    assert '\n' not in refusal and 'reader' in refusal and permissions['grant'] in refusal, refusal
    assert sweeper['permissions']['checked'] is True and sweeper['permissions']['missing'] == [], sweeper
    assert sweeper['permissions']['refusal'] is None


def test_acl_user_without_write_access_to_the_session_keys_is_named_with_the_key_grant(capsys, tmp_path):
    keys_read_only = SWEEPER.replace('~vllm:session:*', '%R~vllm:session:*')
    with RedisServer(workdir=str(tmp_path / 'redis'), admin=ADMIN, config=['user default off', keys_read_only]) as server:
        seed_redis(server.client(), expired=3, valid=1)
        result = info(capsys, **redis_user(server, 'sweeper'))
    permissions = result['permissions']
    assert permissions['missing'] == ['keys vllm:session:*'], permissions
    assert permissions['grant'] == 'ACL SETUSER sweeper ~vllm:session:*'


def test_acl_user_that_may_not_run_acl_dryrun_is_reported_unchecked_not_guessed(capsys, tmp_path):
    no_dryrun = READER.replace(' +acl|dryrun', '')
    with RedisServer(workdir=str(tmp_path / 'redis'), admin=ADMIN, config=['user default off', no_dryrun]) as server:
        seed_redis(server.client(), expired=3, valid=1)
        result = info(capsys, **redis_user(server, 'reader'))
    permissions = result['permissions']
    assert permissions['checked'] is False and permissions['refusal'] is None, permissions
    assert 'ACL DRYRUN' in permissions['reason'] and '+acl|dryrun' in permissions['reason'], permissions


def test_etcd_role_that_may_only_read_is_named_with_the_grant_and_nothing_is_deleted(capsys, tmp_path):
    with EtcdServer(workdir=str(tmp_path / 'etcd')) as server:
        now = time.time()
        for i in range(5):
            server.put(f'{ETCD_PREFIX}e{i}', json.dumps({'refresh_token': f'rt-e{i}-SECRET', 'expires_at': int(now - 60)}))
        server.enable_auth({'reader': ('reader-pass', {ETCD_PREFIX: 'READ'}),
                            'sweeper': ('sweeper-pass', {ETCD_PREFIX: 'READWRITE'})})
        before = server.keys(ETCD_PREFIX)
        reader = info(capsys, backend='etcd', etcd_endpoints=[server.url], etcd_user='reader', etcd_password='reader-pass')
        sweeper = info(capsys, backend='etcd', etcd_endpoints=[server.url], etcd_user='sweeper',
                       etcd_password='sweeper-pass')
        assert server.keys(ETCD_PREFIX) == before
    permissions = reader['permissions']
    assert permissions['checked'] is True and permissions['missing'] == [f'readwrite on {ETCD_PREFIX}'], permissions
    assert permissions['grant'] == f'etcdctl role grant-permission <role of reader> readwrite {ETCD_PREFIX} --prefix'
    assert permissions['grant'] in permissions['refusal'] and '\n' not in permissions['refusal']
    assert sweeper['permissions']['missing'] == [] and sweeper['permissions']['refusal'] is None, sweeper
    assert 'SECRET' not in json.dumps([reader, sweeper])
