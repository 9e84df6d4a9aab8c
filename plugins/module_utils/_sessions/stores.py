# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The factory that opens the session store the options name (store_options.py declares and checks them).

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.etcd_store import EtcdStore
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_store import RedisStore
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import check_store_params


def open_store(params: dict):
    """A connected store for ``params['backend']``; raises StoreError with a one-line message."""
    check_store_params(params)
    if params['backend'] == 'etcd':
        return EtcdStore(params, params['key_prefix'])
    return RedisStore(params, params['key_pattern'])
