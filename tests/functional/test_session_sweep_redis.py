"""vllm_session_sweep against a real redis-server started for each test."""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import (
    redis_deletes as _redis_deletes, redis_partition as _redis_partition, redis_wire as _redis_wire)
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep
from harness.modules import run_module
from harness.servers import RedisServer, free_port
from harness.sessions import PREFIX, dump_redis, iso, seed_redis, session


def sweep(capsys, server, check_mode=False, diff=False, **args):
    args.setdefault('login_port', server.port)
    args.setdefault('login_host', '127.0.0.1')
    return run_module(vllm_session_sweep, args, capsys, check_mode=check_mode, diff=diff)


def before_each_delete(monkeypatch, action):
    """Run ``action(entries)`` after each batch is backed up, just before its delete is sent."""
    real_delete = _redis_partition.RedisPartition.send_delete

    def hooked(self, entries):
        action(entries)
        return real_delete(self, entries)

    monkeypatch.setattr(_redis_partition.RedisPartition, 'send_delete', hooked)


def backup_lines(path):
    with open(path, encoding='utf-8') as handle:
        return [json.loads(line) for line in handle]


def backed_up_keys(path):
    lines = backup_lines(path)
    kept = {key for line in lines for key in line.get('not_deleted', [])}
    return sorted(line['key'] for line in lines if 'key' in line and line['key'] not in kept)


def test_report_counts_everything_and_changes_nothing(capsys, redis_server):
    client = redis_server.client()
    ids = seed_redis(client, expired=8, valid=5, malformed=2, wrong_type=1)
    before = dump_redis(client)
    result = sweep(capsys, redis_server)
    assert result['_rc'] == 0 and result['changed'] is False
    assert (result['scanned'], result['matched'], result['deleted']) == (16, 8, 0)
    assert (result['malformed'], result['wrong_type']) == (2, 1)
    assert sorted(result['sample_ids']) == sorted(ids['expired'])
    assert result['earliest_expiry'] == '2024-07-10T12:00:00Z'
    assert result['backup_path'] is None
    assert dump_redis(client) == before


def test_sweep_removes_only_expired_sessions_after_a_private_backup(capsys, redis_server, tmp_path):
    client = redis_server.client()
    ids = seed_redis(client, expired=40, valid=30, malformed=4, wrong_type=2)
    before = dump_redis(client)
    backup = tmp_path / 'sessions.jsonl'
    result = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=7, diff=True)
    assert result['changed'] is True and result['deleted'] == 40 and result['changed_during_sweep'] == 0
    expired_keys = sorted(PREFIX + sid for sid in ids['expired'])
    assert backed_up_keys(backup) == expired_keys
    assert stat.S_IMODE(os.stat(backup).st_mode) == 0o600
    after = dump_redis(client)
    assert sorted(k.decode() for k in set(before) - set(after)) == expired_keys
    line = next(line for line in backup_lines(backup) if line.get('key') == PREFIX + 'e0')
    assert line['type'] == 'hash' and line['fields']['refresh_token'] == 'rt-e0-0-SECRET'
    assert result['diff'] == {'before': {'sessions': 76, 'matching': 40}, 'after': {'sessions': 36, 'matching': 0}}
    assert 'SECRET' not in json.dumps(result)


def test_second_sweep_changes_nothing(capsys, redis_server, tmp_path):
    seed_redis(redis_server.client(), expired=5, valid=5)
    backup = str(tmp_path / 'b.jsonl')
    assert sweep(capsys, redis_server, state='swept', backup_path=backup)['changed'] is True
    again = sweep(capsys, redis_server, state='swept', backup_path=backup)
    assert again['changed'] is False and again['deleted'] == 0 and again['scanned'] == 5


def test_check_mode_counts_what_would_go_and_deletes_nothing(capsys, redis_server, tmp_path):
    client = redis_server.client()
    seed_redis(client, expired=12, valid=3)
    before = dump_redis(client)
    backup = tmp_path / 'b.jsonl'
    result = sweep(capsys, redis_server, check_mode=True, diff=True, state='swept', backup_path=str(backup))
    assert result['changed'] is True and result['matched'] == 12 and result['deleted'] == 0
    assert result['diff']['after'] == {'sessions': 3, 'matching': 0}
    assert dump_redis(client) == before and not backup.exists()


def test_select_all_forces_every_session_out_but_keeps_malformed(capsys, redis_server, tmp_path):
    client = redis_server.client()
    ids = seed_redis(client, expired=3, valid=4, malformed=2, wrong_type=1)
    result = sweep(capsys, redis_server, state='swept', select='all', backup_path=str(tmp_path / 'b.jsonl'))
    assert result['deleted'] == 7
    left = sorted(key.decode()[len(PREFIX):] for key in client.scan_iter(match=PREFIX + '*'))
    assert left == sorted(ids['malformed'] + ids['wrong_type'])


def test_malformed_sweep_removes_unjudgeable_entries_but_never_other_types(capsys, redis_server, tmp_path):
    client = redis_server.client()
    seed_redis(client, expired=1, valid=1, malformed=2, wrong_type=2)
    client.sadd(PREFIX + 'aset', 'x')
    backup = tmp_path / 'b.jsonl'
    result = sweep(capsys, redis_server, state='swept', malformed='sweep', backup_path=str(backup))
    assert result['deleted'] == 5 and result['wrong_type'] == 3
    left = sorted(key.decode() for key in client.scan_iter(match=PREFIX + '*'))
    assert left == [PREFIX + 'aset', PREFIX + 'v0']
    strings = [line for line in backup_lines(backup) if line.get('type') == 'string']
    assert len(strings) == 2 and strings[0]['value'] == 'a string where a session hash belongs'


@pytest.mark.parametrize('parser', ['hiredis', 'redis-py'])
def test_backup_then_restore_gives_back_identical_data(capsys, redis_server, tmp_path, monkeypatch, parser):
    if parser == 'redis-py':
        # without hiredis the pipelined replies are read through redis-py's own reader
        monkeypatch.setattr(_redis_wire, 'hiredis', None)
    client = redis_server.client()
    seed_redis(client, expired=25, valid=5, malformed=3, wrong_type=2)
    client.hset(PREFIX + 'binary', mapping={'expires_at': '2024-07-10T12:00:00Z', 'refresh_token': b'\xff\x00\xfe',
                                            'b64:odd': 'field name that looks encoded'})
    client.pexpire(PREFIX + 'e1', 3_600_000)
    original = dump_redis(client)
    ttl_before = client.pttl(PREFIX + 'e1')
    backup = str(tmp_path / 'b.jsonl')
    swept = sweep(capsys, redis_server, state='swept', malformed='sweep', backup_path=backup)
    assert swept['deleted'] == 31
    restored = sweep(capsys, redis_server, state='restored', backup_path=backup, diff=True)
    assert restored['changed'] is True and restored['restored'] == 31
    assert dump_redis(client) == original
    assert abs(client.pttl(PREFIX + 'e1') - ttl_before) < 5000
    again = sweep(capsys, redis_server, state='restored', backup_path=backup)
    assert again['changed'] is False and again['restored'] == 0 and again['skipped_existing'] == 31


def test_restore_never_overwrites_a_session_that_exists_again(capsys, redis_server, tmp_path):
    client = redis_server.client()
    seed_redis(client, expired=3)
    backup = str(tmp_path / 'b.jsonl')
    sweep(capsys, redis_server, state='swept', backup_path=backup)
    fresh = session('e1', iso(time.time() + 3600), generation=9)
    client.hset(PREFIX + 'e1', mapping=fresh)
    checked = sweep(capsys, redis_server, state='restored', backup_path=backup, check_mode=True)
    assert checked['restored'] == 2 and checked['skipped_existing'] == 1
    assert client.exists(PREFIX + 'e0') == 0
    result = sweep(capsys, redis_server, state='restored', backup_path=backup)
    assert result['restored'] == 2 and result['skipped_existing'] == 1
    assert client.hget(PREFIX + 'e1', 'refresh_token') == b'rt-e1-9-SECRET'


def test_max_delete_refuses_before_deleting_anything(capsys, redis_server, tmp_path):
    client = redis_server.client()
    seed_redis(client, expired=30, valid=3)
    before = dump_redis(client)
    backup = tmp_path / 'b.jsonl'
    result = sweep(capsys, redis_server, state='swept', backup_path=str(backup), max_delete=29, batch_size=5)
    assert result['failed'] is True
    assert result['msg'] == ('30 sessions would be removed, more than max_delete=29; no session was deleted: '
                             'raise max_delete, or narrow select/cutoff')
    assert dump_redis(client) == before and not backup.exists()
    assert sweep(capsys, redis_server, state='swept', backup_path=str(backup), max_delete=30)['deleted'] == 30


def test_sweep_keeps_session_refreshed_between_read_and_delete(capsys, redis_server, tmp_path, monkeypatch):
    client = redis_server.client()
    seed_redis(client, expired=20, valid=2)
    refreshed = []

    def refresh(entries):
        # the service refreshes two of the judged (and backed up) sessions just before the delete is sent
        for entry in entries[:2]:
            sid = entry.key.decode()[len(PREFIX):]
            client.hset(entry.key, mapping=session(sid, iso(time.time() + 3600), generation=1))
            refreshed.append(entry.key)

    before_each_delete(monkeypatch, refresh)
    backup = tmp_path / 'b.jsonl'
    result = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=10)
    assert result['changed_during_sweep'] == len(refreshed) > 0
    assert result['deleted'] == 20 - len(refreshed)
    for key in refreshed:
        assert client.hget(key, 'refresh_token').endswith(b'-1-SECRET')
    assert not set(k.decode() for k in refreshed) & set(backed_up_keys(backup))


@pytest.mark.parametrize('parser', ['hiredis', 'redis-py'])
def test_sweep_survives_the_server_forgetting_its_scripts(capsys, redis_server, tmp_path, monkeypatch, parser):
    if parser == 'redis-py':
        # redis-py's own reader makes NOSCRIPT a NoScriptError without the code: it is recognised by that type
        monkeypatch.setattr(_redis_wire, 'hiredis', None)
    client = redis_server.client()
    seed_redis(client, expired=30, valid=3)
    flushes = []

    def flush(entries):
        # a restart or SCRIPT FLUSH between two batches: the next EVALSHA answers NOSCRIPT
        client.script_flush()
        flushes.append(len(entries))

    before_each_delete(monkeypatch, flush)
    result = sweep(capsys, redis_server, state='swept', backup_path=str(tmp_path / 'b.jsonl'), batch_size=10)
    assert len(flushes) > 1 and result['_rc'] == 0
    assert result['deleted'] == 30 and client.dbsize() == 3


def test_a_failed_retry_still_counts_the_deletes_that_ran(capsys, redis_server, tmp_path, monkeypatch):
    """The first delete finds its script gone, the second runs; loading the script again is then refused."""
    client = redis_server.client()
    seed_redis(client, expired=30, valid=3)
    calls = []

    def flush_then_forbid_loading(entries):
        calls.append(len(entries))
        if len(calls) == 1:
            client.script_flush()  # the first delete answers NOSCRIPT
        elif len(calls) == 2:
            client.script_load(_redis_deletes.DELETE_SCRIPT)  # the second runs
            client.execute_command('ACL', 'SETUSER', 'default', '-script|load')

    before_each_delete(monkeypatch, flush_then_forbid_loading)
    backup = tmp_path / 'b.jsonl'
    failed = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=10)
    assert failed['failed'] is True and 'NOPERM' in failed['msg'] and '\n' not in failed['msg']
    gone = 33 - client.dbsize()
    assert gone == calls[1] > 0, 'only the second delete ran'
    assert f'; {gone} sessions were deleted before it stopped' in failed['msg']

    monkeypatch.undo()
    client.execute_command('ACL', 'SETUSER', 'default', '+@all')
    rerun = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=10)
    assert rerun['_rc'] == 0 and rerun['deleted'] == 30 - gone and client.dbsize() == 3


def test_concurrent_writer_loses_no_refreshed_session(capsys, redis_server, tmp_path):
    client = redis_server.client()
    ids = seed_redis(client, expired=3000, valid=10)
    stop = threading.Event()
    written = {}

    def service_refreshing_sessions():
        writer = redis_server.client()
        i = 0
        while not stop.is_set():
            sid = ids['expired'][(i * 7919) % len(ids['expired'])]
            fields = session(sid, iso(time.time() + 3600), generation=i + 1)
            writer.hset(PREFIX + sid, mapping=fields)
            written[sid] = fields['refresh_token']
            i += 1

    thread = threading.Thread(target=service_refreshing_sessions)
    thread.start()
    try:
        result = sweep(capsys, redis_server, state='swept', backup_path=str(tmp_path / 'b.jsonl'),
                       batch_size=50, max_rate=20000)
    finally:
        stop.set()
        thread.join()
    assert written, 'the writer never ran'
    for sid, token in written.items():
        assert client.hget(PREFIX + sid, 'refresh_token') == token.encode(), f'refreshed session {sid} was lost'
    deleted = set(backed_up_keys(tmp_path / 'b.jsonl'))
    deleted_lines = [line for line in backup_lines(tmp_path / 'b.jsonl') if line.get('key') in deleted]
    assert len(deleted_lines) == result['deleted'] > 0
    # only sessions as they were judged, never a refreshed one, may be deleted
    assert all(line['fields']['refresh_token'].endswith('-0-SECRET') for line in deleted_lines)


def test_store_dying_mid_sweep_leaves_an_exact_backup_and_a_rerun_finishes(capsys, tmp_path, monkeypatch):
    server = RedisServer(workdir=str(tmp_path / 'redis'), config=['appendonly yes', 'appendfsync always'])
    server.start()
    try:
        client = server.client()
        seed_redis(client, expired=100, valid=10)
        original = dump_redis(client)
        calls = []

        def die_on_third_batch(entries):
            calls.append(len(entries))
            if len(calls) == 3:
                server.kill()

        before_each_delete(monkeypatch, die_on_third_batch)
        backup = tmp_path / 'b.jsonl'
        failed = sweep(capsys, server, state='swept', backup_path=str(backup), batch_size=20)
        assert failed['failed'] is True
        assert 'sessions were deleted before it stopped' in failed['msg'] and 're-run to finish' in failed['msg']
        assert str(backup) in failed['msg'] and '\n' not in failed['msg']
        monkeypatch.undo()

        port = server.port
        server.port = None
        server._choose_ports = lambda: setattr(server, 'port', port)  # same port, same data directory
        server.start()
        client = server.client()
        gone = sorted(k.decode() for k in set(original) - set(dump_redis(client)))
        in_backup = backed_up_keys(backup)
        assert set(gone) <= set(in_backup)
        # SCAN may return more keys than its COUNT: the batch in flight is what the third delete call got
        assert len(in_backup) - len(gone) == calls[2], 'only the batch in flight may be in the backup and not deleted'

        rerun = sweep(capsys, server, state='swept', backup_path=str(backup), batch_size=20)
        assert rerun['_rc'] == 0 and rerun['deleted'] == 100 - len(gone)
        sweep(capsys, server, state='restored', backup_path=str(backup))
        assert dump_redis(client) == original
    finally:
        server.stop()


def test_backup_failing_mid_sweep_deletes_nothing_it_did_not_record(capsys, redis_server, tmp_path, monkeypatch):
    client = redis_server.client()
    seed_redis(client, expired=200, valid=10)
    original = dump_redis(client)
    real_fsync = os.fsync
    synced = []

    def disk_full_after_three_writes(fd):
        # three fsyncs succeed (the header, its directory, the first entries); then the disk is full
        if len(synced) >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, 'fsync', disk_full_after_three_writes)
    backup = tmp_path / 'b.jsonl'
    failed = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=20)
    monkeypatch.undo()
    assert failed['failed'] is True and '\n' not in failed['msg']
    assert f'writing backup_path {backup} failed (No space left on device)' in failed['msg']
    assert 'free space, then re-run' in failed['msg']
    gone = {key.decode() for key in set(original) - set(dump_redis(client))}
    assert gone, 'the batches whose backup was durable are deleted'
    assert gone <= set(backed_up_keys(backup)), 'a session was deleted without a durable backup line'

    rerun = sweep(capsys, redis_server, state='swept', backup_path=str(backup), batch_size=20)
    assert rerun['_rc'] == 0 and rerun['deleted'] == 200 - len(gone)
    sweep(capsys, redis_server, state='restored', backup_path=str(backup))
    assert dump_redis(client) == original


@pytest.mark.parametrize('args, message', [
    ({'key_pattern': '*'}, "key_pattern '*' has no literal prefix and would match every key in the database"),
    ({'key_pattern': 'vllm:[session:*'}, 'has an unbalanced [ ]'),
    ({'state': 'swept'}, 'state=swept needs backup_path'),
    ({'state': 'restored'}, 'state is restored but all of the following are missing: backup_path'),
    ({'cutoff': 'tomorrow-ish'}, "cutoff: 'tomorrow-ish' is not ISO 8601"),
    ({'batch_size': 0}, 'batch_size 0 is out of range'),
])
def test_bad_arguments_fail_with_one_line_and_touch_nothing(capsys, redis_server, args, message):
    client = redis_server.client()
    seed_redis(client, expired=3)
    before = dump_redis(client)
    result = sweep(capsys, redis_server, **args)
    assert result['failed'] is True and message in result['msg'] and '\n' not in result['msg']
    assert 'Traceback' not in json.dumps(result) and 'exception' not in result
    assert dump_redis(client) == before


def test_unreachable_store_fails_with_one_line(capsys, tmp_path):
    port = free_port()
    result = run_module(vllm_session_sweep, {'login_host': '127.0.0.1', 'login_port': port, 'timeout': 2}, capsys)
    assert result['failed'] is True
    assert result['msg'].startswith(f'cannot reach Redis at 127.0.0.1:{port} (')
    assert 'check login_host/login_port' in result['msg']


def test_wrong_password_fails_with_one_line_and_no_secret(capsys, tmp_path):
    with RedisServer(workdir=str(tmp_path / 'r'), password='right-pass') as server:
        seed_redis(server.client(), expired=2)
        result = sweep(capsys, server, login_password='wrong-pass-value', state='swept', backup=False)
        assert result['failed'] is True
        assert 'rejected the credentials' in result['msg'] and 'check login_user and login_password' in result['msg']
        assert 'wrong-pass-value' not in json.dumps(result)
        assert server.client().dbsize() == 2


def test_unreadable_backup_fails_restore_with_one_line(capsys, redis_server, tmp_path):
    bad = tmp_path / 'not-a-backup.jsonl'
    bad.write_text('{"key": "x"\n')
    missing = sweep(capsys, redis_server, state='restored', backup_path=str(tmp_path / 'missing.jsonl'))
    assert missing['failed'] is True and 'cannot be read (No such file or directory)' in missing['msg']
    garbled = sweep(capsys, redis_server, state='restored', backup_path=str(bad))
    assert garbled['failed'] is True and 'has no vllm_dr backup header on its first line' in garbled['msg']


def test_unwritable_backup_path_fails_before_deleting(capsys, redis_server, tmp_path):
    seed_redis(redis_server.client(), expired=4)
    (tmp_path / 'a-file').write_text('')
    result = sweep(capsys, redis_server, state='swept', backup_path=str(tmp_path / 'a-file' / 'such' / 'dir.jsonl'))
    assert result['failed'] is True and 'not a directory' in result['msg'].lower()
    assert redis_server.client().dbsize() == 4


EXPIRY_CORPUS = [
    '2024-07-10T12:00:00Z', '2024-07-10T12:00:00z', '2024-07-10 12:00:00', '2024-07-10T12:00:00.5Z',
    '2024-07-10T12:00:00.1234567Z', '2024-07-10T12:00:00+05:30', '2024-07-10T12:00:00-08:00', '2024-07-10T12:00:00-0800',
    '2024-02-29T00:00:00Z', '2023-02-29T00:00:00Z', '2024-02-30T00:00:00Z', '2024-13-01T00:00:00Z', '2024-07-10T24:00:00Z',
    '2024-07-10T12:60:00Z', '2024-07-10', '2024-07-10T12:00', '20240710T120000Z', '2999-12-31T23:59:59Z',
    '1720612800', '1720612800.25', '1720612800000', '99999999999', '100000000001', '1e9', ' 1720612800 ', '-5', '0',
    'inf', 'nan', 'NaN', '0x10', 'soon', '', '2024-07-10T12:00:00+24:00', '2024-07-10T12:00:00Z ', '１７２０６１２８００',
]


def test_every_expiry_form_is_judged_as_the_parser_reads_it(capsys, redis_server):
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import parse_expiry

    client = redis_server.client()
    cutoff = 1720612800.25  # 2024-07-10T12:00:00.25Z
    for index, value in enumerate(EXPIRY_CORPUS):
        client.hset(f'{PREFIX}c{index}', mapping={'expires_at': value, 'refresh_token': 'rt'})
    expected = {f'c{i}' for i, value in enumerate(EXPIRY_CORPUS)
                if parse_expiry(value.encode()) is not None and parse_expiry(value.encode()) < cutoff}
    malformed = sum(parse_expiry(value.encode()) is None for value in EXPIRY_CORPUS)
    result = sweep(capsys, redis_server, cutoff=repr(cutoff), state='swept', backup=False, batch_size=len(EXPIRY_CORPUS))
    assert result['malformed'] == malformed
    left = {key.decode()[len(PREFIX):] for key in client.scan_iter(match=PREFIX + '*')}
    assert {f'c{i}' for i in range(len(EXPIRY_CORPUS))} - left == expected


def test_acl_without_a_script_command_fails_instead_of_deleting_nothing(capsys, tmp_path):
    acl = ('user sweeper on >pw ~vllm:session:* -@all +ping +hello +scan +evalsha +script|load '
           '+script|exists +type +pttl +hgetall +get +hget +unlink +exists')
    with RedisServer(workdir=str(tmp_path / 'r'), admin=('admin', 'admin-pw'), config=['user default off', acl]) as server:
        seed_redis(server.client(), expired=3)
        result = sweep(capsys, server, login_user='sweeper', login_password='pw', state='swept', backup=False)
        assert result['failed'] is True and 'denied a command to this user' in result['msg']
        assert server.client().dbsize() == 3
