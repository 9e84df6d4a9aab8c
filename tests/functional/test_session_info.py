"""vllm_session_info against real redis-server and etcd: the counts of vllm_session_sweep's report, read by a user that
may only read, with nothing written."""

from __future__ import annotations

import json

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_info, vllm_session_sweep
from harness.modules import run_module
from harness.sessions import PREFIX, dump_etcd, dump_redis, seed_etcd, seed_redis

READER_PASSWORD = 'reader-password-SECRET'


def redis_args(server, **extra):
    return dict(login_host='127.0.0.1', login_port=server.port, **extra)


def add_read_only_user(server):
    """A Redis ACL user allowed only the read and connection commands on the session keys, as a diagnosis gets."""
    server.client().execute_command('ACL', 'SETUSER', 'reader', 'on', f'>{READER_PASSWORD}', 'resetkeys',
                                    f'~{PREFIX}*', '-@all', '+@read', '+@connection')


def test_info_counts_what_the_sweep_report_counts_and_changes_nothing(capsys, redis_server):
    client = redis_server.client()
    ids = seed_redis(client, expired=12, valid=5, malformed=2, wrong_type=1)
    before = dump_redis(client)
    info = run_module(vllm_session_info, redis_args(redis_server, batch_size=5), capsys)
    assert info['_rc'] == 0 and info['changed'] is False
    assert (info['scanned'], info['matched'], info['malformed'], info['wrong_type']) == (20, 12, 2, 1)
    assert len(info['sample_ids']) == 10 and set(info['sample_ids']) <= set(ids['expired'])
    reported = run_module(vllm_session_sweep, redis_args(redis_server), capsys)
    for key in ('scanned', 'matched', 'malformed', 'wrong_type', 'earliest_expiry', 'latest_expiry', 'store', 'server'):
        assert info[key] == reported[key], key
    assert 'deleted' not in info and 'backup_path' not in info
    assert dump_redis(client) == before


def test_a_read_only_redis_user_can_run_the_diagnosis_read(capsys, redis_server):
    client = redis_server.client()
    seed_redis(client, expired=4, valid=3)
    add_read_only_user(redis_server)
    args = redis_args(redis_server, login_user='reader', login_password=READER_PASSWORD, select='all')
    info = run_module(vllm_session_info, args, capsys)
    assert info['_rc'] == 0, info.get('msg')
    assert (info['scanned'], info['matched']) == (7, 7)
    assert READER_PASSWORD not in json.dumps(info)
    # the same user cannot sweep: it is read-only indeed
    swept = run_module(vllm_session_sweep, dict(args, state='swept', backup=False), capsys)
    assert swept['_rc'] == 1 and swept.get('deleted', 0) == 0
    assert len(dump_redis(client)) == 7


def test_info_runs_the_same_in_check_mode(capsys, redis_server):
    seed_redis(redis_server.client(), expired=3, valid=2)
    args = redis_args(redis_server, cutoff='2030-01-01T00:00:00Z')
    normal = run_module(vllm_session_info, args, capsys)
    checked = run_module(vllm_session_info, args, capsys, check_mode=True, diff=True)
    for result in (normal, checked):
        result.pop('duration_s'), result.pop('invocation')
        result['sample_ids'].sort()
    assert normal == checked and 'diff' not in checked


def test_info_reads_etcd(capsys, etcd_server):
    prefix = 'info/session/'
    seed_etcd(etcd_server.url, expired=6, valid=4, malformed=1, wrong_type=1, prefix=prefix)
    before = dump_etcd(etcd_server.url, prefix=prefix)
    info = run_module(vllm_session_info, dict(backend='etcd', etcd_endpoints=[etcd_server.url], key_prefix=prefix), capsys)
    assert info['_rc'] == 0 and info['changed'] is False
    assert (info['scanned'], info['matched'], info['malformed'], info['wrong_type']) == (12, 6, 1, 1)
    assert 'SECRET' not in json.dumps(info)
    assert dump_etcd(etcd_server.url, prefix=prefix) == before


@pytest.mark.parametrize('args, message', [
    ({'batch_size': 0}, 'batch_size 0 is out of range; give 1 to 100000'),
    ({'max_rate': -1.0}, 'max_rate -1 is out of range'),
    ({'cutoff': 'soon'}, "cutoff: 'soon' is not ISO 8601"),
    ({'login_port': 70000}, 'login_port 70000 is not a TCP port'),
    ({'state': 'swept'}, 'Unsupported parameters'),
    ({'backup_path': '/tmp/x.jsonl'}, 'Unsupported parameters'),
])
def test_bad_input_fails_with_one_line_before_the_store_is_touched(capsys, args, message):
    result = run_module(vllm_session_info, dict({'login_host': '127.0.0.1', 'login_port': 1}, **args), capsys)
    assert result['_rc'] == 1 and message in result['msg'] and '\n' not in result['msg']


def test_an_unreachable_store_fails_with_one_line(capsys):
    result = run_module(vllm_session_info, {'login_host': '127.0.0.1', 'login_port': 1, 'timeout': 2}, capsys)
    assert result['_rc'] == 1 and '127.0.0.1:1' in result['msg'] and '\n' not in result['msg']
