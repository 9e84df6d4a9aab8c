# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Errors of the session stores, and what each client library's exceptions mean.

A failure is classified by the exception's class (and the exceptions it was raised
from), by the error code a server puts first in its reply, or by etcd's gRPC status
code, never by the wording of a message; each store turns the class into a one-line
message that names the option to fix.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import json
import ssl

try:
    import redis
    import redis.sentinel
except ImportError:
    pass  # the Redis store reports the missing library before any error can be classified

# Where a server or a client library starts repeating the request it refused. Redis answers an
# unknown (or renamed) command with its first arguments, and redis-py puts the whole command in
# front of a pipeline's error: with a script's arguments, that is a session's refresh token.
_ECHO_AFTER = (', with args beginning with:', ' with args beginning with:')
_ECHO_BEFORE = ' of pipeline caused error: '

MESSAGE_LIMIT = 200


class StoreError(Exception):
    """A session store problem; the message is one line naming the problem and the fix, never a token.

    ``refused`` is true when the server answered the failed request with an error, so that
    request changed nothing (false: no answer came, its outcome is unknown).
    """

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def server_words(text: str) -> str:
    """A server's error text fit for a message: its first line, without any echo of the request's arguments."""
    text = str(text).strip()
    text = text.splitlines()[0] if text else ''
    if _ECHO_BEFORE in text:
        text = text.rpartition(_ECHO_BEFORE)[2]
    for marker in _ECHO_AFTER:
        if marker in text:
            text = text.split(marker, 1)[0]
    return text.strip()[:MESSAGE_LIMIT]


def exception_chain(exc: BaseException):
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


# ---- Redis ---------------------------------------------------------------------------------------

def redis_error_text(exc: BaseException) -> str:
    """The server's (or the client library's) words for ``exc``, without any echo of the command's arguments."""
    return server_words(str(exc)) or type(exc).__name__


# Redis 7.0 answers an ACL denial inside a script with a plain ERR and this sentence; later versions
# and every other path say NOPERM (redis-py: NoPermissionError).
_SCRIPT_ACL_DENIAL = "The user executing the script can't run this command"

# The error codes Redis puts first in an error reply. redis-py turns the common ones into exception
# classes (and drops the code from the text); replies read off the wire keep it.
_CODES = {
    'WRONGPASS': 'auth', 'NOAUTH': 'auth', 'NOPERM': 'noperm', 'READONLY': 'readonly', 'LOADING': 'loading',
    'MASTERDOWN': 'loading', 'MOVED': 'resharding', 'ASK': 'resharding', 'TRYAGAIN': 'resharding',
    'CLUSTERDOWN': 'resharding', 'OOM': 'oom',
}

# TLS alerts (OpenSSL reason codes) that mean the other side does not speak TLS at all
_NOT_TLS = ('WRONG_VERSION_NUMBER', 'HTTP_REQUEST', 'UNKNOWN_PROTOCOL', 'PACKET_LENGTH_TOO_LONG', 'RECORD_LAYER_FAILURE')


def _server_code(exc: BaseException):
    """The error code of a reply read straight off the wire (``NOPERM`` of ``NOPERM this user ...``), or None."""
    if not isinstance(exc, redis.ResponseError):
        return None
    word = redis_error_text(exc).split(' ', 1)[0]
    return word if word.isalpha() and word.isupper() else None


def classify_redis_error(exc: BaseException) -> str:
    """What went wrong, from the exception's class, the exception it came from, and the server's error code.

    One of: auth, noperm, tls_verify, tls_handshake, tls_plain, readonly, loading, resharding, oom,
    no_primary, not_cluster, timeout, unreachable, refused (any other error reply), failed.
    """
    for link in exception_chain(exc):
        if isinstance(link, ssl.SSLCertVerificationError):
            return 'tls_verify'
        if isinstance(link, ssl.SSLError):
            return 'tls_plain' if getattr(link, 'reason', None) in _NOT_TLS else 'tls_handshake'
    if isinstance(exc, (redis.AuthenticationError, getattr(redis.exceptions, 'AuthorizationError', redis.AuthenticationError))):
        return 'auth'
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return 'noperm'
    if isinstance(exc, redis.exceptions.ReadOnlyError):
        return 'readonly'
    if isinstance(exc, redis.exceptions.BusyLoadingError):
        return 'loading'
    if isinstance(exc, (redis.exceptions.AskError, redis.exceptions.TryAgainError, redis.exceptions.ClusterDownError)):
        return 'resharding'
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return 'oom'
    if isinstance(exc, redis.sentinel.MasterNotFoundError):
        return 'no_primary'
    code = _server_code(exc)
    if code in _CODES:
        return _CODES[code]
    if isinstance(exc, redis.TimeoutError):
        return 'timeout'
    if isinstance(exc, redis.ConnectionError):
        return 'unreachable'
    if isinstance(exc, redis.ResponseError):
        return 'noperm' if _SCRIPT_ACL_DENIAL in str(exc) else 'refused'
    if isinstance(exc, redis.exceptions.RedisClusterException):
        return 'not_cluster'
    return 'failed'


# What a message names, by the kind of server reached: (noun, address options, credential options)
_ROLES = {
    'redis': ('Redis', 'login_host/login_port', 'login_user and login_password'),
    'sentinel': ('Sentinel', 'sentinel_hosts', "sentinel_password (the Sentinels' own password, not the primary's)"),
}

SWEEPER_GRANTS = ('+scan +evalsha +script|load +type +pttl +hgetall +get +hget +hmget +unlink +exists +hset '
                  '+set +pexpireat +time')


def describe_redis_error(exc: BaseException, location: str, role: str = 'redis') -> str:
    """One line for a failure talking to ``location``: what happened and which option fixes it."""
    noun, address, credentials = _ROLES[role]
    text = redis_error_text(exc)
    kind = classify_redis_error(exc)
    at = f'{noun} at {location}'
    messages = {
        'auth': f'{at} rejected the credentials ({text}); check {credentials}',
        'noperm': (f'{at} denied a command to this user ({text}); grant the ACL user {SWEEPER_GRANTS} on the session keys'
                   if role == 'redis' else f'{at} denied a command to this user ({text}); allow it +sentinel|masters'),
        'tls_verify': f'TLS with {at} failed: the server certificate is not trusted ({text}); '
                      'check tls, ca_certs, validate_certs (ca_certs must hold the CA that signed it)',
        'tls_handshake': f'TLS with {at} failed: the server ended the handshake ({text}); it requires a client '
                         'certificate it trusts: set client_cert_file and client_key_file',
        'tls_plain': f'TLS with {at} failed: the server does not speak TLS on that port ({text}); '
                     f'set tls=false or give its TLS port in {address}',
        'readonly': f'{at} is a read-only replica ({text}); give the primary in {address}, or use backend=redis_sentinel',
        'loading': f'{at} is not ready ({text}); re-run when it has loaded its data or found its primary',
        'resharding': f'{at} answered that its slots moved ({text}); re-run when the reshard or failover is done',
        'oom': f'{at} is out of memory ({text}); free memory on the server, then re-run',
        'no_primary': f'the Sentinels name no primary at the moment ({type(exc).__name__}); '
                      'a failover may be in progress: re-run when it is done',
        'not_cluster': f'{at} is not a usable Redis Cluster ({text}); check backend and {address}',
        'timeout': f'{at} did not answer in time ({text}); check {address} and that the server is up, or raise timeout',
        'unreachable': f'cannot reach {at} ({text}); check {address}, tls and that the server is up',
        'refused': f'{at} refused a command ({text}); check that it allows the commands the module needs '
                   '(rename-command, ACL)',
    }
    return messages.get(kind, f'{at} failed: {text}')


# ---- etcd ----------------------------------------------------------------------------------------

# The gRPC status codes etcd answers with (the JSON gateway puts them in the body's "code").
_GRPC_KINDS = {
    3: 'invalid',            # INVALID_ARGUMENT: a failed login, or no user where auth is on
    4: 'unavailable',        # DEADLINE_EXCEEDED
    7: 'denied',             # PERMISSION_DENIED
    8: 'unavailable',        # RESOURCE_EXHAUSTED
    9: 'precondition',       # FAILED_PRECONDITION: e.g. a login where auth is off
    11: 'compacted',         # OUT_OF_RANGE: the revision read at was compacted
    14: 'unavailable',       # UNAVAILABLE: no leader
    16: 'unauthenticated',   # UNAUTHENTICATED: the auth token expired or is unknown
}
_GRPC_NAMES = {3: 'INVALID_ARGUMENT', 4: 'DEADLINE_EXCEEDED', 7: 'PERMISSION_DENIED', 8: 'RESOURCE_EXHAUSTED',
               9: 'FAILED_PRECONDITION', 11: 'OUT_OF_RANGE', 13: 'INTERNAL', 14: 'UNAVAILABLE', 16: 'UNAUTHENTICATED'}


def _connection_reason(exc: BaseException) -> str:
    """The operating system's reason a connection failed (``Connection refused``), not the HTTP library's dump."""
    for link in exception_chain(exc):
        if isinstance(link, OSError) and link.strerror:
            return link.strerror
    return 'no connection'


def classify_etcd_error(exc: BaseException):
    """(kind, text) of a failed etcd call, from the exception's class and etcd's gRPC status code.

    kind is one of the _GRPC_KINDS values, tls_verify, tls_handshake, timeout, unreachable,
    not_etcd (an HTTP answer that is not etcd's) or failed; text is short and echoes no request.
    """
    # imported here: etcd3gw brings requests along, which a Redis sweep has no use for (memory, start-up time);
    # the etcd store reports a missing library before any error can be classified
    from etcd3gw import exceptions as etcd_exceptions  # pylint: disable=import-outside-toplevel
    for link in exception_chain(exc):
        if isinstance(link, ssl.SSLCertVerificationError):
            return 'tls_verify', server_words(link.verify_message or link.reason or 'certificate verify failed')
        if isinstance(link, ssl.SSLError):
            return 'tls_handshake', server_words(link.reason or type(link).__name__)
    if isinstance(exc, etcd_exceptions.ConnectionTimeoutError):
        return 'timeout', 'no answer in time'
    if isinstance(exc, etcd_exceptions.ConnectionFailedError) and not exc.args:  # no HTTP status: no answer
        return 'unreachable', _connection_reason(exc)
    if isinstance(exc, etcd_exceptions.ApiVersionDiscoveryFailedError):
        return 'not_etcd', 'no etcd version API'
    if isinstance(exc, etcd_exceptions.Etcd3Exception):
        try:
            body = json.loads(exc.detail_text or '')
        except ValueError:
            body = None
        status = ' '.join(str(arg) for arg in exc.args) or 'no status'
        if not isinstance(body, dict) or not isinstance(body.get('code'), int):
            return 'not_etcd', f'HTTP {status}'
        code = body['code']
        name = _GRPC_NAMES.get(code, f'gRPC code {code}')
        message = server_words(body.get('message') or body.get('error') or '')
        return _GRPC_KINDS.get(code, 'failed'), f'{name}: {message}' if message else name
    if isinstance(exc, ValueError):  # an answer that is not JSON
        return 'not_etcd', 'the answer is not JSON'
    return 'failed', server_words(str(exc)) or type(exc).__name__
