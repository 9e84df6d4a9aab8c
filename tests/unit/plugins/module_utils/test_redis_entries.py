"""HGETALL answers become the same sessions whichever protocol the connection speaks; delete arguments say what was read."""

from __future__ import annotations

import hiredis
import pytest
from redis.exceptions import ResponseError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._redis_store import RedisPartition, _delete_args
from ansible_collections.inferops.vllm_dr.plugins.module_utils._session_backup import Entry

KEYS = [b'vllm:session:a', b'vllm:session:gone', b'vllm:session:s']


def entries(replies):
    return [(entry.key, entry.kind, entry.fields) for entry in RedisPartition._entries(None, KEYS, replies, False)]


def test_resp2_lists_and_resp3_maps_give_the_same_entries():
    wrong = ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value')
    resp2 = [[b'expires_at', b'1', b'refresh_token', b'expires_at'], [], wrong]
    resp3 = [{b'expires_at': b'1', b'refresh_token': b'expires_at'}, {}, wrong]
    expected = [(KEYS[0], 'hash', {b'expires_at': b'1', b'refresh_token': b'expires_at'}), (KEYS[2], 'other', None)]
    assert entries(resp2) == entries(resp3) == expected


GUARD = [b'expires_at', b'refresh_token']
FULL = [Entry(b'vllm:session:%d' % i, 'hash', {b'expires_at': b'%d' % (10 ** i), b'refresh_token': b'rt\r\n%d' % i, b'x': b''})
        for i in range(4)]
GAPS = Entry(b'vllm:session:m', 'hash', {b'refresh_token': b'rt'})
STRING = Entry(b'vllm:session:s', 'string', value=b'a string')


def expectations(entry):
    """One entry's ARGV after the guard names, decoded back from the protocol."""
    count, argv = _delete_args(GUARD)([entry])
    reader = hiredis.Reader()
    reader.feed(b'*%d\r\n%s' % (count, argv))
    return reader.gets()[1 + len(GUARD):]


@pytest.mark.parametrize('group', [FULL, FULL + [GAPS], [STRING] + FULL, [GAPS]], ids=['every-field', 'gaps', 'string', 'only-gaps'])
def test_delete_arguments_of_a_group_are_each_entry_in_turn(group):
    count, argv = _delete_args(GUARD)(group)
    reader = hiredis.Reader()
    reader.feed(b'*%d\r\n%s' % (count, argv))
    assert reader.gets() == [b'2'] + GUARD + [arg for entry in group for arg in expectations(entry)]


def test_delete_expectations_say_what_was_read():
    assert expectations(FULL[1]) == [b'hash', b'10', b'rt\r\n1']
    assert expectations(GAPS) == [b'hash?', b'!', b'=rt']
    assert expectations(STRING) == [b'string', b'a string', b'']
