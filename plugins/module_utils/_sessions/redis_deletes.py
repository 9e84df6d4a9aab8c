# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The deletes of a sweep of one Redis server: one guarded script per batch (per hash slot in a cluster), settled in order.

Deletes are sent on a remover connection of their own, at most a few ahead of their
answers (sweep_pipeline.DELETES_AHEAD); each answer says which victims the script kept
because they changed since they were read. A server that lost its scripts (NOSCRIPT)
runs them again after they are loaded.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import collections
import itertools
import operator

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, describe_redis_error
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import is_noscript, noscript_positions
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import bulk, bulk_format

try:
    import redis
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened

# ARGV: n, n guard field names, then per key its kind and n expectations
# (a cluster node's run of several slots, NODE_DELETE_SCRIPT, takes no KEYS: its ARGV
# starts with the keys' count, the keys, the number of slots and the count of keys of
# each slot, the keys of a slot side by side):
#   hash    every guard field was present: the n values as they were read
#   hash?   some were missing: '=' .. value, or '!' for a missing field
#   string  the value as it was read, then n - 1 empty arguments
# A key is unlinked only when its type and every guard field are still what was
# judged (a key whose type changed is kept, any other error aborts the script
# before anything is unlinked). The script is atomic, so the keys that passed are
# unlinked together at the end; it answers the positions (1-based) of the keys kept.
DELETE_SCRIPT = """
local function unless_wrongtype(reply)
  if type(reply) == 'table' and reply.err then
    if string.find(reply.err, 'WRONGTYPE', 1, true) then return nil end
    error(reply.err)
  end
  return reply
end
local function unlink(list)
  for first = 1, #list, 1000 do
    redis.call('UNLINK', unpack(list, first, math.min(first + 999, #list)))
  end
end
local keys, at, slots = KEYS, 1, {#KEYS}
local across = #KEYS == 0
if across then
  keys = {}
  local count = tonumber(ARGV[1])
  for i = 1, count do keys[i] = ARGV[1 + i] end
  at = 2 + count
  local runs = tonumber(ARGV[at])
  for r = 1, runs do slots[r] = tonumber(ARGV[at + r]) end
  at = at + 1 + runs
end
local n = tonumber(ARGV[at])
local fields = {}
for j = 1, n do fields[j] = ARGV[at + j] end
local pcall = redis.pcall
local kept, gone = {}, {}  -- positions kept; for each key, whether it goes
at = at + 1 + n
for i = 1, #keys do
  local key = keys[i]
  local kind = ARGV[at]
  local same = false
  if kind == 'string' then
    same = unless_wrongtype(pcall('GET', key)) == ARGV[at + 1]
  else
    local have = unless_wrongtype(pcall('HMGET', key, unpack(fields)))
    if have then
      same = true
      if kind == 'hash' then
        for j = 1, n do
          if have[j] ~= ARGV[at + j] then same = false break end
        end
      else
        local present = false
        for j = 1, n do
          local want = ARGV[at + j]
          if want == '!' then
            same = same and have[j] == false
          else
            same = same and have[j] == string.sub(want, 2)
            present = true
          end
        end
        if same and not present then
          same = redis.call('TYPE', key)['ok'] == 'hash'
        end
      end
    end
  end
  at = at + 1 + n
  gone[i] = same
  if not same then
    kept[#kept + 1] = i
  end
end
-- the keys that passed, one UNLINK per slot (several slots in one UNLINK are refused even here)
local first = 1
for r = 1, #slots do
  local run = {}
  for i = first, first + slots[r] - 1 do
    if gone[i] then run[#run + 1] = keys[i] end
  end
  unlink(run)
  first = first + slots[r]
end
return kept
"""

# The same script for a Redis Cluster node's victims of many hash slots in one run: its
# flag lets it touch keys of several slots, as long as this node serves them all (a key
# whose slot moved or is being migrated fails the run before anything is unlinked, and
# its victims run again per slot, where the redirections are followed). An UNLINK of
# keys of several slots is refused even then: the keys that passed go slot by slot.
NODE_DELETE_SCRIPT = '#!lua flags=allow-cross-slot-keys\n' + DELETE_SCRIPT


_MISSING = bulk(b'!')
_HASH, _HASH_WITH_GAPS, _STRING, _EMPTY = bulk('hash'), bulk('hash?'), bulk('string'), bulk(b'')


def concatenated(lists) -> list:
    """The items of every list, in order, as one list."""
    return [item for part in lists for item in part]


def delete_args(guard_fields):
    """The delete script's ARGV for a group: guard names, then each entry's kind and expectations."""
    head = bulk(len(guard_fields)) + b''.join(bulk(name) for name in guard_fields)
    per_entry = 1 + len(guard_fields)
    guard_values = operator.itemgetter(*guard_fields) if len(guard_fields) > 1 \
        else lambda fields: (fields[guard_fields[0]],)
    every_present = _HASH + bulk_format(len(guard_fields))
    filler = _EMPTY * (len(guard_fields) - 1)

    def one_entry(entry):
        if entry.kind != 'hash':
            return _STRING + bulk(entry.value) + filler
        values = [entry.fields.get(name) for name in guard_fields]
        if None in values:
            return _HASH_WITH_GAPS + b''.join([_MISSING if value is None else bulk(b'=' + value) for value in values])
        return every_present % tuple(itertools.chain.from_iterable((len(value), value) for value in values))

    def args_for(group):
        count = 1 + len(guard_fields) + per_entry * len(group)
        try:
            # the usual group: hashes holding every guard field, formatted in one go
            flat = [value for entry in group for value in guard_values(entry.fields)]
        except (KeyError, TypeError):  # a guard field missing, or a string (no fields)
            return count, head + b''.join([one_entry(entry) for entry in group])
        return count, head + (every_present * len(group)) % tuple(itertools.chain.from_iterable(zip(map(len, flat), flat)))
    return args_for


class NodeGroup(list):
    """Victims of several hash slots of one cluster node, deleted by one NODE_DELETE_SCRIPT run: the slot groups'
    entries side by side, ``sizes`` the number of entries of each."""

    def __init__(self, slot_groups):
        super().__init__(concatenated(slot_groups))
        self.sizes = [len(group) for group in slot_groups]


def node_args(args_for):
    """The node delete script's ARGV for a NodeGroup: its slots' sizes, then what ``args_for`` gives any group."""
    def args(group):
        count, argv = args_for(group)
        return 1 + len(group.sizes) + count, bulk(len(group.sizes)) + b''.join([bulk(size) for size in group.sizes]) + argv
    return args


def node_runs_failed(groups, replies) -> list:
    """The positions of the node runs the server refused (a slot moved or migrating, or the script lost): run per slot."""
    return [index for index, (group, reply) in enumerate(zip(groups, replies))
            if isinstance(group, NodeGroup) and isinstance(reply, Exception)]


def per_slot_again(connection, script, node_script, slot_groups, args_for, groups, replies):
    """(groups, replies) with each node run the server refused run again per slot on ``connection`` (nothing of it was
    unlinked); no delete is in flight on it then. A node script the server lost is loaded again for the next runs."""
    failed = node_runs_failed(groups, replies)
    if any(is_noscript(replies[index]) for index in failed):
        node_script.loaded = False
        node_script.load(connection)
    out_groups, out_replies = [], []
    for index, (group, reply) in enumerate(zip(groups, replies)):
        if index in failed:
            slots = slot_groups(list(group))
            out_groups.extend(slots)
            out_replies.extend(script.run(connection, slots, args_for, raising=False))
        else:
            out_groups.append(group)
            out_replies.append(reply)
    return out_groups, out_replies


def deleted(groups, replies):
    """(victims, [deleted?]) of a delete from the script's answers (kept positions), in slot-group order."""
    outcome = []
    for group, kept in zip(groups, replies):
        gone = [True] * len(group)
        for position in kept:
            gone[position - 1] = False
        outcome.extend(gone)
    return concatenated(groups), outcome


class GuardedDeletes:
    """The remover connection of one partition's sweep and the deletes in flight on it, oldest first.

    ``routing`` groups victims by slot and follows a cluster's redirections
    (redis_cluster.ClusterRouter); ``guard`` is the Sentinel primary guard
    (redis_sentinel.SentinelGuard) behind Sentinels, else None: its checks ride behind
    every delete, and a delete it does not confirm stops the sweep.
    """

    def __init__(self, connection, script, client, location: str, routing, guard, guard_fields, node_script=None):
        self.connection = connection
        self._script = script
        self._node_script = node_script  # a cluster node's run of several slots (NODE_DELETE_SCRIPT), loaded
        self._client = client
        self._location = location
        self._routing = routing
        self._guard = guard
        self._args = delete_args(guard_fields)
        self._node_args = node_args(self._args)
        self.in_flight = collections.deque()  # (slot groups, check answers) of the deletes sent, oldest first

    def send(self, victims) -> None:
        """Send the conditional delete of ``victims`` (and the primary's checks behind Sentinels).

        Its slot groups and the number of check answers join the deletes in flight before
        anything is sent, so a delete whose sending failed is still one whose outcome is to
        be found out.
        """
        groups = self._routing.slot_groups(victims)
        script, args = self._script, self._args
        if self._node_script is not None and len(groups) > 1:
            groups, script, args = [NodeGroup(groups)], self._node_script, self._node_args
        checks = self._guard.checks() if self._guard is not None else []
        self.in_flight.append((groups, len(checks)))
        script.send(self.connection, groups, args)
        self.connection.send(checks)

    def settle_oldest(self, job) -> None:
        """Read what the oldest delete in flight did and count it.

        A group the server could not run (NOSCRIPT: it lost its scripts) is sent again
        after the script is loaded. The answers of the deletes sent after it come first on
        the connection, so they are read first, and everything the answers already tell is
        counted before that retry, which may fail too.
        """
        in_flight = self.in_flight
        groups, replies, answers = self._receive(in_flight[0])
        in_flight.popleft()
        if in_flight and (noscript_positions(replies) or node_runs_failed(groups, replies)):
            for later in list(in_flight):
                later, more, more_answers = self._receive(later)
                groups = groups + later
                replies.extend(more)
                answers.extend(more_answers)
            in_flight.clear()
        if self._guard is not None and not self._guard.confirmed(answers):
            self._stop_unconfirmed(job, groups, replies)
        if node_runs_failed(groups, replies):
            groups, replies = per_slot_again(self.connection, self._script, self._node_script, self._routing.slot_groups,
                                             self._args, groups, replies)
        groups, replies = self._follow_redirected(job, groups, replies)
        lost = noscript_positions(replies)
        ran = [index for index, reply in enumerate(replies) if not isinstance(reply, Exception)]
        job.settle(*deleted([groups[index] for index in ran], [replies[index] for index in ran]))
        refused = [index for index, reply in enumerate(replies) if isinstance(reply, Exception) and not is_noscript(reply)]
        if refused:
            # a script that failed aborted before anything was unlinked: none of its group was deleted
            job.abandon(concatenated([groups[index] for index in refused + lost]))
            raise replies[refused[0]]
        if lost:
            lost = [groups[index] for index in lost]
            job.settle(*deleted(lost, self._script.run_again(self.connection, lost, self._args)))

    def _follow_redirected(self, job, groups, replies):
        """(groups, replies) of a delete with the runs the cluster redirected done where their keys are now.

        When a node cannot be asked, what the other runs did is counted first; the redirected
        runs' outcome is unknown then, and they stay in the backup as an unanswered delete does.
        """
        moved = self._routing.redirected(replies)
        if not moved:
            return groups, replies
        staying = [index for index in range(len(groups)) if index not in set(moved)]
        try:
            followed = self._routing.script_runs_where_keys_are(
                self._client, self._script, [groups[index] for index in moved], [replies[index] for index in moved], self._args)
        except redis.RedisError as exc:
            ran = [index for index in staying if not isinstance(replies[index], Exception)]
            job.settle(*deleted([groups[index] for index in ran], [replies[index] for index in ran]))
            job.abandon(concatenated([groups[index] for index in staying if index not in set(ran)]))
            raise StoreError(describe_redis_error(exc, self._location)) from None
        return [groups[index] for index in staying] + followed[0], [replies[index] for index in staying] + followed[1]

    def after_failure(self, job, exc) -> None:
        """Behind Sentinels: the deletes whose answers a failed connection lost are settled by the guard."""
        if self._guard is None or not isinstance(exc, redis.RedisError):
            return
        unknown = concatenated(concatenated(groups for groups, _checks in self.in_flight))
        self.in_flight.clear()
        self._guard.after_failure(job, unknown)

    def _receive(self, sent):
        """(groups, script answers, check answers) of a delete in flight (as send answered)."""
        groups, checks = sent
        replies = self.connection.receive(len(groups) + checks)
        return groups, replies[:len(groups)], replies[len(groups):]

    def _stop_unconfirmed(self, job, groups, replies) -> None:
        """The primary did not confirm a delete: count only what the primary the Sentinels name now lacks, then stop.

        The deletes of this answer and of every one still in flight may have reached a server
        that was no longer the primary (a failover promoted a replica meanwhile): they are lost
        when it resyncs. Each victim a script removed (or whose answer never came) is looked
        up on the primary the Sentinels name now (SentinelGuard.stop): one it still holds was not deleted.
        """
        in_flight = self.in_flight
        ran = [(group, reply) for group, reply in zip(groups, replies) if not isinstance(reply, Exception)]
        victims, outcome = deleted([group for group, _reply in ran], [reply for _group, reply in ran])
        never = concatenated([group for group, reply in zip(groups, replies) if isinstance(reply, Exception)])
        unknown = []
        try:
            while in_flight:
                later, more, _answers = self._receive(in_flight[0])
                in_flight.popleft()
                for group, reply in zip(later, more):
                    if isinstance(reply, Exception):
                        never.extend(group)
                    else:
                        more_victims, more_outcome = deleted([group], [reply])
                        victims.extend(more_victims)
                        outcome.extend(more_outcome)
        except redis.RedisError:
            unknown = concatenated(concatenated(groups for groups, _checks in in_flight))
            in_flight.clear()
        job.abandon(never)
        self._guard.stop(job, victims + unknown, outcome + [True] * len(unknown))
