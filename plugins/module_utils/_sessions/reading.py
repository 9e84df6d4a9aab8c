# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How the session modules read a store: the options that choose and pace the reading, their checks, and the read.

vllm_session_sweep and vllm_session_info take the same options for it (the store's, then select, cutoff,
expires_field, batch_size, max_rate and the introspection endpoint's), documented once in the session_read doc
fragment.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import math
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import check_store_params, session_store_argument_spec
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.permissions import refusal
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import SweepOptions, Sweeper, report
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import parse_optional


def read_argument_spec() -> dict:
    """The store's options and those that choose and pace the reading."""
    spec = session_store_argument_spec()
    spec.update(
        select=dict(type='str', default='expired', choices=['expired', 'all', 'revoked']),
        cutoff=dict(type='str'),
        expires_field=dict(type='str', default='expires_at'),
        batch_size=dict(type='int', default=1000),
        max_rate=dict(type='float', default=0),
        introspection_url=dict(type='str'),
        introspection_client_id=dict(type='str'),
        introspection_client_secret=dict(type='str', no_log=True),
        introspection_validate_certs=dict(type='bool', default=True),
        introspection_ca_path=dict(type='path'),
        watched_session=dict(type='str'),
    )
    return spec


def check_read_params(params: dict) -> None:
    """The ranges AnsibleModule cannot check, before the store is touched."""
    if not 1 <= params['batch_size'] <= 100000:
        raise StoreError(f'batch_size {params["batch_size"]} is out of range; give 1 to 100000 (default 1000)')
    if not (math.isfinite(params['max_rate']) and params['max_rate'] >= 0):
        raise StoreError(f'max_rate {params["max_rate"]:g} is out of range; give the entries per second, '
                         'or 0 for an unlimited rate')
    check_store_params(params)


def introspector(params: dict):
    """The identity provider's introspection client that select=revoked asks; None for the other selections."""
    if params['select'] != 'revoked':
        return None
    # imported here: its HTTP client costs every other run of the modules a tenth of a second to import
    from ansible_collections.inferops.vllm_dr.plugins.module_utils._introspection import (  # pylint: disable=import-outside-toplevel
        Introspector,
    )
    return Introspector(params['introspection_url'], params['introspection_client_id'],
                        params['introspection_client_secret'], timeout=params['timeout'],
                        validate_certs=params['introspection_validate_certs'], ca_path=params['introspection_ca_path'])


def read_options(params: dict, **sweep) -> SweepOptions:
    """SweepOptions from the reading options; ``sweep`` adds what only a sweep sets (state, backup, max_delete...)."""
    return SweepOptions(
        select=params['select'], cutoff=parse_optional(params['cutoff'], 'cutoff', default_now=True),
        expires_field=params['expires_field'], batch_size=params['batch_size'], max_rate=params['max_rate'],
        watched_session=params['watched_session'], **sweep)


def read_sessions(params: dict, check_permissions: bool = False) -> dict:
    """Read and judge every session of the store as a sweep would, changing nothing: the counts of report().

    ``check_permissions``: also whether the store's user may do what a sweep and its restore need
    (``permissions``, with the one line that refuses a run in ``permissions.refusal``; permissions.py)."""
    check_read_params(params)
    options = read_options(params, state='reported', backup=False, check_mode=True, introspector=introspector(params))
    started = time.monotonic()
    store = open_store(params)
    try:
        result = report(Sweeper(store, options).sweep(), options, started)
        result.update(store=store.location, server=store.server)
        if check_permissions:
            permissions = store.permissions()
            permissions['refusal'] = refusal(permissions, f'{store.backend} {store.location}')
            result['permissions'] = permissions
    finally:
        store.close()
    del result['deleted'], result['changed_during_sweep']
    return result
