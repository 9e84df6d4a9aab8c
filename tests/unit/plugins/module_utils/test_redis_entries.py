"""HGETALL answers become the same sessions whichever protocol the connection speaks."""

from __future__ import annotations

from redis.exceptions import ResponseError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._redis_store import RedisPartition

KEYS = [b'vllm:session:a', b'vllm:session:gone', b'vllm:session:s']


def entries(replies):
    return [(entry.key, entry.kind, entry.fields) for entry in RedisPartition._entries(None, KEYS, replies, False)]


def test_resp2_lists_and_resp3_maps_give_the_same_entries():
    wrong = ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value')
    resp2 = [[b'expires_at', b'1', b'refresh_token', b'expires_at'], [], wrong]
    resp3 = [{b'expires_at': b'1', b'refresh_token': b'expires_at'}, {}, wrong]
    expected = [(KEYS[0], 'hash', {b'expires_at': b'1', b'refresh_token': b'expires_at'}), (KEYS[2], 'other', None)]
    assert entries(resp2) == entries(resp3) == expected
