"""Backup lines: the fast text path writes exactly what the JSON encoder writes, and reads back to the same bytes."""

from __future__ import annotations

import json

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._session_backup import Entry

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


@pytest.mark.parametrize('entry', ENTRIES, ids=range(len(ENTRIES)))
def test_line_is_the_json_encoding_of_the_record(entry):
    assert entry.to_line() == json.dumps(entry.to_record(), separators=(",", ":")).encode()


@pytest.mark.parametrize('entry', ENTRIES, ids=range(len(ENTRIES)))
def test_line_reads_back_to_the_same_bytes(entry):
    back = Entry.from_record(json.loads(entry.to_line()))
    assert (back.key, back.kind, back.fields, back.value, back.pexpireat, back.version, back.lease) == \
        (entry.key, entry.kind, entry.fields, entry.value, entry.pexpireat, entry.version, entry.lease)
