# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Redis clients opened from the session-store options: standalone, Sentinel and Cluster.

The client options (RESP2, login, timeouts, TLS), the primary the Sentinels agree on,
the primaries of a cluster, and a one-line description of why any of them could not be
reached. What the store does with the clients is redis_store.py's business.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import time
import traceback

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import (
    StoreError, classify_redis_error, describe_redis_error, exception_chain, redis_error_text,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_py_internals import sentinel_clients
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import parse_sentinel_hosts

REDIS_IMPORT_ERROR = None
try:
    import redis
    from redis.cluster import RedisCluster
    from redis.sentinel import Sentinel
except ImportError:
    REDIS_IMPORT_ERROR = traceback.format_exc()


def as_text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def tls_kwargs(params: dict) -> dict:
    if not params.get('tls'):
        return {}
    return {
        'ssl': True,
        'ssl_cert_reqs': 'required' if params['validate_certs'] else 'none',
        'ssl_check_hostname': bool(params['validate_certs']),
        'ssl_ca_certs': params.get('ca_certs'),
        'ssl_certfile': params.get('client_cert_file'),
        'ssl_keyfile': params.get('client_key_file'),
    }


def client_kwargs(params: dict) -> dict:
    kwargs = {
        # RESP2: a sweep parses a million HGETALL answers, and hiredis parses flat arrays about
        # three times faster than RESP3 maps; redis-py gives its own callers the same either way
        'protocol': 2,
        'username': params.get('login_user'),
        'password': params.get('login_password'),
        'socket_timeout': params['timeout'],
        'socket_connect_timeout': params['timeout'],
    }
    kwargs.update(tls_kwargs(params))
    return kwargs


def sentinel_views(sentinel, name: str) -> dict:
    """What each Sentinel says of service ``name``, by its address.

    A view is the primary's (host, port); 'unknown' (the Sentinel monitors no such
    service); 'down' (it sees the primary down, a failover may be under way); or the
    one-line reason the Sentinel could not be asked. A Sentinel that answers but
    refuses the login or the command stops everything: its password is wrong everywhere.
    """
    views = {}
    for client in sentinel_clients(sentinel):
        kwargs = client.get_connection_kwargs()
        address = f'{kwargs.get("host")}:{kwargs.get("port")}'
        try:
            state = client.sentinel_masters().get(name)
        except redis.RedisError as exc:
            if classify_redis_error(exc) not in ('unreachable', 'timeout'):
                raise StoreError(describe_redis_error(exc, address, role='sentinel')) from None
            views[address] = redis_error_text(exc)
            continue
        if not state:
            views[address] = 'unknown'
        elif not state.get('is_master') or state.get('is_sdown') or state.get('is_odown'):
            views[address] = 'down'
        else:
            views[address] = (as_text(state['ip']), int(state['port']))
    return views


def _no_primary_named(views: dict, name: str) -> str:
    """Why no Sentinel named a primary, in one line (the failure once the wait is over)."""
    unreachable = {address: view for address, view in views.items() if view not in ('unknown', 'down')}
    if len(unreachable) == len(views):
        reasons = '; '.join(f'{address}: {reason}' for address, reason in unreachable.items())
        return f'cannot reach any Sentinel ({reasons}); check sentinel_hosts, tls and that the Sentinels are up'
    if 'down' in views.values():
        return (f'the Sentinels see the primary of service {name} down and no failover finished in time; '
                're-run when a new primary serves, or raise timeout')
    asked = ', '.join(address for address, view in views.items() if view == 'unknown')
    return f'no Sentinel knows a master named {name} (asked {asked}); check sentinel_hosts and sentinel_service_name'


def _serves_as_primary(master, kwargs: dict):
    """None when ``master`` answers ROLE as a primary; otherwise why not, in one line (the failure once the wait is over).

    A primary that refuses the login or the command is refused at once.
    """
    location = f'{master[0]}:{master[1]}'
    client = redis.Redis(host=master[0], port=master[1], **kwargs)
    try:
        role = as_text(client.role()[0])
    except redis.RedisError as exc:
        if classify_redis_error(exc) not in ('unreachable', 'timeout', 'loading'):
            raise StoreError(describe_redis_error(exc, location)) from None
        return describe_redis_error(exc, location)
    finally:
        client.close()
    if role == 'master':
        return None
    return (f'the Sentinels name {location} as primary but it serves as {role}; a failover is still in progress: '
            're-run when the Sentinels agree on the primary, or raise timeout')


def _cluster_failure(exc: BaseException, params: dict, kwargs: dict, location: str) -> str:
    """One line for a cluster that could not be opened at ``location``.

    redis-py wraps what the node answered; when that was an error reply, the node is asked
    whether cluster mode is on at all (a standalone server given as a cluster node).
    """
    cause = next((link for link in exception_chain(exc) if isinstance(link, redis.RedisError)), exc)
    if classify_redis_error(cause) not in ('refused', 'not_cluster'):
        return describe_redis_error(cause, location)
    client = redis.Redis(host=params['login_host'], port=params['login_port'], **kwargs)
    try:
        enabled = client.info('cluster').get('cluster_enabled')
    except redis.RedisError:
        enabled = None
    finally:
        client.close()
    if enabled == 0:
        return (f'Redis at {location} is not a cluster node (cluster_enabled:0); use backend=redis for a standalone '
                'server (backend=redis_sentinel behind Sentinels), or give a cluster node in login_host/login_port')
    return describe_redis_error(cause, location)


UNKNOWN_SERVER = {'name': None, 'version': None}


def identity_from_info(info: dict) -> dict:
    """{'name', 'version'} of a server from its INFO server fields.

    Valkey names itself in ``server_name`` and gives its own version in ``valkey_version``; its
    ``redis_version`` is the Redis release it stays compatible with (7.2.4 for every Valkey 8),
    never its own. Redis has neither field (a Redis 7.0 says only ``redis_version``).
    """
    name = as_text(info.get('server_name') or 'redis').lower()
    version = info.get(f'{name}_version', info.get('redis_version'))
    return {'name': name, 'version': None if version is None else as_text(version)}


def identity_from_hello(reply) -> dict:
    """{'name', 'version'} from a HELLO reply (a map, or RESP2's flat list of pairs): ``server`` and ``version``.

    Valkey answers HELLO as valkey with its own version, unless extended-redis-compatibility is on:
    then it says redis 7.2.4, which is why INFO is asked first.
    """
    if isinstance(reply, (list, tuple)):
        reply = dict(zip(reply[::2], reply[1::2]))
    if not isinstance(reply, dict):
        return dict(UNKNOWN_SERVER)
    fields = {as_text(key): value for key, value in reply.items()}
    if 'server' not in fields:
        return dict(UNKNOWN_SERVER)
    return {'name': as_text(fields['server']).lower(),
            'version': None if fields.get('version') is None else as_text(fields['version'])}


def server_identity(client) -> dict:
    """Which server ``client`` speaks to: INFO server, or HELLO for a user the ACL denies INFO; unknown when both are denied."""
    try:
        return identity_from_info(client.info('server'))
    except redis.RedisError as exc:
        if classify_redis_error(exc) != 'noperm':
            raise
    try:
        return identity_from_hello(client.execute_command('HELLO', '2'))
    except redis.RedisError as exc:
        if classify_redis_error(exc) not in ('noperm', 'refused'):
            raise
    return dict(UNKNOWN_SERVER)


def host_port(address) -> str:
    return f'{address[0]}:{address[1]}'


def connect_standalone(params: dict, kwargs: dict):
    """(client, location) of a standalone server."""
    location = f'{params["login_host"]}:{params["login_port"]}'
    return redis.Redis(host=params['login_host'], port=params['login_port'], db=params['db'], **kwargs), location


def connect_sentinel(params: dict, kwargs: dict):
    """(sentinel, client of the primary, location, primary's (host, port)) of a service behind Sentinels."""
    sentinel_kwargs = dict(tls_kwargs(params), socket_timeout=params['timeout'],
                           socket_connect_timeout=params['timeout'])
    if params.get('sentinel_password'):
        sentinel_kwargs['password'] = params['sentinel_password']
    sentinel = Sentinel(parse_sentinel_hosts(params['sentinel_hosts']), sentinel_kwargs=sentinel_kwargs, **kwargs)
    name = params['sentinel_service_name']
    master = settled_master(sentinel, name, kwargs, params['timeout'])
    where = f'Sentinel {",".join(params["sentinel_hosts"])} service {name}'
    return sentinel, sentinel.master_for(name, db=params['db'], **kwargs), f'{master[0]}:{master[1]} ({where})', master


def settled_master(sentinel, name: str, kwargs: dict, timeout: float):
    """The primary once every reachable Sentinel names the same one and it serves as primary.

    Right after a failover a Sentinel can still list the old primary, which has not
    been demoted yet; sweeping it would delete from a server about to be replaced. So
    every Sentinel is asked, until they agree or ``timeout`` runs out; Sentinels that
    still disagree then (they watch different servers under one name) are refused.
    """
    deadline = time.monotonic() + timeout
    while True:
        views = sentinel_views(sentinel, name)
        named = {address: view for address, view in views.items() if isinstance(view, tuple)}
        primaries = set(named.values())
        waiting = None
        if len(primaries) == 1:
            master = primaries.pop()
            waiting = _serves_as_primary(master, kwargs)
            if waiting is None:
                return master
        elif not primaries:
            waiting = _no_primary_named(views, name)
            if 'down' not in views.values():  # nobody to wait for: no Sentinel knows the service or answers
                raise StoreError(waiting)
        if time.monotonic() > deadline:
            if len(primaries) > 1:
                says = ', '.join(f'{address} says {host}:{port}' for address, (host, port) in sorted(named.items()))
                raise StoreError(f'the Sentinels disagree on the primary of service {name} ({says}); make every '
                                 'Sentinel in sentinel_hosts monitor the same primary under sentinel_service_name, '
                                 'or list only the Sentinels of one deployment')
            raise StoreError(waiting)
        time.sleep(0.2)


def connect_cluster(params: dict, kwargs: dict):
    """(cluster client, its primaries as (client, location)) of the cluster a node in login_host/login_port belongs to."""
    location = f'{params["login_host"]}:{params["login_port"]}'
    if params['db']:
        raise StoreError('Redis Cluster has only database 0; remove db or set it to 0')
    try:
        cluster_client = RedisCluster(host=params['login_host'], port=params['login_port'], **kwargs)
        primaries = cluster_client.get_primaries()
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        raise StoreError(_cluster_failure(exc, params, kwargs, location)) from None
    return cluster_client, [(cluster_client.get_redis_connection(node), f'{node.host}:{node.port}') for node in primaries]
