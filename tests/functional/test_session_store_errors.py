"""Store options and store failures end in one line that names the option to fix, touching nothing.

Real servers on loopback: Redis (ACL users, TLS with client certificates, a renamed command),
Sentinels (with a password, unreachable, disagreeing), a standalone server given as a cluster
node, and etcd with authentication, per-prefix roles and a compaction mid-sweep.
"""

from __future__ import annotations

import base64
import json

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import etcd_store as _etcd_store
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep
from harness.modules import run_module
from harness.servers import EtcdServer, RedisServer, SentinelServer, TlsFiles, free_port
from harness.sessions import ETCD_PREFIX, dump_redis, iso, seed_redis, session


def run(capsys, **args):
    return run_module(vllm_session_sweep, args, capsys)


def assert_one_line(result, *parts):
    """A failure with one line that holds every part, and no traceback."""
    assert result['failed'] is True, result
    message = result['msg']
    assert '\n' not in message and len(message) < 600, message
    assert 'Traceback' not in json.dumps(result) and 'exception' not in result
    for part in parts:
        assert part in message, message
    return message


def redis_args(server, **extra):
    args = {'login_host': '127.0.0.1', 'login_port': server.port}
    args.update(extra)
    return args


# ---- options refused before anything is touched ------------------------------------------------

@pytest.mark.parametrize('args, parts', [
    ({'timeout': -1}, ['timeout -1 is out of range', 'above 0']),
    ({'timeout': 0}, ['timeout 0 is out of range', 'above 0']),
    ({'timeout': 1e300}, ['timeout 1e+300 is out of range']),
    ({'max_rate': 'nan'}, ['max_rate nan is out of range', 'or 0 for an unlimited rate']),
    ({'max_rate': -5}, ['max_rate -5 is out of range']),
    ({'max_delete': -1}, ['max_delete -1 cannot be negative']),
    ({'login_port': 70000}, ['login_port 70000 is not a TCP port; give 1 to 65535']),
    ({'db': -1}, ['db -1 is not a Redis database number']),
    ({'backend': 'redis_sentinel'}, ['backend is redis_sentinel but all of the following are missing: sentinel_hosts']),
    ({'backend': 'redis_sentinel', 'sentinel_hosts': []}, ['backend=redis_sentinel needs sentinel_hosts']),
    ({'backend': 'etcd', 'etcd_endpoints': []}, ['backend=etcd needs etcd_endpoints', 'https://10.0.0.5:2379']),
    ({'backend': 'etcd', 'etcd_endpoints': ['http://127.0.0.1:99999']}, ["etcd_endpoints entry 'http://127.0.0.1:99999' is not a URL"]),
    ({'client_key_file': '/etc/ssl/client.key'}, ["missing parameter(s) required by 'client_key_file': client_cert_file"]),
    ({'etcd_password': 'some-etcd-secret'}, ["missing parameter(s) required by 'etcd_password': etcd_user"]),
])
def test_bad_store_options_fail_with_one_line_before_touching_the_store(capsys, redis_server, args, parts):
    client = redis_server.client()
    seed_redis(client, expired=3)
    before = dump_redis(client)
    result = run(capsys, **redis_args(redis_server, state='swept', backup=False, **args))
    assert_one_line(result, *parts)
    assert dump_redis(client) == before
    assert 'some-etcd-secret' not in json.dumps(result)


def test_cluster_backend_against_a_standalone_server_says_so(capsys, redis_server):
    client = redis_server.client()
    seed_redis(client, expired=3)
    before = dump_redis(client)
    result = run(capsys, **redis_args(redis_server, backend='redis_cluster', state='swept', backup=False))
    assert_one_line(result, f'Redis at 127.0.0.1:{redis_server.port} is not a cluster node (cluster_enabled:0)',
                    'use backend=redis')
    assert dump_redis(client) == before


# ---- Redis: credentials, TLS, and the words of the server ---------------------------------------

@pytest.fixture(scope='module')
def tls_files(tmp_path_factory):
    return TlsFiles(str(tmp_path_factory.mktemp('tls')))


def test_tls_server_requiring_a_client_certificate_names_the_certificate_options(capsys, tmp_path, tls_files):
    with RedisServer(workdir=str(tmp_path / 'r'), tls=tls_files, tls_client_certs=True) as server:
        client = server.client()
        seed_redis(client, expired=3)
        before = dump_redis(client)
        args = redis_args(server, tls=True, ca_certs=tls_files.ca_cert, timeout=3, state='swept', backup=False)
        result = run(capsys, **args)
        message = assert_one_line(result, f'TLS with Redis at 127.0.0.1:{server.port} failed',
                                  'set client_cert_file and client_key_file')
        assert 'check login_host/login_port' not in message
        assert dump_redis(client) == before
        with_certificate = run(capsys, client_cert_file=tls_files.client_cert, client_key_file=tls_files.client_key, **args)
        assert with_certificate['_rc'] == 0 and with_certificate['deleted'] == 3


def test_renamed_script_command_puts_no_token_in_the_message(capsys, tmp_path):
    with RedisServer(workdir=str(tmp_path / 'r'), config=['rename-command EVALSHA ""']) as server:
        client = server.client()
        seed_redis(client, expired=3)
        before = dump_redis(client)
        tokens = {value.decode() for _kind, fields, _ttl in before.values() for name, value in fields.items()
                  if name.endswith(b'_token')}
        result = run(capsys, **redis_args(server, state='swept', backup=False, batch_size=1))
        message = assert_one_line(result, "unknown command 'EVALSHA'")
        assert 'args beginning with' not in message
        dumped = json.dumps(result)
        assert not [token for token in tokens if token in dumped]
        assert 'SECRET' not in dumped
        assert dump_redis(client) == before


# ---- Sentinel ------------------------------------------------------------------------------------

def sentinel_args(*sentinels, **extra):
    return dict(backend='redis_sentinel', sentinel_hosts=[f'127.0.0.1:{port}' for port in sentinels], **extra)


def test_unreachable_sentinel_is_named_in_one_short_line_and_passed_over_beside_a_working_one(capsys, tmp_path):
    port = free_port()
    result = run(capsys, **sentinel_args(port, timeout=2))
    message = assert_one_line(result, f'cannot reach any Sentinel (127.0.0.1:{port}: ', 'check sentinel_hosts')
    assert len(message) < 300 and 'object at 0x' not in message and '{' not in message
    with RedisServer(workdir=str(tmp_path / 'primary')) as primary, \
            SentinelServer(primary, workdir=str(tmp_path / 'sentinel')) as sentinel:
        seed_redis(primary.client(), expired=4, valid=2)
        result = run(capsys, **sentinel_args(port, sentinel.port, timeout=2, state='swept', backup=False))
        assert result['_rc'] == 0, result.get('msg')
        assert result['deleted'] == 4 and f':{primary.port}' in result['store']


@pytest.mark.parametrize('password', [None, 'not-the-sentinel-password'])
def test_missing_or_wrong_sentinel_password_names_sentinel_password(capsys, tmp_path, password):
    with RedisServer(workdir=str(tmp_path / 'primary')) as primary, \
            SentinelServer(primary, workdir=str(tmp_path / 'sentinel'), password='sentinel-pass') as sentinel:
        client = primary.client()
        seed_redis(client, expired=3)
        before = dump_redis(client)
        extra = {'sentinel_password': password} if password else {}
        result = run(capsys, **sentinel_args(sentinel.port, timeout=2, state='swept', backup=False, **extra))
        message = assert_one_line(result, f'Sentinel at 127.0.0.1:{sentinel.port} rejected the credentials',
                                  'check sentinel_password')
        assert 'no Sentinel knows' not in message and 'not-the-sentinel-password' not in json.dumps(result)
        assert dump_redis(client) == before
        right = run(capsys, **sentinel_args(sentinel.port, timeout=2, sentinel_password='sentinel-pass'))
        assert right['_rc'] == 0 and right['matched'] == 3


def test_sentinels_naming_different_primaries_are_refused(capsys, tmp_path):
    with RedisServer(workdir=str(tmp_path / 'x')) as server_x, RedisServer(workdir=str(tmp_path / 'y')) as server_y, \
            SentinelServer(server_x, workdir=str(tmp_path / 'sa')) as sentinel_a, \
            SentinelServer(server_y, workdir=str(tmp_path / 'sb')) as sentinel_b:
        for server in (server_x, server_y):
            seed_redis(server.client(), expired=3)
        before = [dump_redis(server.client()) for server in (server_x, server_y)]
        result = run(capsys, **sentinel_args(sentinel_a.port, sentinel_b.port, timeout=1, state='swept', backup=False))
        assert_one_line(result, 'the Sentinels disagree on the primary of service mymaster',
                        f'127.0.0.1:{sentinel_a.port} says 127.0.0.1:{server_x.port}',
                        f'127.0.0.1:{sentinel_b.port} says 127.0.0.1:{server_y.port}', 'sentinel_hosts')
        assert [dump_redis(server.client()) for server in (server_x, server_y)] == before


# ---- etcd with authentication --------------------------------------------------------------------

ETCD_USERS = {
    'sweeper': ('sweeper-pass', {ETCD_PREFIX: 'READWRITE'}),
    'reader': ('reader-pass', {ETCD_PREFIX: 'READ'}),
    'outsider': ('outsider-pass', {'other/': 'READWRITE'}),
}


@pytest.fixture(scope='module')
def etcd_auth(tmp_path_factory):
    with EtcdServer(workdir=str(tmp_path_factory.mktemp('etcd-auth'))) as server:
        server.enable_auth(ETCD_USERS)
        yield server


@pytest.fixture
def etcd_sessions(etcd_auth):
    """Three expired and two valid sessions under the prefix (written as root); gone after the test."""
    for sid in ('e0', 'e1', 'e2'):
        etcd_auth.put(ETCD_PREFIX + sid, json.dumps(session(sid, iso(1e9))))
    for sid in ('v0', 'v1'):
        etcd_auth.put(ETCD_PREFIX + sid, json.dumps(session(sid, iso(4e9))))
    yield etcd_auth.keys(ETCD_PREFIX)
    for key in etcd_auth.keys(ETCD_PREFIX):
        etcd_auth.call('/kv/deleterange', {'key': base64.b64encode(key.encode()).decode()})


def etcd_args(server, user=None, password=None, **extra):
    args = {'backend': 'etcd', 'etcd_endpoints': [server.url], 'timeout': 3, 'state': 'swept', 'backup': False}
    if user:
        args.update(etcd_user=user, etcd_password=password)
    args.update(extra)
    return args


def test_wrong_etcd_password_names_the_credentials(capsys, etcd_sessions, etcd_auth):
    result = run(capsys, **etcd_args(etcd_auth, 'sweeper', 'wrong-etcd-pass'))
    message = assert_one_line(result, "rejected the credentials of 'sweeper'", 'check etcd_user and etcd_password')
    assert message.startswith(f'etcd at {etcd_auth.url} rejected the credentials')
    assert 'Bad Request' not in message and 'failed during' not in message and 'wrong-etcd-pass' not in json.dumps(result)
    assert etcd_auth.keys(ETCD_PREFIX) == etcd_sessions


def test_etcd_with_auth_on_and_no_user_asks_for_one(capsys, etcd_sessions, etcd_auth):
    result = run(capsys, **etcd_args(etcd_auth))
    assert_one_line(result, 'requires authentication', 'set etcd_user and etcd_password')
    assert etcd_auth.keys(ETCD_PREFIX) == etcd_sessions


def test_etcd_prefix_the_user_may_not_read_names_the_grant(capsys, etcd_sessions, etcd_auth):
    result = run(capsys, **etcd_args(etcd_auth, 'outsider', 'outsider-pass'))
    message = assert_one_line(result, f"denied reading under the prefix '{ETCD_PREFIX}' to user 'outsider'",
                              'grant its role read on that prefix')
    assert 'check that etcd is up' not in message
    assert etcd_auth.keys(ETCD_PREFIX) == etcd_sessions


def test_etcd_user_who_may_only_read_is_told_to_grant_readwrite(capsys, etcd_sessions, etcd_auth):
    reported = run(capsys, **etcd_args(etcd_auth, 'reader', 'reader-pass', state='reported'))
    assert reported['_rc'] == 0 and reported['matched'] == 3
    result = run(capsys, **etcd_args(etcd_auth, 'reader', 'reader-pass'))
    assert_one_line(result, "denied deleting or writing under the prefix 'vllm/session/' to user 'reader'",
                    'grant its role readwrite on that prefix')
    assert etcd_auth.keys(ETCD_PREFIX) == etcd_sessions


def test_etcd_compaction_mid_sweep_says_rerun_and_a_rerun_finishes(capsys, etcd_sessions, etcd_auth, monkeypatch):
    call = _etcd_store.EtcdPartition._call
    pages = []

    def compact_after_the_first_page(store, path, payload):
        reply = call(store, path, payload)
        if path == '/kv/range' and 'limit' in payload and not pages:
            pages.append(payload)
            etcd_auth.compact(etcd_auth.put('other/marker', 'moves the revision on'))
        return reply

    monkeypatch.setattr(_etcd_store.EtcdPartition, '_call', compact_after_the_first_page)
    result = run(capsys, **etcd_args(etcd_auth, 'sweeper', 'sweeper-pass', batch_size=2))
    monkeypatch.undo()
    message = assert_one_line(result, 'was compacted meanwhile', 're-run')
    assert 'Bad Request' not in message and pages
    rerun = run(capsys, **etcd_args(etcd_auth, 'sweeper', 'sweeper-pass', batch_size=2))
    assert rerun['_rc'] == 0, rerun.get('msg')
    assert sorted(etcd_auth.keys(ETCD_PREFIX)) == [ETCD_PREFIX + 'v0', ETCD_PREFIX + 'v1']
