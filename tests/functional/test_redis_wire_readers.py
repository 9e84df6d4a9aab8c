"""The sweep's pipelined replies, read by the private hook (hiredis off the socket) and by its public fallback.

Real redis-server; the same sweep through each reader must delete, keep and back up the same sessions.
"""

from __future__ import annotations

import hiredis
import pytest
from redis.exceptions import ResponseError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_wire
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import PipelinedConnection
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import SweepOptions, Sweeper
from harness.backups import restorable
from harness.sessions import PREFIX, dump_hashes, seed_redis


@pytest.mark.parametrize('private_reads', [True, False], ids=['private hook', 'public fallback'])
def test_each_reader_answers_pipelined_commands_in_order_with_errors_in_place(redis_server, private_reads):
    client = redis_server.client(protocol=2)  # as the store asks (connection.client_kwargs)
    client.hset(PREFIX + 'a', mapping={'expires_at': '1'})
    client.set(PREFIX + 'b', 'a string')
    wire = PipelinedConnection(client, private_reads=private_reads)
    try:
        assert wire.private_reads is private_reads
        replies = wire.call([(b'HGETALL', PREFIX + 'a'), (b'HGETALL', PREFIX + 'b'), (b'PTTL', PREFIX + 'a'),
                             (b'HGETALL', PREFIX + 'gone')])
    finally:
        wire.close()
    assert replies[0] == [b'expires_at', b'1'] and replies[2] == -1 and replies[3] == []
    assert isinstance(replies[1], ResponseError) and str(replies[1]).startswith('WRONGTYPE')


@pytest.mark.parametrize('reader', ['private hook', 'public fallback'])
def test_a_sweep_deletes_keeps_and_backs_up_the_same_through_either_reader(redis_server, tmp_path, monkeypatch, reader):
    if reader == 'public fallback':
        monkeypatch.setattr(redis_wire, 'hiredis', None)  # what a host without hiredis gets
    client = redis_server.client()
    ids = seed_redis(client, expired=1500, valid=1500, malformed=20)
    params = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}
    params.update(login_host='127.0.0.1', login_port=redis_server.port)
    backup = str(tmp_path / 'backup.jsonl')
    store = open_store(params)
    try:
        assert PipelinedConnection(store.partitions()[0].client).private_reads is (reader == 'private hook')
        stats = Sweeper(store, SweepOptions(state='swept', backup_path=backup, batch_size=200)).sweep()
    finally:
        store.close()
    left = {key.decode()[len(PREFIX):] for key in dump_hashes(client)}
    assert left == set(ids['valid'] + ids['malformed'])
    assert {key.decode()[len(PREFIX):] for key in restorable(backup)} == set(ids['expired'])
    assert stats.deleted == len(ids['expired']) and hiredis is not None
