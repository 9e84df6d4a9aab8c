"""Timestamps no datetime can hold, stored in Redis, etcd and the SQLite cache, and given as options.

A stored one is malformed data (counted, kept or swept by ``malformed``, backed up and
restorable); an option is one line before anything is touched.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import time
import urllib.request

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import file_digest
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep, vllm_token_cache
from harness.caches import expiring, make_cache, row_ids
from harness.modules import run_module
from harness.sessions import ETCD_PREFIX, PREFIX, dump_etcd, dump_redis, seed_etcd, seed_redis, session

# As a service or a hand edit may have written them: text in a Redis hash or an SQLite TEXT column.
HOSTILE_TEXT = ['1e300', '-1e300', '12345678901234567', '-12345678901234567', '0000-01-01T00:00:00Z',
                '9999999999999999', 'inf', '1' + '0' * 400]
# As numbers: an etcd JSON value or an SQLite INTEGER/REAL column (9e999 is SQLite's infinity).
HOSTILE_NUMBERS = [1e300, -1e300, 12345678901234567, -12345678901234567, 9999999999999999]
BAD_OPTIONS = ['1e300', '-1e300', '12345678901234567', '-12345678901234567', '0000-01-01T00:00:00Z', '1' + '0' * 400]


def sweep(capsys, **args):
    return run_module(vllm_session_sweep, args, capsys)


def redis_args(server, **extra):
    return dict(login_host='127.0.0.1', login_port=server.port, **extra)


def seed_hostile_redis(client):
    for index, value in enumerate(HOSTILE_TEXT):
        client.hset(f'{PREFIX}h{index}', mapping=session(f'h{index}', value))
    return {f'h{index}' for index in range(len(HOSTILE_TEXT))}


def left_ids(client):
    return {key.decode()[len(PREFIX):] for key in client.scan_iter(match=PREFIX + '*')}


def test_redis_sessions_with_unrepresentable_expiries_are_malformed_and_kept(capsys, redis_server, tmp_path):
    client = redis_server.client()
    ids = seed_redis(client, expired=6, valid=4)
    hostile = seed_hostile_redis(client)
    reported = sweep(capsys, **redis_args(redis_server))
    assert reported['_rc'] == 0, reported.get('msg')
    assert (reported['scanned'], reported['matched'], reported['malformed']) == (10 + len(hostile), 6, len(hostile))
    assert reported['earliest_expiry'] == '2024-07-10T12:00:00Z' and reported['latest_expiry'] > '2025'
    swept = sweep(capsys, **redis_args(redis_server, state='swept', backup_path=str(tmp_path / 'keep.jsonl')))
    assert swept['_rc'] == 0, swept.get('msg')
    assert swept['deleted'] == 6 and swept['malformed'] == len(hostile)
    assert left_ids(client) == set(ids['valid']) | hostile


def test_redis_sessions_with_unrepresentable_expiries_are_swept_backed_up_and_restored(capsys, redis_server, tmp_path):
    client = redis_server.client()
    ids = seed_redis(client, expired=5, valid=3)
    hostile = seed_hostile_redis(client)
    original = dump_redis(client)
    backup = str(tmp_path / 'sweep.jsonl')
    swept = sweep(capsys, **redis_args(redis_server, state='swept', malformed='sweep', backup_path=backup))
    assert swept['_rc'] == 0, swept.get('msg')
    assert swept['deleted'] == 5 + len(hostile) and swept['malformed'] == len(hostile)
    assert left_ids(client) == set(ids['valid'])
    restored = sweep(capsys, **redis_args(redis_server, state='restored', backup_path=backup))
    assert restored['restored'] == 5 + len(hostile)
    assert dump_redis(client) == original


def put_etcd(url, sid, value):
    body = json.dumps({'key': base64.b64encode((ETCD_PREFIX + sid).encode()).decode(),
                       'value': base64.b64encode(value.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(f'{url}/v3/kv/put', data=body), timeout=5):
        pass


def test_etcd_sessions_with_unrepresentable_expiries_are_judged_by_malformed(capsys, etcd_server, tmp_path):
    url = etcd_server.url
    seed_etcd(url, expired=4, valid=3)
    hostile = {}
    for index, value in enumerate(HOSTILE_NUMBERS + HOSTILE_TEXT):
        # json.dumps writes 1e300 as 1e+300 and big ints as digits: a JSON number, as a service would
        hostile[f'h{index}'] = json.dumps(session(f'h{index}', value))
        put_etcd(url, f'h{index}', hostile[f'h{index}'])
    args = dict(backend='etcd', etcd_endpoints=[url])
    try:
        original = dump_etcd(url)
        reported = sweep(capsys, **args)
        assert reported['_rc'] == 0, reported.get('msg')
        assert (reported['matched'], reported['malformed']) == (4, len(hostile))
        kept = sweep(capsys, **dict(args, state='swept', backup_path=str(tmp_path / 'keep.jsonl')))
        assert kept['_rc'] == 0 and kept['deleted'] == 4
        assert {key[len(ETCD_PREFIX):] for key in dump_etcd(url)} >= set(hostile)
        backup = str(tmp_path / 'sweep.jsonl')
        swept = sweep(capsys, **dict(args, state='swept', malformed='sweep', backup_path=backup))
        assert swept['_rc'] == 0, swept.get('msg')
        assert swept['deleted'] == len(hostile)
        assert sorted(dump_etcd(url)) == sorted(ETCD_PREFIX + f'v{i}' for i in range(3))
        assert sweep(capsys, **dict(args, state='restored', backup_path=backup))['restored'] == len(hostile)
        assert {key: value for key, value in dump_etcd(url).items() if key[len(ETCD_PREFIX):] in hostile} == \
            {ETCD_PREFIX + sid: value for sid, value in hostile.items()}
        assert set(dump_etcd(url)) == set(original) - {ETCD_PREFIX + f'e{i}' for i in range(4)}
    finally:
        sweep(capsys, **dict(args, state='swept', select='all', malformed='sweep', backup=False))


@pytest.mark.parametrize('cutoff', BAD_OPTIONS)
def test_a_sweep_cutoff_out_of_range_is_one_line_and_deletes_nothing(capsys, redis_server, tmp_path, cutoff):
    client = redis_server.client()
    seed_redis(client, expired=3, valid=3)
    before = dump_redis(client)
    backup = tmp_path / 'sweep.jsonl'
    result = sweep(capsys, **redis_args(redis_server, state='swept', cutoff=cutoff, backup_path=str(backup)))
    assert result['_rc'] == 1
    assert result['msg'].startswith('cutoff: ') and 'outside the years 0001 to 9999' in result['msg']
    assert '\n' not in result['msg']
    assert dump_redis(client) == before and not backup.exists()


# ---- the SQLite token cache --------------------------------------------------------------------------------

def cache_module(capsys, **args):
    return run_module(vllm_token_cache, args, capsys)


def make_hostile_cache(path):
    """3 expired rows, 2 valid ones, and one row for every hostile value (text and numbers, infinity)."""
    now = time.time()
    rows = [(f'old{i}', now - 3600 * (i + 1)) for i in range(3)] + [(f'new{i}', now + 3600 * (i + 1)) for i in range(2)]
    rows += [(f'ht{i}', value) for i, value in enumerate(HOSTILE_TEXT)]
    rows += [(f'hn{i}', value) for i, value in enumerate(HOSTILE_NUMBERS)]
    make_cache(path, rows)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO tokens VALUES ('hinf', 'at-SECRET', 'rt-SECRET', 9e999)")
    conn.execute("INSERT INTO tokens VALUES ('hninf', 'at-SECRET', 'rt-SECRET', -9e999)")
    conn.close()
    return len(HOSTILE_TEXT) + len(HOSTILE_NUMBERS) + 2


@pytest.fixture
def hostile_cache(tmp_path):
    path = str(tmp_path / 'token_cache.db')
    return path, make_hostile_cache(path)


def test_a_cache_with_unrepresentable_expiries_is_inspected(capsys, hostile_cache):
    path, hostile = hostile_cache
    result = cache_module(capsys, path=path)
    assert result['_rc'] == 0, result.get('msg')
    assert (result['rows'], result['expired_rows'], result['malformed_rows']) == (5 + hostile, 3, hostile)
    assert result['earliest_expiry'] > '2020' and result['latest_expiry'] < '2100'


def test_a_cache_with_unrepresentable_expiries_is_pruned_of_the_expired_rows_only(capsys, hostile_cache):
    path, hostile = hostile_cache
    result = cache_module(capsys, path=path, state='pruned')
    assert result['_rc'] == 0, result.get('msg')
    assert result['removed_rows'] == 3
    assert not any(sid.startswith('old') for sid in row_ids(path)) and len(row_ids(path)) == 2 + hostile
    assert len(row_ids(result['backup_files'][0])) == 5 + hostile


def test_a_cache_with_unrepresentable_expiries_is_purged_after_its_backup(capsys, hostile_cache, tmp_path):
    path, _hostile = hostile_cache
    digest = file_digest(path)
    result = cache_module(capsys, path=path, state='absent', backup_dir=str(tmp_path / 'bk'))
    assert result['_rc'] == 0, result.get('msg')
    assert result['changed'] is True and not os.path.exists(path)
    assert file_digest(result['backup_files'][0]) == digest


@pytest.mark.parametrize('option', ['cutoff', 'restored_at'])
@pytest.mark.parametrize('value', BAD_OPTIONS)
@pytest.mark.parametrize('state', ['inspected', 'pruned', 'absent'])
def test_a_cache_option_out_of_range_is_one_line_and_touches_nothing(capsys, tmp_path, option, value, state):
    path = str(tmp_path / 'token_cache.db')
    make_cache(path, expiring(4) + expiring(2, start=4, offset=3600))
    before = sorted(os.listdir(tmp_path)), file_digest(path)
    result = cache_module(capsys, path=path, state=state, **{option: value})
    assert result['_rc'] == 1
    assert result['msg'].startswith(f'{option}: ') and 'outside the years 0001 to 9999' in result['msg']
    assert '\n' not in result['msg']
    assert (sorted(os.listdir(tmp_path)), file_digest(path)) == before
