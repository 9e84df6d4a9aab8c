"""How store failures are classified (by exception class, cause and server code) and worded."""

from __future__ import annotations

import json
import ssl

import pytest
import redis
from etcd3gw import exceptions as etcd_exceptions
from redis.sentinel import MasterNotFoundError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import (
    StoreError, classify_etcd_error, classify_redis_error, describe_redis_error, server_words,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import check_store_params

TOKEN = 'rt-user-0-SECRET'


@pytest.mark.parametrize('text, words', [
    (f"ERR unknown command 'EVALSHA', with args beginning with: 'abc' '1' 'vllm:session:a' '{TOKEN}' ",
     "ERR unknown command 'EVALSHA'"),
    (f"unknown command 'EVALSHA', with args beginning with: '{TOKEN}'", "unknown command 'EVALSHA'"),
    (f"Command # 1 (EVALSHA abc 1 vllm:session:a {TOKEN}) of pipeline caused error: NOPERM no permissions",
     'NOPERM no permissions'),
    ('first line\nsecond line', 'first line'),
    ('x' * 500, 'x' * 200),
])
def test_server_words_drop_every_echo_of_the_arguments(text, words):
    assert server_words(text) == words


def _raised_from(outer, inner):
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # pylint: disable=raise-missing-from  # the implicit context, as redis-py leaves it
    except BaseException as exc:  # pylint: disable=broad-except
        return exc


@pytest.mark.parametrize('exc, kind', [
    (redis.AuthenticationError('invalid username-password pair or user is disabled.'), 'auth'),
    (redis.ResponseError('WRONGPASS invalid username-password pair'), 'auth'),
    (redis.ResponseError('NOAUTH Authentication required.'), 'auth'),
    (redis.exceptions.NoPermissionError("this user has no permissions to run the 'hmget' command"), 'noperm'),
    (redis.ResponseError("NOPERM this user has no permissions to run the 'unlink' command"), 'noperm'),
    (redis.ResponseError("ERR The user executing the script can't run this command or subcommand script: ab"), 'noperm'),
    (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), 'readonly'),
    (redis.ResponseError("READONLY You can't write against a read only replica."), 'readonly'),
    (redis.exceptions.BusyLoadingError('Redis is loading the dataset in memory'), 'loading'),
    (redis.exceptions.MovedError('12 127.0.0.1:7001'), 'resharding'),
    (redis.ResponseError('MOVED 12 127.0.0.1:7001'), 'resharding'),
    (redis.ResponseError("ERR unknown command 'EVALSHA'"), 'refused'),
    (redis.ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value'), 'refused'),
    (redis.TimeoutError('Timeout reading from socket'), 'timeout'),
    (redis.ConnectionError('Error 111 connecting to 127.0.0.1:1. Connection refused.'), 'unreachable'),
    (MasterNotFoundError("No master found for 'mymaster' : {'a': ConnectionError()}"), 'no_primary'),
    (redis.exceptions.RedisClusterException('Redis Cluster cannot be connected'), 'not_cluster'),
    (_raised_from(redis.ConnectionError('Error 1 connecting'), ssl.SSLCertVerificationError(1, 'verify failed')),
     'tls_verify'),
    (_raised_from(redis.ConnectionError('Error 8 while writing to socket'), ssl.SSLEOFError(8, 'EOF occurred')),
     'tls_handshake'),
    (redis.DataError('Invalid input'), 'failed'),
])
def test_redis_errors_are_classified_by_class_cause_and_code(exc, kind):
    assert classify_redis_error(exc) == kind


def test_a_sentinel_refusing_the_login_names_sentinel_password():
    message = describe_redis_error(redis.AuthenticationError('invalid username-password pair'),
                                   '10.0.0.5:26379', role='sentinel')
    assert message.startswith('Sentinel at 10.0.0.5:26379 rejected the credentials')
    assert 'check sentinel_password' in message and 'login_password' not in message


def test_a_redis_message_never_holds_the_echoed_arguments():
    exc = redis.ResponseError(f"ERR unknown command 'EVALSHA', with args beginning with: 'abc' '{TOKEN}' ")
    message = describe_redis_error(exc, '127.0.0.1:6379')
    assert TOKEN not in message and "unknown command 'EVALSHA'" in message


def test_a_missing_client_certificate_is_not_called_unreachable():
    exc = _raised_from(redis.ConnectionError('Error 8 while writing to socket'), ssl.SSLEOFError(8, 'EOF occurred'))
    message = describe_redis_error(exc, '127.0.0.1:6380')
    assert 'set client_cert_file and client_key_file' in message and 'cannot reach' not in message


def _etcd_reply(code, message, reason='Bad Request'):
    return etcd_exceptions.Etcd3Exception(json.dumps({'error': message, 'message': message, 'code': code}), reason)


@pytest.mark.parametrize('exc, kind', [
    (_etcd_reply(3, 'etcdserver: authentication failed, invalid user ID or password'), 'invalid'),
    (_etcd_reply(7, 'etcdserver: permission denied', 'Forbidden'), 'denied'),
    (_etcd_reply(11, 'etcdserver: mvcc: required revision has been compacted'), 'compacted'),
    (_etcd_reply(16, 'etcdserver: invalid auth token', 'Unauthorized'), 'unauthenticated'),
    (_etcd_reply(9, 'etcdserver: authentication is not enabled', 'Precondition Failed'), 'precondition'),
    (_etcd_reply(14, 'etcdserver: no leader', 'Service Unavailable'), 'unavailable'),
    (etcd_exceptions.Etcd3Exception('<html>not found</html>', 'Not Found'), 'not_etcd'),
    (etcd_exceptions.ConnectionTimeoutError('read timed out'), 'timeout'),
    (_raised_from(etcd_exceptions.ConnectionFailedError('HTTPConnectionPool(...): Max retries exceeded'),
                  ConnectionRefusedError(111, 'Connection refused')), 'unreachable'),
])
def test_etcd_errors_are_classified_by_class_and_grpc_code(exc, kind):
    assert classify_etcd_error(exc)[0] == kind


def test_etcd_texts_are_short_and_name_the_code():
    assert classify_etcd_error(_etcd_reply(11, 'etcdserver: mvcc: required revision has been compacted')) == \
        ('compacted', 'OUT_OF_RANGE: etcdserver: mvcc: required revision has been compacted')
    refused = _raised_from(etcd_exceptions.ConnectionFailedError('HTTPConnectionPool(host=...) object at 0x7f'),
                           ConnectionRefusedError(111, 'Connection refused'))
    assert classify_etcd_error(refused) == ('unreachable', 'Connection refused')
    assert classify_etcd_error(etcd_exceptions.Etcd3Exception('<html>', 'Not Found')) == \
        ('not_etcd', 'HTTP Not Found')


def store_params(**changes):
    params = dict(backend='redis', login_port=6379, db=0, timeout=10.0, sentinel_hosts=None,
                  etcd_endpoints=['http://127.0.0.1:2379'])
    params.update(changes)
    return params


@pytest.mark.parametrize('changes, words', [
    ({'timeout': 0.0}, 'timeout 0 is out of range'),
    ({'timeout': -1.0}, 'timeout -1 is out of range'),
    ({'timeout': float('nan')}, 'timeout nan is out of range'),
    ({'timeout': float('inf')}, 'timeout inf is out of range'),
    ({'login_port': 0}, 'login_port 0 is not a TCP port'),
    ({'db': -2}, 'db -2 is not a Redis database number'),
    ({'backend': 'redis_sentinel', 'sentinel_hosts': []}, 'backend=redis_sentinel needs sentinel_hosts'),
    ({'backend': 'redis_sentinel', 'sentinel_hosts': ['h:0']}, "sentinel_hosts entry 'h:0' is not host:port"),
    ({'backend': 'etcd', 'etcd_endpoints': []}, 'backend=etcd needs etcd_endpoints'),
    ({'backend': 'etcd', 'etcd_endpoints': ['file:///etc/passwd']}, "etcd_endpoints entry 'file:///etc/passwd' is not a URL"),
])
def test_store_options_out_of_range_are_refused(changes, words):
    with pytest.raises(StoreError, match='^' + words.replace('(', r'\(')):
        check_store_params(store_params(**changes))


@pytest.mark.parametrize('changes', [
    {}, {'timeout': 0.5}, {'backend': 'redis_sentinel', 'sentinel_hosts': ['10.0.0.5:26379', '[::1]:26379']},
    {'backend': 'etcd', 'etcd_endpoints': ['10.0.0.5:2379', 'https://etcd-0:2379']},
    {'backend': 'etcd', 'login_port': 0},  # a Redis option, not used by etcd
])
def test_sane_store_options_pass(changes):
    check_store_params(store_params(**changes))
