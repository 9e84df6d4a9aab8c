# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which hosts of a play share one session store, so that the store is swept once.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec

_DEFAULTS = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}


def store_identity(store) -> tuple:
    """What names the sessions a sweep with these connection options reaches (never a credential).

    Two hosts whose options name the same server(s), database and key space share a
    store. A Redis Cluster is named by the node given (two different seed nodes of one
    cluster are not recognised as one store), a Sentinel group by its Sentinels.
    """
    options = dict(_DEFAULTS, **{name: value for name, value in dict(store or {}).items() if value is not None})
    backend = options['backend']
    if backend == 'etcd':
        return (backend, tuple(sorted(str(endpoint).rstrip('/') for endpoint in options['etcd_endpoints'] or [])),
                options['key_prefix'])
    if backend == 'redis_sentinel':
        where = (tuple(sorted(str(host) for host in options['sentinel_hosts'] or [])), options['sentinel_service_name'])
    else:
        where = (str(options['login_host']).lower(), int(options['login_port']))
    return (backend, where, int(options['db'] or 0), options['key_pattern'])


def store_sweeper(hosts, stores: dict, host: str):
    """The host that sweeps ``host``'s store: the first of ``hosts`` with a store (in ``stores``) that is the same.

    ``stores`` maps each host that sweeps to its connection options; a host missing from
    it (it has nothing to purge) sweeps nothing. None when ``host`` is not in it.
    """
    if host not in stores:
        return None
    mine = store_identity(stores[host])
    for candidate in hosts:
        if candidate in stores and store_identity(stores[candidate]) == mine:
            return candidate
    return host
