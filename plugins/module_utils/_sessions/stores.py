# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The factory that opens the session store the options name (store_options.py declares and checks them).

Each store is imported when it is opened: a Redis run never loads the etcd client and its
HTTP stack (about 0.3 s and 7 MB), nor an etcd run redis-py. Neither store imports this
module, so the import graph stays without a cycle.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import check_store_params


def open_store(params: dict):
    """A connected store for ``params['backend']``; raises StoreError with a one-line message."""
    check_store_params(params)
    if params['backend'] == 'etcd':
        from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.etcd_store import EtcdStore  # pylint: disable=import-outside-toplevel
        return EtcdStore(params, params['key_prefix'])
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_store import RedisStore  # pylint: disable=import-outside-toplevel
    return RedisStore(params, params['key_pattern'])
