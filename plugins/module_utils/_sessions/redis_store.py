# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session stores in Redis: standalone, Sentinel and Cluster, connected and checked.

The store is its partitions (redis_partition.py: one server, or each primary of a
cluster), with what a deployment adds: a cluster's router (redis_cluster.py: where a key
lives, its redirections followed) and the primary guard behind Sentinels
(redis_sentinel.py). The single-session calls of the
refresh probe and the run lock live here.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import re

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import RedisScript
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import (
    StoreError, describe_redis_error, redis_error_text,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_connection import (
    REDIS_IMPORT_ERROR, client_kwargs, connect_cluster, connect_sentinel, connect_standalone, server_identity,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_cluster import ClusterRouter
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_partition import RedisPartition
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_sentinel import SentinelGuard, swap_on_primary
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.permissions import probe_redis

try:
    import redis
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened

# KEYS[1] the session; ARGV: the refresh token that was used, the new one, then the
# fields to write. Compare-and-set: a session refreshed by someone else meanwhile is
# left alone (1 written, 2 already holds the new token, 0 changed by someone else).
SWAP_SCRIPT = """
local current = redis.call('HGET', KEYS[1], 'refresh_token')
if current == ARGV[2] then return 2 end
if current ~= ARGV[1] then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""
_SWAP = RedisScript(SWAP_SCRIPT)


def check_pattern(pattern: str) -> str:
    """The literal prefix of a SCAN pattern; refuse patterns that would match every key."""
    prefix = ''
    for char in pattern:
        if char in '*?[\\':
            break
        prefix += char
    if not prefix:
        raise StoreError(f'key_pattern {pattern!r} has no literal prefix and would match every key in the database; '
                         'give the session key prefix, e.g. vllm:session:*')
    if pattern.count('[') != pattern.count(']'):
        raise StoreError(f'key_pattern {pattern!r} has an unbalanced [ ]; fix the glob, e.g. vllm:session:*')
    return prefix


def glob_matcher(pattern: str):
    """A function that tells whether a key (bytes) matches a Redis glob (``*``, ``?``, ``[...]``, ``[^...]``, ``\\``)."""
    parts = []
    chars = iter(pattern.encode('utf-8'))
    for char in chars:
        char = bytes([char])
        if char == b'*':
            parts.append(b'.*')
        elif char == b'?':
            parts.append(b'.')
        elif char == b'\\':
            parts.append(re.escape(bytes([next(chars, 0x5c)])))
        elif char == b'[':
            members = bytearray()
            for member in chars:
                if member == 0x5d:  # ]
                    break
                members.append(member)
            negate = members[:1] == b'^'
            body = b''.join(re.escape(bytes([m])) if m != 0x2d else b'-' for m in members[negate:])
            parts.append(b'[' + (b'^' if negate else b'') + (body or b'\\x00-\\xff') + b']')
        else:
            parts.append(re.escape(char))
    return re.compile(b''.join(parts), re.DOTALL).fullmatch


RESTORABLE_KINDS = ('hash', 'string')


class RedisStore:
    """The partitions of a Redis deployment, connected and checked."""

    def __init__(self, params: dict, pattern: str):
        if REDIS_IMPORT_ERROR:
            raise StoreError('the redis Python library is required for Redis backends; '
                             'install it on the host that runs the module: pip install redis')
        self.backend = params['backend']
        self.user = params.get('login_user') or 'default'
        self.pattern = pattern
        self.prefix = check_pattern(pattern)
        self._matches = glob_matcher(pattern)
        self._cluster_client = None
        self._router = None
        self._partitions = self._connect(params)
        self.server = self._identify()

    def _identify(self) -> dict:
        """Which server the store runs on (Redis or Valkey, its version): asked of the first partition."""
        partition = self._partitions[0]
        try:
            return server_identity(partition.client)
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, partition.location)) from None

    def _connect(self, params: dict):
        kwargs = client_kwargs(params)
        if params['backend'] == 'redis_cluster':
            return self._connect_cluster(params, kwargs)
        guard = None
        if params['backend'] == 'redis_sentinel':
            sentinel, client, location, master = connect_sentinel(params, kwargs)
            guard = SentinelGuard(sentinel, params['sentinel_service_name'], dict(kwargs, db=params['db']),
                                  params['timeout'], master)
        else:
            client, location = connect_standalone(params, kwargs)
        partition = RedisPartition(client, location, self.pattern, guard=guard)
        partition.ping()
        return [partition]

    def _connect_cluster(self, params: dict, kwargs: dict):
        self._cluster_client, primaries = connect_cluster(params, kwargs)
        partitions = []
        self._router = ClusterRouter(self._cluster_client, kwargs)
        for client, location in primaries:
            partition = RedisPartition(client, location, self.pattern, routing=self._router)
            partition.ping()
            partitions.append(partition)
        return partitions

    @property
    def location(self) -> str:
        return ', '.join(partition.location for partition in self._partitions)

    def partitions(self):
        return list(self._partitions)

    def group_by_partition(self, entries):
        """(partition, entries) pairs: the entries grouped by the partition that owns their key."""
        if self._router is None:
            return [(self._partitions[0], list(entries))]
        owners = {(p.location): p for p in self._partitions}
        grouped = {}
        for entry in entries:
            grouped.setdefault(self._router.owner(entry.key), []).append(entry)
        # a primary that took over after the connect (a failover) is not a partition: any
        # partition will do, its router follows the writes there
        return [(owners.get(location, self._partitions[0]), group) for location, group in grouped.items()]

    def accepts(self, entry) -> bool:
        """Whether a backup entry is one a sweep of this store could have written: a key under the pattern, a hash or string."""
        return entry.kind in RESTORABLE_KINDS and self._matches(entry.key) is not None

    def session_id(self, key: bytes) -> str:
        text = key.decode('utf-8', 'replace')
        return text[len(self.prefix):] if text.startswith(self.prefix) else text

    def _key_client(self):
        return self._cluster_client if self._cluster_client is not None else self._partitions[0].client

    def lock_client(self):
        """The client that reaches the primary owning a key, for the run lock (_run_lock.py)."""
        return self._key_client()

    def permissions(self) -> dict:
        """Whether the user may run what a sweep and a restore send, on every primary (ACL DRYRUN; permissions.py)."""
        return probe_redis([partition.client for partition in self._partitions], self.user, self.pattern)

    def describe(self, exc: BaseException) -> str:
        """One line for a failed call to this store: what happened and which option fixes it."""
        return describe_redis_error(exc, self.location)

    def get_session(self, session_id: str):
        """The fields of one session hash, or None."""
        key = (self.prefix + session_id).encode('utf-8')
        try:
            fields = self._key_client().hgetall(key)
        except redis.ResponseError as exc:
            raise StoreError(f'session {session_id} is not a hash ({redis_error_text(exc)}); check session_id and key_pattern') from None
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, self.location)) from None
        return fields or None

    def swap_tokens(self, session_id: str, expected_refresh: bytes, fields: dict) -> str:
        """Store rotated tokens only if the session still holds ``expected_refresh``.

        Returns 'written', 'already' (the service stored the same tokens) or 'conflict'.
        """
        key = (self.prefix + session_id).encode('utf-8')
        guard = self._partitions[0].guard
        if guard is not None:
            return swap_on_primary(guard, _SWAP, key, expected_refresh, fields)
        flat = [part for pair in fields.items() for part in pair]
        try:
            outcome = _SWAP.call(self._key_client(), [key], [expected_refresh, fields[b'refresh_token'], *flat])
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, self.location)) from None
        return {1: 'written', 2: 'already'}.get(int(outcome), 'conflict')

    def close(self) -> None:
        for partition in self._partitions:
            partition.client.close()
        if self._cluster_client is not None:
            self._cluster_client.close()
        if self._router is not None:
            self._router.close()
