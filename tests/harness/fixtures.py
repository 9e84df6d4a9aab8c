"""pytest fixtures that start real servers for a test and stop them afterwards."""

from __future__ import annotations

import pytest

from harness.servers import EtcdServer, RedisServer


@pytest.fixture
def redis_server(tmp_path):
    """A fresh redis-server for one test."""
    with RedisServer(workdir=str(tmp_path / 'redis')) as server:
        yield server


@pytest.fixture(scope='module')
def etcd_server(tmp_path_factory):
    """One etcd per test module (it takes about a second to start); tests use their own key prefixes."""
    with EtcdServer(workdir=str(tmp_path_factory.mktemp('etcd'))) as server:
        yield server
