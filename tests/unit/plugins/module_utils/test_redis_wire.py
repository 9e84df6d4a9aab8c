"""Commands in the Redis protocol: the batch encoder writes what the one-command encoder writes."""

from __future__ import annotations

import hiredis
import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import bulk, bulks, encode, encode_each


@pytest.mark.parametrize('keys', [
    [],
    [b'vllm:session:0x00000001'],
    [b'vllm:session:0x%08x' % i for i in range(1000)],  # one length: the joined fast path
    [b'vllm:session:a', b'vllm:session:bb', b'', b'vllm:session:\r\n\xff'],  # mixed lengths, empty, raw bytes
    [b'a\r\nb', b'c\r\nd'],  # one length, with the protocol's line break inside
])
def test_encode_each_is_one_encode_per_key(keys):
    assert encode_each(b'HGETALL', keys) == b''.join(encode((b'HGETALL', key)) for key in keys)
    assert bulks(keys) == b''.join(bulk(key) for key in keys)


def test_encoded_commands_read_back_as_sent():
    keys = [b'k1', b'k2\r\n', b'']
    reader = hiredis.Reader()
    reader.feed(encode_each(b'PTTL', keys) + encode((b'SCAN', b'0', b'COUNT', 1000)))
    assert [reader.gets() for _command in range(4)] == [[b'PTTL', key] for key in keys] + [[b'SCAN', b'0', b'COUNT', b'1000']]
    assert reader.gets() is False


@pytest.mark.parametrize('commands', [
    [(b'HGETALL', b'vllm:session:0x%08x' % i) for i in range(100)],
    [(b'SCAN', b'0', b'MATCH', b'vllm:session:*', b'COUNT', 1000), (b'PTTL', b'a\r\nb'), (b'EVALSHA', b'f' * 40, 1, b'')],
])
def test_the_encoder_writes_what_redis_py_packs(commands):
    """The sweep's own encoder and redis-py's public Connection.pack_commands agree byte for byte.

    redis-py's packer costs about 1.3 ms per 1,000 commands here against 0.02 ms, close to 2 s of a 4 s sweep of
    a million sessions; the encoder is the sweep's, and this keeps it honest against the library.
    """
    import redis  # pylint: disable=import-outside-toplevel

    packed = b''.join(redis.Connection().pack_commands(commands))
    assert b''.join(encode(command) for command in commands) == packed
