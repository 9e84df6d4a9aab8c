"""Backup lines: the batch formatter writes exactly what the JSON encoder writes, and lines read back to the same bytes."""

from __future__ import annotations

import errno
import json
import os

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.backup import (
    BackupWriter, Entry, backup_lines, header, read_backup)

ENTRIES = [
    Entry(b'vllm:session:a', 'hash', fields={b'access_token': b'at', b'refresh_token': b'rt', b'expires_at': b'1720612800'}),
    Entry(b'vllm:session:b', 'hash', fields={b'expires_at': b'2024-07-10T12:00:00Z'}, pexpireat=1720612800123),
    Entry(b'vllm:session:quote"back\\slash', 'hash', fields={b'n\nl': b'tab\t', b'ctl': b'\x01\x7f'}),
    Entry('vllm:session:ünï'.encode(), 'hash', fields={'名'.encode(): '値 \u2028 😀'.encode()}),
    Entry(b'vllm:session:\xff', 'hash', fields={b'expires_at': b'\xfe\xff'}),
    Entry(b'vllm:session:c', 'hash', fields={b'b64:looks-encoded': b'x'}),
    Entry(b'vllm:session:d', 'hash', fields={b'\xc3': b'ok'}),
    Entry(b'vllm:session:i', 'hash', fields={b'x': b'a value with b64: inside', b'y': b'slash/ ~ {}'}, pexpireat=0),
    Entry(b'vllm:session:j', 'hash', fields={b'del': b'\x7f', b'us': b'\x1f'}),
    Entry(b'vllm:session:e', 'string', value=b'a string where a session hash belongs', pexpireat=5),
    Entry(b'vllm:session:f', 'string', value=b''),
    Entry(b'vllm/session/g', 'json', value=b'{"expires_at": 1}', version=42, lease=7),
    Entry(b'vllm/session/h', 'json', value=b'not json', version=43),
]


def encoded(entries):
    return b''.join(json.dumps(entry.to_record(), separators=(",", ":")).encode() + b'\n' for entry in entries)


@pytest.mark.parametrize('entry', ENTRIES, ids=range(len(ENTRIES)))
def test_line_is_the_json_encoding_of_the_record(entry):
    assert backup_lines([entry]) == encoded([entry])


PLAIN = [Entry(b'vllm:session:%d' % i, 'hash', fields={b'access_token': b'at-%d' % i, b'expires_at': b'%d' % i})
         for i in range(5)] + [ENTRIES[0], ENTRIES[1]]


def test_a_plain_batch_is_formatted_without_the_json_encoder(monkeypatch):
    expected = encoded(PLAIN)
    monkeypatch.setattr(Entry, 'to_line', lambda self: pytest.fail('the plain batch went through the JSON encoder'))
    assert backup_lines(PLAIN) == expected


@pytest.mark.parametrize('batch', [ENTRIES, PLAIN + [ENTRIES[7]], PLAIN + [ENTRIES[2]], PLAIN + [ENTRIES[8]], PLAIN + [ENTRIES[9]], []],
                         ids=['every-kind', 'b64-inside', 'needs-escapes', 'control-bytes', 'a-string', 'empty'])
def test_a_batch_is_the_json_encoding_of_each_record(batch):
    assert backup_lines(batch) == encoded(batch)


@pytest.mark.parametrize('entry', ENTRIES, ids=range(len(ENTRIES)))
def test_line_reads_back_to_the_same_bytes(entry):
    back = Entry.from_record(json.loads(entry.to_line()))
    assert (back.key, back.kind, back.fields, back.value, back.pexpireat, back.version, back.lease) == \
        (entry.key, entry.kind, entry.fields, entry.value, entry.pexpireat, entry.version, entry.lease)


def test_queued_writes_land_in_order_and_read_back(tmp_path):
    path = str(tmp_path / 'b.jsonl')
    writer = BackupWriter(path, header('redis', 'here:6379', 0))
    batches = [[Entry(b'vllm:session:%d-%d' % (n, i), 'hash', fields={b'expires_at': b'%d' % i}) for i in range(3)]
               for n in range(20)]
    written = [writer.start_entries(batch) for batch in batches]
    for done in written:
        done.result(timeout=10)
    writer.write_not_deleted([batches[0][1]])
    writer.close()
    keys = [entry.key for entry in read_backup(path, 'redis')]
    # newest first: a key deleted by several runs comes back as the last run saw it
    assert keys == [entry.key for batch in batches for entry in batch if entry.key != b'vllm:session:0-1'][::-1]
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_after_a_failed_write_every_later_write_fails(tmp_path, monkeypatch):
    writer = BackupWriter(str(tmp_path / 'b.jsonl'), header('redis', 'here:6379', 0))
    writer.write_entries([Entry(b'vllm:session:a', 'hash', fields={b'expires_at': b'1'})])
    real_fsync = os.fsync

    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, 'fsync', disk_full)
    first = writer.start_entries([Entry(b'vllm:session:b', 'hash', fields={b'expires_at': b'2'})])
    with pytest.raises(BackupError, match='No space left on device'):
        first.result(timeout=10)
    monkeypatch.setattr(os, 'fsync', real_fsync)
    later = writer.start_entries([Entry(b'vllm:session:c', 'hash', fields={b'expires_at': b'3'})])
    with pytest.raises(BackupError, match='No space left on device'):
        later.result(timeout=10)
    size = os.path.getsize(writer.path)
    with pytest.raises(BackupError, match='No space left on device'):
        writer.write_not_deleted([Entry(b'vllm:session:a', 'hash', fields={b'expires_at': b'1'})])
    assert os.path.getsize(writer.path) == size, 'nothing is appended after a failed write'
    writer.close()
