# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: store_sweeper
short_description: The host of a play that sweeps a session store several hosts share
version_added: 0.1.0
description:
  - Several hosts of one play often use one session store (replicas of one service). Sweeping it from each of
    them would back up the same sessions several times and race on the store; the store is swept once, by the
    first host of the play that uses it.
  - Two hosts share a store when their connection options name the same server (C(login_host), C(login_port)),
    Sentinels and service, or etcd endpoints, and the same database and key pattern or prefix. Credentials play
    no part. Two different seed nodes of one Redis Cluster are not recognised as one store.
  - Only hosts that set the fact C(_vllm_dr_sweep_store) (their C(vllm_dr_store)) take part; a host that has
    nothing to purge sweeps nothing.
options:
  _input:
    description: The hosts of the play, in order (C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
  host:
    description: The host whose store is meant (C(inventory_hostname)).
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Sweep once per store
  inferops.vllm_dr.vllm_session_sweep:
    state: swept
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl
  when: ansible_play_hosts | inferops.vllm_dr.store_sweeper(hostvars, inventory_hostname) == inventory_hostname
"""

RETURN = r"""
_value:
  description: The name of the host that sweeps the store of O(host); V(null) when O(host) sweeps nothing.
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._store_identity import store_sweeper as _sweeper


def store_sweeper(hosts, hostvars, host):
    stores = {}
    for name in hosts:
        store = hostvars[name].get('_vllm_dr_sweep_store')
        if store is not None:
            stores[name] = store
    return _sweeper(list(hosts), stores, host)


class FilterModule:
    def filters(self):
        return {'store_sweeper': store_sweeper}
