"""vllm_session_sweep on a standalone server, with ACL + TLS, Sentinel with a failover, a 3-primary Cluster, and etcd.

Every Redis-protocol topology runs on Redis (Debian's 7.0) and on Valkey 8.1 (``store_kind``); the
result names the server that answered, and where the two answer in other words the test says so.
"""

from __future__ import annotations

import json
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import etcd_store as _etcd_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_partition as _redis_partition
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep
from harness.backups import restorable
from harness.modules import run_module
from harness.servers import STORE_SERVERS, IdpServer, RedisClusterSet, RedisServer, SentinelServer, TlsFiles, tls_missing
from harness.sessions import ETCD_PREFIX, PREFIX, dump_etcd, dump_redis, iso, seed_etcd, seed_redis, session

# What a sweeper needs and nothing more: its own keys, and the commands of the scripts.
SWEEPER_ACL = ('user sweeper on >sweeper-secret ~vllm:session:* resetchannels -@all '
               '+ping +hello +scan +evalsha +script|load +script|exists +type +pttl '
               '+hgetall +get +hget +hmget +unlink +exists +hset +set +pexpireat +time')


def run(capsys, check_mode=False, diff=False, **args):
    return run_module(vllm_session_sweep, args, capsys, check_mode=check_mode, diff=diff)


@pytest.fixture(scope='module')
def tls_files(tmp_path_factory):
    return TlsFiles(str(tmp_path_factory.mktemp('tls')))


# What each server is and says: its name and version in the sweep's result, its words for an ACL denial
SERVERS = {'redis': {'version': '7.0.', 'denial': "NOPERM this user has no permissions to run the 'scan' command"},
           'valkey': {'version': '8.1.', 'denial': "NOPERM User sweeper has no permissions to run the 'scan' command"}}


def assert_server(result, kind):
    assert result['server']['name'] == kind and result['server']['version'].startswith(SERVERS[kind]['version']), \
        result['server']


@pytest.fixture
def acl_tls_server(tmp_path, tls_files, store_kind):
    if tls_missing(store_kind):
        pytest.skip(tls_missing(store_kind))
    server = RedisServer(workdir=str(tmp_path / 'redis'), tls=tls_files, admin=('admin', 'admin-secret'),
                         config=['user default off', SWEEPER_ACL], kind=store_kind)
    with server:
        yield server


@pytest.fixture
def acl_server(tmp_path, store_kind):
    server = RedisServer(workdir=str(tmp_path / 'redis'), admin=('admin', 'admin-secret'),
                         config=['user default off', SWEEPER_ACL], kind=store_kind)
    with server:
        yield server


def test_standalone_sweeps_restores_and_names_the_server(capsys, store_server, store_kind, tmp_path):
    client = store_server.client()
    seed_redis(client, expired=12, valid=5, malformed=2, wrong_type=1)
    original = dump_redis(client)
    args = dict(login_host='127.0.0.1', login_port=store_server.port, backup_path=str(tmp_path / 'b.jsonl'))
    swept = run(capsys, state='swept', **args)
    assert swept['_rc'] == 0, swept.get('msg')
    assert (swept['scanned'], swept['deleted'], swept['malformed'], swept['wrong_type']) == (20, 12, 2, 1)
    assert_server(swept, store_kind)
    restored = run(capsys, state='restored', **args)
    assert restored['restored'] == 12 and dump_redis(client) == original
    assert_server(restored, store_kind)


def test_acl_user_sweeps_and_its_server_is_named_without_info(capsys, acl_server, store_kind, tmp_path):
    """The sweeper's ACL denies INFO: the server is named from HELLO, which every user may send."""
    client = acl_server.client()
    seed_redis(client, expired=7, valid=3)
    args = dict(login_host='127.0.0.1', login_port=acl_server.port, login_user='sweeper', login_password='sweeper-secret')
    swept = run(capsys, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert swept['_rc'] == 0 and swept['deleted'] == 7, swept.get('msg')
    assert_server(swept, store_kind)
    assert client.dbsize() == 3


def test_acl_denial_is_classified_alike_though_the_servers_word_it_differently(capsys, acl_server, store_kind):
    """Redis 7.0 says 'this user has no permissions', Valkey 8.1 'User <name> has no permissions': one NOPERM."""
    import redis  # pylint: disable=import-outside-toplevel

    acl_server.client().execute_command('ACL', 'SETUSER', 'sweeper', '-scan')
    with pytest.raises(redis.exceptions.NoPermissionError) as denied:
        acl_server.client(username='sweeper', password='sweeper-secret').execute_command('SCAN', '0')
    assert 'NOPERM ' + str(denied.value) == SERVERS[store_kind]['denial']
    result = run(capsys, login_host='127.0.0.1', login_port=acl_server.port, login_user='sweeper',
                 login_password='sweeper-secret')
    assert result['failed'] is True
    assert 'denied a command to this user' in result['msg'] and 'grant the ACL user' in result['msg']


def tls_args(server, tls_files, **extra):
    args = dict(login_host='127.0.0.1', login_port=server.port, login_user='sweeper', login_password='sweeper-secret',
                tls=True, ca_certs=tls_files.ca_cert)
    args.update(extra)
    return args


def test_acl_user_over_tls_sweeps_and_restores(capsys, acl_tls_server, tls_files, tmp_path):
    client = acl_tls_server.client()
    seed_redis(client, expired=10, valid=4, malformed=1)
    client.set('other:app:key', 'not ours')
    original = dump_redis(client)
    backup = str(tmp_path / 'b.jsonl')
    swept = run(capsys, **tls_args(acl_tls_server, tls_files, state='swept', backup_path=backup))
    assert swept['_rc'] == 0, swept.get('msg')
    assert swept['deleted'] == 10 and swept['malformed'] == 1
    restored = run(capsys, **tls_args(acl_tls_server, tls_files, state='restored', backup_path=backup))
    assert restored['restored'] == 10
    assert dump_redis(client) == original and client.get('other:app:key') == b'not ours'


def test_acl_user_cannot_reach_keys_outside_its_pattern(capsys, acl_tls_server, tls_files):
    acl_tls_server.client().set('other:app:key', 'not ours')
    result = run(capsys, **tls_args(acl_tls_server, tls_files, key_pattern='other:*'))
    assert result['failed'] is True
    assert 'denied a command to this user' in result['msg'] and 'grant the ACL user' in result['msg']


def test_tls_with_an_unknown_ca_fails_with_one_line(capsys, acl_tls_server, tls_files):
    result = run(capsys, **tls_args(acl_tls_server, tls_files, ca_certs=None))
    assert result['failed'] is True
    assert result['msg'].startswith('TLS with Redis at 127.0.0.1:')
    assert 'check tls, ca_certs, validate_certs' in result['msg'] and '\n' not in result['msg']


def test_tls_without_verification_connects(capsys, acl_tls_server, tls_files):
    seed_redis(acl_tls_server.client(), expired=2)
    result = run(capsys, **tls_args(acl_tls_server, tls_files, ca_certs=None, validate_certs=False))
    assert result['_rc'] == 0 and result['matched'] == 2


def test_plain_client_against_tls_port_fails_cleanly(capsys, acl_tls_server, tls_files):
    result = run(capsys, **tls_args(acl_tls_server, tls_files, tls=False, timeout=2))
    assert result['failed'] is True and '\n' not in result['msg'] and 'Redis at 127.0.0.1' in result['msg']


def test_sentinel_follows_a_failover_between_two_runs(capsys, tmp_path, store_kind):
    with RedisServer(workdir=str(tmp_path / 'primary'), kind=store_kind) as primary, \
            RedisServer(workdir=str(tmp_path / 'replica'), config=[], kind=store_kind) as replica:
        replica.client().replicaof('127.0.0.1', primary.port)
        with SentinelServer(primary, workdir=str(tmp_path / 'sentinel')) as sentinel:
            seed_redis(primary.client(), expired=6, valid=3)
            args = dict(backend='redis_sentinel', sentinel_hosts=[f'127.0.0.1:{sentinel.port}'],
                        sentinel_service_name='mymaster', batch_size=4)
            first = run(capsys, state='swept', backup_path=str(tmp_path / 'b1.jsonl'), **args)
            assert first['deleted'] == 6 and f':{primary.port}' in first['store']
            assert_server(first, store_kind)

            new_port = sentinel.failover()
            assert new_port == replica.port
            new_primary = replica.client()
            seed_redis(new_primary, expired=4, prefix=PREFIX + 'after-')
            second = run(capsys, state='swept', backup_path=str(tmp_path / 'b2.jsonl'), **args)
            assert second['_rc'] == 0, second.get('msg')
            assert f':{replica.port}' in second['store'] and second['deleted'] == 4
            assert new_primary.dbsize() == 3


def test_sentinel_with_unknown_service_fails_with_one_line(capsys, tmp_path, store_kind):
    with RedisServer(workdir=str(tmp_path / 'primary'), kind=store_kind) as primary, \
            SentinelServer(primary, workdir=str(tmp_path / 'sentinel')) as sentinel:
        result = run(capsys, backend='redis_sentinel', sentinel_hosts=[f'127.0.0.1:{sentinel.port}'],
                     sentinel_service_name='nosuch', timeout=2)
        assert result['failed'] is True and 'no Sentinel knows a master' in result['msg']
        assert 'check sentinel_hosts and sentinel_service_name' in result['msg']


@pytest.fixture(scope='module', params=STORE_SERVERS)
def redis_cluster(tmp_path_factory, request):
    with RedisClusterSet(3, workdir=str(tmp_path_factory.mktemp('cluster')), kind=request.param) as cluster:
        yield cluster


def test_cluster_sweeps_every_primary_and_restores(capsys, redis_cluster, tmp_path):
    client = redis_cluster.client()
    client.flushall()
    seed_redis(client, expired=300, valid=50, malformed=6, wrong_type=3)
    per_node = [node.client().dbsize() for node in redis_cluster.nodes]
    assert all(count > 0 for count in per_node), 'the keys must spread over every primary'
    original = {k: v for node in redis_cluster.nodes for k, v in dump_redis(node.client()).items()}
    args = dict(backend='redis_cluster', login_host='127.0.0.1', login_port=redis_cluster.nodes[1].port, batch_size=64)
    checked = run(capsys, check_mode=True, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert checked['matched'] == 300 and checked['deleted'] == 0 and checked['store'].count(':') == 3
    swept = run(capsys, state='swept', malformed='sweep', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert swept['deleted'] == 309 and swept['scanned'] == 359
    assert sum(node.client().dbsize() for node in redis_cluster.nodes) == 50
    assert_server(swept, redis_cluster.kind)
    restored = run(capsys, state='restored', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert restored['restored'] == 309
    assert {k: v for node in redis_cluster.nodes for k, v in dump_redis(node.client()).items()} == original


def command_calls(node, name: str) -> int:
    return node.client().info('commandstats').get(f'cmdstat_{name}', {}).get('calls', 0)


def test_cluster_deletes_each_batch_of_a_primary_in_one_script_run(capsys, redis_cluster, tmp_path):
    """A batch of a primary holds keys of hundreds of slots: one delete script run for all of them, not one per slot."""
    client = redis_cluster.client()
    client.flushall()
    seed_redis(client, expired=900, valid=60)
    for node in redis_cluster.nodes:
        node.client().config_resetstat()
    args = dict(backend='redis_cluster', login_host='127.0.0.1', login_port=redis_cluster.nodes[0].port, batch_size=100)
    swept = run(capsys, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert swept['deleted'] == 900 and sum(node.client().dbsize() for node in redis_cluster.nodes) == 60
    assert len(restorable(tmp_path / 'b.jsonl')) == 900
    for node in redis_cluster.nodes:
        runs, batches = command_calls(node, 'evalsha'), command_calls(node, 'scan')
        assert 0 < runs <= batches, f'{node.port}: {runs} delete script runs for {batches} SCAN pages'


def refresh_before_each_delete(monkeypatch, client, refreshed: list) -> None:
    """The service refreshes the first judged (and backed up) session of each batch just before its delete is sent."""
    real_delete = _redis_partition.RedisPartition.send_delete

    def hooked(self, entries):
        sid = entries[0].key.decode()[len(PREFIX):]
        client.hset(entries[0].key, mapping=session(sid, iso(time.time() + 3600), generation=1))
        refreshed.append(entries[0].key)
        return real_delete(self, entries)

    monkeypatch.setattr(_redis_partition.RedisPartition, 'send_delete', hooked)


def test_cluster_keeps_a_session_refreshed_between_read_and_delete(capsys, redis_cluster, tmp_path, monkeypatch):
    client = redis_cluster.client()
    client.flushall()
    seed_redis(client, expired=600)
    refreshed = []
    refresh_before_each_delete(monkeypatch, client, refreshed)
    args = dict(backend='redis_cluster', login_host='127.0.0.1', login_port=redis_cluster.nodes[0].port, batch_size=100)
    swept = run(capsys, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert swept['changed_during_sweep'] == len(refreshed) >= 3 and swept['deleted'] == 600 - len(refreshed)
    for key in refreshed:
        assert client.hget(key, 'refresh_token').endswith(b'-1-SECRET')
    gone = restorable(tmp_path / 'b.jsonl')
    assert len(gone) == swept['deleted'] and not set(gone) & set(refreshed)


def test_cluster_sweep_survives_its_primaries_forgetting_their_scripts(capsys, redis_cluster, tmp_path, monkeypatch):
    client = redis_cluster.client()
    client.flushall()
    seed_redis(client, expired=600, valid=30)
    real_delete = _redis_partition.RedisPartition.send_delete
    flushes = []

    def flush_then_delete(self, entries):
        # a restart or SCRIPT FLUSH between two batches: the next run answers NOSCRIPT
        self.client.script_flush()
        flushes.append(len(entries))
        return real_delete(self, entries)

    monkeypatch.setattr(_redis_partition.RedisPartition, 'send_delete', flush_then_delete)
    args = dict(backend='redis_cluster', login_host='127.0.0.1', login_port=redis_cluster.nodes[0].port, batch_size=100)
    swept = run(capsys, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert len(flushes) > 3 and swept['deleted'] == 600, swept.get('msg')
    assert sum(node.client().dbsize() for node in redis_cluster.nodes) == 30


def test_cluster_refuses_a_database_number(capsys, redis_cluster):
    result = run(capsys, backend='redis_cluster', login_host='127.0.0.1', login_port=redis_cluster.nodes[0].port, db=2)
    assert result['failed'] is True and result['msg'] == 'Redis Cluster has only database 0; remove db or set it to 0'


def etcd_args(server, **extra):
    return dict(backend='etcd', etcd_endpoints=[server.url], **extra)


def test_etcd_report_sweep_restore(capsys, etcd_server, tmp_path):
    seed_etcd(etcd_server.url, expired=9, valid=4, malformed=2, wrong_type=1)
    original = dump_etcd(etcd_server.url)
    reported = run(capsys, **etcd_args(etcd_server))
    assert (reported['scanned'], reported['matched'], reported['malformed'], reported['wrong_type']) == (16, 9, 2, 1)
    backup = str(tmp_path / 'b.jsonl')
    checked = run(capsys, check_mode=True, **etcd_args(etcd_server, state='swept', backup_path=backup))
    assert checked['matched'] == 9 and dump_etcd(etcd_server.url) == original
    swept = run(capsys, **etcd_args(etcd_server, state='swept', backup_path=backup, batch_size=4))
    assert swept['deleted'] == 9 and len(dump_etcd(etcd_server.url)) == 7
    assert swept['server']['name'] == 'etcd' and swept['server']['version'].count('.') == 2
    again = run(capsys, **etcd_args(etcd_server, state='swept', backup_path=backup))
    assert again['changed'] is False
    restored = run(capsys, **etcd_args(etcd_server, state='restored', backup_path=backup))
    assert restored['restored'] == 9 and dump_etcd(etcd_server.url) == original
    twice = run(capsys, **etcd_args(etcd_server, state='restored', backup_path=backup))
    assert twice['changed'] is False and twice['skipped_existing'] == 9
    run(capsys, **etcd_args(etcd_server, state='swept', select='all', malformed='sweep', backup=False))
    assert dump_etcd(etcd_server.url) == {}


def test_etcd_keeps_a_session_rewritten_after_it_was_read(capsys, etcd_server, tmp_path, monkeypatch):
    seed_etcd(etcd_server.url, expired=5, prefix=ETCD_PREFIX)
    real_delete = _etcd_store.EtcdPartition.delete_unchanged

    def refresh_then_delete(self, entries, guard_fields):
        fresh = json.dumps(session('e0', iso(time.time() + 3600), generation=1))
        self._call('/kv/put', {'key': _etcd_store._b64(entries[0].key), 'value': _etcd_store._b64(fresh.encode())})
        return real_delete(self, entries, guard_fields)

    monkeypatch.setattr(_etcd_store.EtcdPartition, 'delete_unchanged', refresh_then_delete)
    result = run(capsys, **etcd_args(etcd_server, state='swept', backup_path=str(tmp_path / 'b.jsonl')))
    assert result['changed_during_sweep'] == 1 and result['deleted'] == 4
    left = dump_etcd(etcd_server.url)
    assert list(left) == [ETCD_PREFIX + 'e0'] and '-1-SECRET' in left[ETCD_PREFIX + 'e0']
    run(capsys, **etcd_args(etcd_server, state='swept', select='all', backup=False))


def test_etcd_max_delete_and_unreachable_endpoint(capsys, etcd_server):
    seed_etcd(etcd_server.url, expired=3)
    refused = run(capsys, **etcd_args(etcd_server, state='swept', backup=False, max_delete=2))
    assert refused['failed'] is True and 'more than max_delete=2; no session was deleted' in refused['msg']
    assert len(dump_etcd(etcd_server.url)) == 3
    run(capsys, **etcd_args(etcd_server, state='swept', backup=False))
    down = run(capsys, backend='etcd', etcd_endpoints=['http://127.0.0.1:1'], timeout=2)
    assert down['failed'] is True and down['msg'].startswith('cannot reach etcd (http://127.0.0.1:1:')
    bad = run(capsys, backend='etcd', etcd_endpoints=['ftp://x'], timeout=2)
    assert bad['failed'] is True and "etcd_endpoints entry 'ftp://x' is not a URL" in bad['msg']


@pytest.fixture(scope='module')
def idp(tmp_path_factory):
    with IdpServer(workdir=str(tmp_path_factory.mktemp('idp'))) as server:
        yield server


def introspection(idp, **extra):
    args = dict(select='revoked', introspection_url=f'{idp.url}/oauth/introspect',
                introspection_client_id='vllm-dr', introspection_client_secret='vllm-dr-lab-secret')
    args.update(extra)
    return args


def test_revoked_select_removes_only_sessions_whose_token_the_provider_rotated(capsys, idp, redis_server, tmp_path):
    client = redis_server.client()
    rotated, kept = [], []
    for i in range(10):
        token = idp.token()
        sid = f's{i}'
        # every session still valid by its clock: only the provider knows which were rotated
        fields = {'access_token': token['access_token'], 'refresh_token': token['refresh_token'],
                  'expires_at': iso(time.time() + 3600)}
        client.hset(PREFIX + sid, mapping=fields)
        if i % 3 == 0:
            idp.rotate(token['refresh_token'])
            rotated.append(sid)
        else:
            kept.append(sid)
    client.hset(PREFIX + 'no-token', mapping={'expires_at': iso(time.time() + 3600)})
    args = dict(login_host='127.0.0.1', login_port=redis_server.port, **introspection(idp))
    reported = run(capsys, **args)
    assert reported['matched'] == len(rotated) and reported['malformed'] == 1
    swept = run(capsys, state='swept', backup_path=str(tmp_path / 'b.jsonl'), **args)
    assert swept['deleted'] == len(rotated) and sorted(swept['sample_ids']) == sorted(rotated)
    left = sorted(key.decode()[len(PREFIX):] for key in client.scan_iter(match=PREFIX + '*'))
    assert left == sorted(kept + ['no-token'])
    assert 'rt-' not in json.dumps(swept) and all(token not in json.dumps(swept) for token in left)


def test_revoked_select_with_wrong_introspection_secret_fails_before_deleting(capsys, idp, redis_server):
    client = redis_server.client()
    client.hset(PREFIX + 'a', mapping=dict(idp.token(), expires_at=iso(time.time() + 60)))
    result = run(capsys, login_host='127.0.0.1', login_port=redis_server.port, state='swept', backup=False,
                 **introspection(idp, introspection_client_secret='not-the-secret'))
    assert result['failed'] is True
    assert 'rejected the client credentials (HTTP 401)' in result['msg'] and 'not-the-secret' not in result['msg']
    assert client.exists(PREFIX + 'a') == 1


def test_revoked_select_with_the_provider_down_fails_with_one_line(capsys, redis_server):
    redis_server.client().hset(PREFIX + 'a', mapping={'refresh_token': 'x', 'expires_at': iso(time.time() + 60)})
    result = run(capsys, login_host='127.0.0.1', login_port=redis_server.port, select='revoked', timeout=2,
                 introspection_url='http://127.0.0.1:1/oauth/introspect', introspection_client_id='vllm-dr',
                 introspection_client_secret='a-real-looking-secret')
    assert result['failed'] is True and 'cannot ask the introspection endpoint' in result['msg']
