# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Connection options of the session stores, declared once, and their checks (stores.py opens a store from them).

Every module that touches sessions merges ``session_store_argument_spec()`` into its
own spec, passes ``SESSION_STORE_RULES`` to AnsibleModule, and documents the options
with the ``inferops.vllm_dr.session_store``, ``inferops.vllm_dr.redis`` and
``inferops.vllm_dr.etcd`` fragments (one per backend, as the spec is built). What AnsibleModule cannot check
(ranges, list contents, addresses) ``check_store_params`` checks, before anything is
touched.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import math
import urllib.parse

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError

BACKENDS = ('redis', 'redis_sentinel', 'redis_cluster', 'etcd')

# Longest wait for one call to the store; longer than any sane timeout, short enough for the socket layer.
MAX_TIMEOUT = 86400.0


def redis_argument_spec() -> dict:
    """The Redis options (standalone, Sentinel, Cluster), named as community.general's Redis modules name them."""
    return dict(
        login_host=dict(type='str', default='localhost'),
        login_port=dict(type='int', default=6379),
        login_user=dict(type='str'),
        login_password=dict(type='str', no_log=True),
        db=dict(type='int', default=0),
        tls=dict(type='bool', default=False),
        validate_certs=dict(type='bool', default=True),
        ca_certs=dict(type='path'),
        client_cert_file=dict(type='path'),
        client_key_file=dict(type='path'),
        sentinel_hosts=dict(type='list', elements='str'),
        sentinel_service_name=dict(type='str', default='mymaster'),
        sentinel_password=dict(type='str', no_log=True),
    )


def etcd_argument_spec() -> dict:
    """The etcd options, each under the ``etcd_`` prefix."""
    return dict(
        etcd_endpoints=dict(type='list', elements='str', default=['http://127.0.0.1:2379']),
        etcd_user=dict(type='str'),
        etcd_password=dict(type='str', no_log=True),
        etcd_ca_cert=dict(type='path'),
        etcd_client_cert=dict(type='path'),
        etcd_client_key=dict(type='path'),
    )


def session_store_argument_spec() -> dict:
    """Every option of the session store: the backend and the layout, then each backend's own options."""
    spec = dict(
        backend=dict(type='str', default='redis', choices=list(BACKENDS)),
        key_pattern=dict(type='str', default='vllm:session:*', no_log=False),
        key_prefix=dict(type='str', default='vllm/session/', no_log=False),
        timeout=dict(type='float', default=10.0),
    )
    spec.update(redis_argument_spec())
    spec.update(etcd_argument_spec())
    return spec


# What AnsibleModule checks itself; a module passes these on (merged with its own rules).
SESSION_STORE_RULES = dict(
    required_if=[('backend', 'redis_sentinel', ('sentinel_hosts',))],
    required_by={'client_key_file': 'client_cert_file', 'etcd_client_key': 'etcd_client_cert',
                 'etcd_password': 'etcd_user'},
)


def parse_sentinel_hosts(items) -> list:
    """The Sentinels of ``sentinel_hosts`` as (host, port)."""
    hosts = []
    for item in items or []:
        host, _sep, port = str(item).rpartition(':')
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StoreError(f'sentinel_hosts entry {item!r} is not host:port; give e.g. 10.0.0.5:26379')
        hosts.append((host.strip('[]'), int(port)))
    if not hosts:
        raise StoreError('backend=redis_sentinel needs sentinel_hosts; give the Sentinels as host:port, e.g. 10.0.0.5:26379')
    return hosts


def parse_etcd_endpoint(endpoint: str):
    """(scheme, host, port) of an ``etcd_endpoints`` entry; a bare host:port means http."""
    try:
        url = urllib.parse.urlsplit(endpoint if '://' in endpoint else f'http://{endpoint}')
        port = url.port or 2379
    except ValueError:
        url = port = None
    if url is None or url.scheme not in ('http', 'https') or not url.hostname:
        raise StoreError(f'etcd_endpoints entry {endpoint!r} is not a URL; give e.g. https://10.0.0.5:2379')
    return url.scheme, url.hostname, port


def check_store_params(params: dict) -> None:
    """Refuse connection options AnsibleModule cannot judge, before the store is touched."""
    timeout = params['timeout']
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT):
        raise StoreError(f'timeout {timeout:g} is out of range; give the seconds to wait for the store, '
                         f'above 0 and at most {MAX_TIMEOUT:g} (default 10)')
    backend = params['backend']
    if backend == 'etcd':
        if not params['etcd_endpoints']:
            raise StoreError('backend=etcd needs etcd_endpoints; give the client URLs of the etcd members, '
                             'e.g. https://10.0.0.5:2379')
        for endpoint in params['etcd_endpoints']:
            parse_etcd_endpoint(endpoint)
        return
    if backend == 'redis_sentinel':
        parse_sentinel_hosts(params['sentinel_hosts'])
    elif not 0 < params['login_port'] < 65536:
        raise StoreError(f'login_port {params["login_port"]} is not a TCP port; give 1 to 65535 (default 6379)')
    if params['db'] < 0:
        raise StoreError(f'db {params["db"]} is not a Redis database number; give 0 or more (default 0)')
