# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One Redis server that owns part (or all) of the keyspace, as the sweep pipeline's partition (sweep_pipeline.Partition).

A sweep reads with plain pipelined commands (SCAN, HGETALL, PTTL: one write and one
read per batch, redis_reads.py) on a reader connection, and deletes with one server-side
script per batch (per hash slot in a cluster, redis_deletes.py) on a remover connection,
so every decision to delete or write is atomic on the server. A cluster's redirections
are followed by its router (redis_cluster.py), the primary behind Sentinels is checked by
its guard (redis_sentinel.py); a restore writes back with one script per slot group.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import contextlib

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, describe_redis_error
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_deletes import (
    DELETE_SCRIPT, NODE_DELETE_SCRIPT, GuardedDeletes, concatenated,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_reads import PipelinedReads
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import RedisScript, reply_or_raise
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import PipelinedConnection, bulk
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep_pipeline import Partition

try:
    import redis
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened

# KEYS: the keys; ARGV per key: type, absolute expiry ms (-1: none), field count
# (or 1 for a string), then fields and values (or the value). A key that exists
# again is never overwritten (1 restored, 0 exists, -1 its TTL already ran out).
# A key and its TTL are written together or not at all: an expiry the server refuses
# takes the key back out inside the same script (-2), so no key lives without its TTL.
RESTORE_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local result = {}
local at = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = ARGV[at]
  local expiry = ARGV[at + 1]
  local expire_at = tonumber(expiry)
  local count = tonumber(ARGV[at + 2])
  local first = at + 3
  at = first + count
  if redis.call('EXISTS', key) == 1 then
    result[i] = 0
  elseif expire_at >= 0 and expire_at <= now_ms then
    result[i] = -1
  else
    if kind == 'hash' then
      for j = first, first + count - 1, 2 do
        redis.call('HSET', key, ARGV[j], ARGV[j + 1])
      end
    else
      redis.call('SET', key, ARGV[first])
    end
    result[i] = 1
    if expire_at >= 0 then
      local given = redis.pcall('PEXPIREAT', key, expiry)
      if type(given) == 'table' and given.err then
        redis.call('UNLINK', key)
        result[i] = -2
      end
    end
  end
end
return result
"""


def restore_args(group):
    """The restore script's ARGV for a group: each entry's type, absolute expiry, field count and content."""
    args = []
    for entry in group:
        if entry.kind == 'hash':
            flat = [part for pair in entry.fields.items() for part in pair]
        else:
            flat = [entry.value]
        args.extend([entry.kind, -1 if entry.pexpireat is None else entry.pexpireat, len(flat)] + flat)
    return len(args), b''.join(bulk(arg) for arg in args)


class OneServerRouting:
    """The routing of a server that holds every key (standalone, or the primary behind Sentinels): nothing redirects.

    It answers what redis_cluster.ClusterRouter answers for a cluster.
    """

    spans_slots = False  # no hash slots: a script may touch any key

    @staticmethod
    def slot_groups(entries) -> list:
        return [entries]

    @staticmethod
    def redirected(replies) -> list:  # pylint: disable=unused-argument
        return []

    @staticmethod
    def replies_where_keys_are(client, name, keys, replies):  # pylint: disable=unused-argument
        return replies

    @staticmethod
    def script_runs_where_keys_are(client, script, groups, replies, args_for):  # pylint: disable=unused-argument
        return groups, replies


class RedisPartition(Partition):
    """One server that owns part (or all) of the keyspace: a standalone server or one cluster primary.

    ``routing`` is the cluster's redis_cluster.ClusterRouter (OneServerRouting elsewhere);
    ``guard`` the redis_sentinel.SentinelGuard behind Sentinels, else None.
    """

    def __init__(self, client, location: str, pattern: str, routing=None, guard=None):
        self.client = client
        self.location = location
        self.pattern = pattern.encode('utf-8')
        self.routing = routing or OneServerRouting()
        self.guard = guard
        self._delete = RedisScript(DELETE_SCRIPT)
        # a cluster primary deletes a batch of many slots in one run
        self._node_delete = RedisScript(NODE_DELETE_SCRIPT, keys_in_argv=True) if self.routing.spans_slots else None
        self._restore = RedisScript(RESTORE_SCRIPT)
        self._reads = self._deletes = None

    def _guarded(self, action):
        try:
            return action()
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, self.location)) from None

    def _connect(self) -> PipelinedConnection:
        connection = self._guarded(lambda: PipelinedConnection(self.client))
        if self.guard is not None:
            try:
                self._guarded(lambda: self.guard.check_connection(connection))
            except StoreError:
                connection.close()
                raise
        return connection

    def ping(self) -> None:
        self._guarded(self.client.ping)

    # ---- sweep: the pipeline's partition interface ------------------------------------------------

    @contextlib.contextmanager
    def open(self, job):
        """The reader connection (SCAN, HGETALL, PTTL) with the first SCAN page asked for, and the remover (delete scripts)."""
        connections = []
        try:
            reader = self._connect()
            connections.append(reader)
            remover = None
            if job.deleting:
                remover = self._connect()
                connections.append(remover)
                self._guarded(lambda: self._delete.load(remover))
                if self._node_delete is not None:
                    self._guarded(lambda: self._node_delete.load(remover))
            self._reads = PipelinedReads(reader, self.client, self.pattern, job.options, self.routing)
            self._deletes = GuardedDeletes(remover, self._delete, self.client, self.location, self.routing, self.guard,
                                           job.options.guard_fields, self._node_delete)
            try:
                self._reads.start()
                yield
            except redis.RedisError as exc:
                raise StoreError(describe_redis_error(exc, self.location)) from None
        finally:
            self._reads = self._deletes = None
            for connection in connections:
                connection.close()

    @property
    def reading(self) -> bool:
        return self._reads.reading is not None

    def next_batch(self):
        return self._reads.next_batch()

    def prepare(self, victims):
        self._reads.prepare(victims)

    @property
    def deletes_in_flight(self) -> int:
        return len(self._deletes.in_flight)

    def send_delete(self, victims) -> None:
        self._deletes.send(victims)

    def settle_oldest(self, job) -> None:
        self._deletes.settle_oldest(job)

    def after_failure(self, job, exc) -> None:
        self._deletes.after_failure(job, exc)

    # ---- restore --------------------------------------------------------------------------------

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists (TTLs are judged by restore)."""
        def probe(connection):
            keys = [entry.key for entry in entries]
            replies = self.routing.replies_where_keys_are(self.client, b'EXISTS', keys,
                                                          connection.call([(b'EXISTS', key) for key in keys]))
            return [0 if reply_or_raise(exists) else 1 for exists in replies]
        return self._with_connection(probe)

    def restore(self, entries):
        """Write back each entry (unique keys) whose key does not exist: 1 restored, 0 exists, -1 its TTL ran out,
        -2 the server refused its expiry (the key is not written).

        The answers come in the order of ``entries``.
        """
        def write(connection):
            self._restore.load(connection)
            groups = self.routing.slot_groups(entries)
            replies = self._restore.run(connection, groups, restore_args, raising=False)
            replies = self.routing.script_runs_where_keys_are(self.client, self._restore, groups, replies, restore_args)[1]
            answers = concatenated([reply_or_raise(reply) for reply in replies])
            if self.guard is not None and 1 in answers:
                self.guard.confirm_restore(connection)
            by_entry = {id(entry): answer for entry, answer in zip(concatenated(groups), answers)}
            return [by_entry[id(entry)] for entry in entries]
        return self._with_connection(write)

    def _with_connection(self, action):
        connection = self._connect()
        try:
            return self._guarded(lambda: action(connection))
        finally:
            connection.close()
