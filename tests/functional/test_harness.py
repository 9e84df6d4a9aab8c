"""The test harness starts real servers on free loopback ports and leaves nothing behind."""

from __future__ import annotations

import json
import os
import urllib.request

from harness.servers import EtcdServer, RedisServer, port_open


def test_redis_server_is_real_and_gone_after_stop():
    server = RedisServer().start()
    try:
        client = server.client()
        client.hset('vllm:session:0x1a2b3c', mapping={'expires_at': '2024-07-10T12:00:00Z'})
        assert client.hget('vllm:session:0x1a2b3c', 'expires_at') == b'2024-07-10T12:00:00Z'
        assert client.info('server')['redis_version'].startswith('7.')
        port, directory = server.port, server.dir
    finally:
        server.stop()
    assert not port_open(port)
    assert not os.path.exists(directory)


def test_redis_fixture_gives_each_test_an_empty_server(redis_server):
    assert redis_server.client().dbsize() == 0


def test_two_redis_servers_get_different_ports():
    with RedisServer() as first, RedisServer() as second:
        assert first.port != second.port
        first.client().set('k', '1')
        assert second.client().get('k') is None


def test_etcd_server_serves_the_v3_api_and_stops():
    with EtcdServer() as server:
        request = urllib.request.Request(
            f'{server.url}/v3/kv/put', data=json.dumps({'key': 'dmxsbQ==', 'value': 'eA=='}).encode(), method='POST')
        with urllib.request.urlopen(request, timeout=5) as response:
            assert 'header' in json.load(response)
        port = server.port
    assert not port_open(port)
