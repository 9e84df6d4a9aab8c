"""The test harness starts real servers on free loopback ports and leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

from harness.servers import EtcdServer, RedisServer, port_open, process_alive
from lab.labctl import Lab


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


def test_a_lab_restart_from_another_process_does_not_wait_out_its_stop_timeouts(tmp_path):
    """`labctl restart` (the runbook's restart command) runs in a process that is not the gateway's parent: the
    stopped gateway stays a zombie until the process that started the lab reaps it. The stop sees it gone at once,
    instead of waiting out its SIGTERM and SIGKILL time limits (15 s) for a process that runs nothing."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=1)
    try:
        old = lab.state['pids']['gateway']
        started = time.monotonic()
        out = subprocess.run(lab.inventory()['all']['children']['vllm']['hosts']['lab']['vllm_dr_restart_command'],
                             shell=True, capture_output=True, text=True, timeout=60, check=False)
        took = time.monotonic() - started
        assert out.returncode == 0, out.stdout + out.stderr
        assert process_alive(old) is False
        assert took < 8, f'the restart took {took:.1f} s'
        lab.state = lab._load()  # pylint: disable=protected-access
        assert lab.state['pids']['gateway'] != old and process_alive(lab.state['pids']['gateway'])
    finally:
        lab.down()


def test_process_alive_counts_a_zombie_of_another_parent_as_gone():
    """A process whose parent does not reap it yet: a zombie is gone, its parent alive."""
    parent = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys, time\n'  # pylint: disable=consider-using-with
                               'child = subprocess.Popen(["true"])\nprint(child.pid, flush=True)\ntime.sleep(30)'],
                              stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while process_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(child)
        assert process_alive(parent.pid)
    finally:
        parent.kill()
        parent.wait()
    assert not process_alive(parent.pid)
