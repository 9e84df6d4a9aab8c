"""pytest fixtures that start real servers for a test and stop them afterwards."""

from __future__ import annotations

import pytest

from harness.keycloak import KeycloakServer
from harness.servers import STORE_SERVERS, EtcdServer, RedisServer


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


@pytest.fixture(params=STORE_SERVERS)
def store_kind(request):
    """Each Redis-protocol server the session-store suite runs on, in turn: redis (Debian's 7.0), valkey (8.1)."""
    return request.param


@pytest.fixture
def store_server(tmp_path, store_kind):
    """A fresh server of each kind in turn (redis, valkey) for one test."""
    with RedisServer(workdir=str(tmp_path / store_kind), kind=store_kind) as server:
        yield server


@pytest.fixture(scope='session')
def keycloak(tmp_path_factory):
    """One real Keycloak for the whole test session (it takes a minute or two to start); each test makes a realm."""
    with KeycloakServer(workdir=str(tmp_path_factory.mktemp('keycloak'))) as server:
        yield server
