"""Which server a Redis-protocol store is: Redis and Valkey name themselves in different INFO fields and HELLO."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_connection import (
    identity_from_hello, identity_from_info,
)

# INFO server as redis-py parses it, cut to the fields that tell the servers apart
REDIS_70_INFO = {'redis_version': '7.0.15', 'redis_mode': 'standalone', 'gcc_version': '12.2.0'}
VALKEY_81_INFO = {'redis_version': '7.2.4', 'server_name': 'valkey', 'valkey_version': '8.1.8', 'redis_mode': 'standalone'}


def test_redis_is_named_by_its_redis_version():
    assert identity_from_info(REDIS_70_INFO) == {'name': 'redis', 'version': '7.0.15'}


def test_valkey_is_named_by_server_name_with_its_own_version_not_the_compatible_redis_one():
    assert identity_from_info(VALKEY_81_INFO) == {'name': 'valkey', 'version': '8.1.8'}


def test_a_version_redis_py_parsed_as_a_number_is_given_back_as_text():
    assert identity_from_info({'redis_version': 8.2}) == {'name': 'redis', 'version': '8.2'}


def test_hello_in_resp2_is_a_flat_list_of_pairs():
    reply = [b'server', b'valkey', b'version', b'8.1.8', b'proto', 2, b'id', 3, b'mode', b'standalone']
    assert identity_from_hello(reply) == {'name': 'valkey', 'version': '8.1.8'}
    assert identity_from_hello({b'server': b'redis', b'version': b'7.0.15'}) == {'name': 'redis', 'version': '7.0.15'}


def test_a_hello_reply_without_a_server_is_unknown():
    assert identity_from_hello([b'proto', 2]) == {'name': None, 'version': None}
    assert identity_from_hello(None) == {'name': None, 'version': None}
