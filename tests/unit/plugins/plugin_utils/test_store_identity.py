"""Hosts that share a session store sweep it once: the first host of the play that uses it."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._store_identity import store_identity, store_sweeper


@pytest.mark.parametrize('one, other', [
    ({}, {'backend': 'redis', 'login_host': 'localhost', 'login_port': 6379}),
    ({'login_host': 'Redis-0'}, {'login_host': 'redis-0', 'login_password': 'another secret'}),
    ({'backend': 'redis_sentinel', 'sentinel_hosts': ['a:1', 'b:2']},
     {'backend': 'redis_sentinel', 'sentinel_hosts': ['b:2', 'a:1'], 'login_host': 'ignored'}),
    ({'backend': 'etcd', 'etcd_endpoints': ['http://e:2379/', 'http://f:2379']},
     {'backend': 'etcd', 'etcd_endpoints': ['http://f:2379', 'http://e:2379'], 'etcd_password': 'x'}),
], ids=['defaults', 'credentials-and-case', 'sentinels-in-any-order', 'etcd-endpoints-in-any-order'])
def test_options_that_name_the_same_store_are_one_store(one, other):
    assert store_identity(one) == store_identity(other)


@pytest.mark.parametrize('one, other', [
    ({'login_port': 6379}, {'login_port': 6380}),
    ({'db': 0}, {'db': 1}),
    ({'key_pattern': 'vllm:session:*'}, {'key_pattern': 'canary:session:*'}),
    ({'backend': 'redis'}, {'backend': 'redis_cluster'}),
    ({'backend': 'etcd', 'key_prefix': 'a/'}, {'backend': 'etcd', 'key_prefix': 'b/'}),
], ids=['port', 'db', 'pattern', 'backend', 'prefix'])
def test_options_that_name_other_sessions_are_other_stores(one, other):
    assert store_identity(one) != store_identity(other)


def test_the_first_host_of_the_play_that_uses_a_store_sweeps_it():
    stores = {'b': {'login_host': 'r1'}, 'c': {'login_host': 'r2'}, 'd': {'login_host': 'r1'}, 'e': {'login_host': 'r2'}}
    hosts = ['a', 'b', 'c', 'd', 'e']
    assert [store_sweeper(hosts, stores, host) for host in hosts] == [None, 'b', 'c', 'b', 'c']
