"""Backup files as series of runs: one writer, torn tails cut or skipped, not_deleted exact, foreign files refused."""

from __future__ import annotations

import json
import os
import random
import stat

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import backup as _session_backup
from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.backup import (
    BackupReader, BackupWriter, Entry, header, prepare_backup_path, read_backup)


def session(name, expires=b'1', token=b'rt'):
    return Entry(b'vllm:session:' + name, 'hash', fields={b'expires_at': expires, b'refresh_token': token})


def write_run(path, batches, kept=()):
    writer = BackupWriter(str(path), header('redis', 'here:6379', 0))
    for batch in batches:
        writer.write_entries(batch)
    writer.write_not_deleted(list(kept))
    writer.close()
    return writer


def keys(path, backend='redis'):
    return [entry.key for entry in read_backup(str(path), backend)]


def test_not_deleted_cancels_only_the_entry_it_answers_never_an_earlier_one_of_the_same_key(tmp_path):
    # SCAN listed a twice: the first entry was deleted, the second delete found it gone
    first, again = session(b'a'), session(b'a')
    write_run(tmp_path / 'b.jsonl', [[first, session(b'b')], [again]], kept=[again])
    assert keys(tmp_path / 'b.jsonl') == [b'vllm:session:b', b'vllm:session:a']


def test_not_deleted_of_one_run_never_cancels_another_runs_entries(tmp_path):
    path = tmp_path / 'b.jsonl'
    write_run(path, [[session(b'a'), session(b'b')]])
    kept = session(b'a')
    write_run(path, [[kept]], kept=[kept])
    assert sorted(keys(path)) == [b'vllm:session:a', b'vllm:session:b']


def test_a_key_several_runs_deleted_comes_back_as_the_last_run_saw_it(tmp_path):
    path = tmp_path / 'b.jsonl'
    write_run(path, [[session(b'a', token=b'old')]])
    write_run(path, [[session(b'a', token=b'new')]])
    assert [entry.fields[b'refresh_token'] for entry in read_backup(str(path), 'redis')] == [b'new', b'old']


def test_a_rerun_after_a_torn_write_cuts_the_torn_line_and_every_run_reads_back(tmp_path):
    path = tmp_path / 'b.jsonl'
    write_run(path, [[session(b'a'), session(b'b')]])
    with open(path, 'ab') as handle:
        handle.write(b'{"key":"vllm:session:c","type":"hash","fiel')  # the write the disk refused half-way
    writer = write_run(path, [[session(b'd')]])
    assert writer.repaired == len(b'{"key":"vllm:session:c","type":"hash","fiel')
    assert sorted(keys(path)) == [b'vllm:session:a', b'vllm:session:b', b'vllm:session:d']
    assert all(json.loads(line) for line in path.read_bytes().splitlines())


def test_a_torn_last_line_is_reported_and_skipped_not_refused(tmp_path):
    path = tmp_path / 'b.jsonl'
    write_run(path, [[session(b'a'), session(b'b')]])
    with open(path, 'ab') as handle:
        handle.write(b'{"key":"vllm:session:c","ty')
    with BackupReader(str(path), 'redis') as reader:
        assert sorted(entry.key for entry in reader.entries()) == [b'vllm:session:a', b'vllm:session:b']
        assert reader.invalid == 1 and 'torn last line' in reader.invalid_samples[0]


BAD_LINES = [
    ({'key': None, 'type': 'hash', 'fields': {'a': 'b'}}, 'key is neither text'),
    ({'key': 'vllm:session:x', 'type': 'hash'}, 'without "fields"'),
    ({'key': 'vllm:session:x', 'type': 'hash', 'fields': {}}, 'without "fields"'),
    ({'key': 'vllm:session:x', 'type': 'hash', 'fields': {'a': 1}}, 'a field value is neither'),
    ({'key': 'vllm:session:x', 'type': 'hash', 'fields': ['a']}, 'without "fields"'),
    ({'key': 'vllm:session:x', 'type': 'string'}, 'needs "value"'),
    ({'key': 'vllm:session:x', 'type': 'string', 'value': None}, 'needs "value"'),
    ({'key': 'vllm:session:x', 'type': 7, 'value': 'v'}, '"type" is missing'),
    ({'key': 'vllm:session:x', 'type': 'string', 'value': 'v', 'pexpireat': 'soon'}, '"pexpireat" is not'),
    ({'key': {'b64': '!!'}, 'type': 'string', 'value': 'v'}, 'key is neither'),
    ({'key': 'vllm:session:x', 'type': 'hash', 'fields': {'b64:%%': 'v'}}, 'not base64'),
    ([1, 2], 'not a JSON object'),
]


@pytest.mark.parametrize('record, why', BAD_LINES, ids=range(len(BAD_LINES)))
def test_a_line_that_is_not_a_valid_entry_is_counted_and_named_never_read_as_one(tmp_path, record, why):
    path = tmp_path / 'b.jsonl'
    write_run(path, [[session(b'a')]])
    with open(path, 'a', encoding='utf-8') as handle:
        handle.write(json.dumps(record) + '\n')
    with BackupReader(str(path), 'redis') as reader:
        assert [entry.key for entry in reader.entries()] == [b'vllm:session:a']
        assert reader.invalid == 1 and why in reader.invalid_samples[0] and 'line 3' in reader.invalid_samples[0]
        assert 'vllm:session:x' not in reader.invalid_samples[0]


def test_format_1_files_still_read_with_not_deleted_by_key(tmp_path):
    path = tmp_path / 'old.jsonl'
    lines = [{'vllm_dr_backup': 1, 'backend': 'redis'},
             {'key': 'vllm:session:a', 'type': 'hash', 'fields': {'expires_at': '1'}},
             {'key': 'vllm:session:b', 'type': 'hash', 'fields': {'expires_at': '1'}},
             {'key': 'vllm:session:a', 'type': 'hash', 'fields': {'expires_at': '2'}},
             {'not_deleted': ['vllm:session:a']}]
    path.write_text(''.join(json.dumps(line) + '\n' for line in lines))
    entries = read_backup(str(path), 'redis')
    assert [(entry.key, entry.fields[b'expires_at']) for entry in entries] == \
        [(b'vllm:session:b', b'1'), (b'vllm:session:a', b'1')]


def test_the_file_is_read_backwards_across_blocks_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setattr(_session_backup, '_BLOCK', 7)
    rng = random.Random(5)
    lines = [b'x' * rng.randint(0, 20) for _line in range(200)]
    for ending in (b'\n', b''):
        path = tmp_path / f'lines{len(ending)}'
        path.write_bytes(b'\n'.join(lines) + ending)
        with open(path, 'rb') as handle:
            assert list(_session_backup._lines_backwards(handle, len(lines))) == \
                list(reversed(list(enumerate(lines, 1))))  # pylint: disable=protected-access


def test_one_run_at_a_time_writes_a_file(tmp_path):
    path = tmp_path / 'b.jsonl'
    first = BackupWriter(str(path), header('redis', 'here:6379', 0))
    first.write_entries([session(b'a')])
    second = BackupWriter(str(path), header('redis', 'here:6379', 0))
    with pytest.raises(BackupError, match='is being written by another run right now'):
        second.write_entries([session(b'b')])
    first.close()
    write_run(path, [[session(b'c')]])
    assert sorted(keys(path)) == [b'vllm:session:a', b'vllm:session:c']


@pytest.mark.parametrize('setup, why', [
    (lambda p: (p.write_text('my notes\n'), os.chmod(p, 0o600)), 'no vllm_dr backup header'),
    (lambda p: (p.write_text(json.dumps({'vllm_dr_backup': 2, 'backend': 'redis'}) + '\n'), os.chmod(p, 0o644)),
     'mode 0644, open to others'),
    (lambda p: (p.write_text(json.dumps({'vllm_dr_backup': 2, 'backend': 'redis'}) + '\n'), os.chmod(p, 0o600),
                os.chown(p, 4242, -1)), 'owned by uid 4242'),
    (lambda p: (p.parent.joinpath('elsewhere').write_text(''), os.symlink(p.parent / 'elsewhere', p)), 'exists and is not'),
], ids=['foreign-content', 'shared-mode', 'other-owner', 'symlink'])
def test_an_existing_file_that_is_not_our_private_backup_is_refused_untouched(tmp_path, setup, why):
    path = tmp_path / 'b.jsonl'
    setup(path)
    before = (path.read_bytes(), os.lstat(path))
    for attempt in (lambda: prepare_backup_path(str(path), 'redis'), lambda: write_run(path, [[session(b'a')]])):
        with pytest.raises(BackupError, match=why):
            attempt()
    after = os.lstat(path)
    assert path.read_bytes() == before[0] and (after.st_mode, after.st_uid) == (before[1].st_mode, before[1].st_uid)


def test_an_etcd_backup_is_not_continued_by_a_redis_sweep(tmp_path):
    path = tmp_path / 'b.jsonl'
    writer = BackupWriter(str(path), header('etcd', 'here:2379', 0))
    writer.write_entries([Entry(b'vllm/session/a', 'json', value=b'{}', version=3)])
    writer.close()
    with pytest.raises(BackupError, match='holds etcd sessions but backend is redis'):
        prepare_backup_path(str(path), 'redis')


def test_a_missing_directory_is_made_private(tmp_path):
    old = os.umask(0)
    try:
        prepare_backup_path(str(tmp_path / 'run' / 'sessions.jsonl'), 'redis')
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'run').st_mode) == 0o700
