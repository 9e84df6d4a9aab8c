# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # The session store: which backend holds the sessions, where, and how long to wait for it. With the
    # inferops.vllm_dr.redis and inferops.vllm_dr.etcd fragments, every option of the session store.
    DOCUMENTATION = r"""
options:
  backend:
    description:
      - Where the sessions live.
      - V(redis) is one server, V(redis_sentinel) finds the current primary through O(sentinel_hosts),
        V(redis_cluster) works on every primary of a cluster, V(etcd) uses the etcd v3 API.
      - With V(redis_sentinel), every connection must reach the primary the Sentinels name, and every write is
        confirmed with C(WAIT) for the primary's replicas and C(ROLE). A failover that makes a write uncertain
        stops the module with a line naming the old and the new primary; only what the new primary confirms is
        counted.
    type: str
    choices: [redis, redis_sentinel, redis_cluster, etcd]
    default: redis
  key_pattern:
    description:
      - Redis keys of the sessions, as a C(SCAN MATCH) glob. Each is a hash with C(access_token),
        C(refresh_token) and the expiry field.
      - A pattern without a literal prefix (such as V(*)) is refused.
    type: str
    default: "vllm:session:*"
  key_prefix:
    description:
      - etcd keys of the sessions. Each value is a JSON object with the same fields as the Redis hash.
    type: str
    default: vllm/session/
  timeout:
    description:
      - Seconds to wait for the store on connect and on each call; above V(0), at most V(86400).
      - With O(backend=redis_sentinel), also how long to wait for the Sentinels to agree on a primary after a
        failover, and for the replicas to confirm a write (C(WAIT)).
    type: float
    default: 10.0
requirements:
  - redis (Python library) for the Redis backends; hiredis (Python library) recommended for large Redis stores
  - etcd3gw (Python library) for O(backend=etcd)
"""
