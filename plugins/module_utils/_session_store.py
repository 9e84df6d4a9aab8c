# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Connection options of the session stores, declared once, and the factory that opens a store.

Every module that touches sessions merges ``session_store_argument_spec()`` into its
own spec and documents it with the ``inferops.vllm_dr.session_store`` fragment.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

BACKENDS = ('redis', 'redis_sentinel', 'redis_cluster', 'etcd')


def session_store_argument_spec() -> dict:
    return dict(
        backend=dict(type='str', default='redis', choices=list(BACKENDS)),
        login_host=dict(type='str', default='localhost'),
        login_port=dict(type='int', default=6379),
        login_user=dict(type='str'),
        login_password=dict(type='str', no_log=True),
        db=dict(type='int', default=0),
        tls=dict(type='bool', default=False),
        validate_certs=dict(type='bool', default=True),
        ca_certs=dict(type='str'),
        client_cert_file=dict(type='str'),
        client_key_file=dict(type='str'),
        sentinel_hosts=dict(type='list', elements='str'),
        sentinel_service_name=dict(type='str', default='mymaster'),
        sentinel_password=dict(type='str', no_log=True),
        etcd_endpoints=dict(type='list', elements='str', default=['http://127.0.0.1:2379']),
        etcd_user=dict(type='str'),
        etcd_password=dict(type='str', no_log=True),
        ca_cert=dict(type='path'),
        client_cert=dict(type='path'),
        client_key=dict(type='path'),
        key_pattern=dict(type='str', default='vllm:session:*', no_log=False),
        key_prefix=dict(type='str', default='vllm/session/', no_log=False),
        timeout=dict(type='float', default=10.0),
    )


def open_store(params: dict):
    """A connected store for ``params['backend']``; raises StoreError with a one-line message."""
    if params['backend'] == 'etcd':
        from ._etcd_store import EtcdStore  # pylint: disable=import-outside-toplevel
        return EtcdStore(params, params['key_prefix'])
    from ._redis_store import RedisStore  # pylint: disable=import-outside-toplevel
    return RedisStore(params, params['key_pattern'])
