# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One Redis server that owns part (or all) of the keyspace, as the sweep loop's partition (loop.Partition).

A sweep reads with plain pipelined commands (SCAN, HGETALL, PTTL: one write and one
read per batch) on a reader connection, and deletes with one server-side script per
batch (per hash slot in a cluster) on a remover connection, so every decision to
delete or write is atomic on the server. A server that lost its scripts (NOSCRIPT)
runs them again after they are loaded.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import operator
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import Wire, bulk, encode, encode_each
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import (
    RedisScript, is_error as _is_error, is_noscript as _is_noscript, noscript_positions as _noscript_positions,
    reply_or_raise as _reply_or_raise,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError, describe_redis_error
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.loop import Batch, Partition
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_cluster import _one_group_per_entry, _redirection

try:
    import redis
    from redis.crc import key_slot
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened

# ARGV: n, n guard field names, then per key its kind and n expectations:
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
local n = tonumber(ARGV[1])
local fields = {}
for j = 1, n do fields[j] = ARGV[1 + j] end
local pcall = redis.pcall
local kept, gone = {}, {}
local at = 2 + n
for i = 1, #KEYS do
  local key = KEYS[i]
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
  if same then
    gone[#gone + 1] = key
  else
    kept[#kept + 1] = i
  end
end
for first = 1, #gone, 1000 do
  redis.call('UNLINK', unpack(gone, first, math.min(first + 999, #gone)))
end
return kept
"""

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


def _hash_of_flat_reply(flat) -> dict:
    """A hash from its flat HGETALL answer (name, value, name, value, ...)."""
    pairs = iter(flat)
    return dict(zip(pairs, pairs))


def _concatenated(lists) -> list:
    """The items of every list, in order, as one list."""
    return [item for part in lists for item in part]


_MISSING = bulk(b'!')
_HASH, _HASH_WITH_GAPS, _STRING, _EMPTY = bulk('hash'), bulk('hash?'), bulk('string'), bulk(b'')


def _delete_args(guard_fields):
    """The delete script's ARGV for a group: guard names, then each entry's kind and expectations."""
    head = bulk(len(guard_fields)) + b''.join(bulk(name) for name in guard_fields)
    per_entry = 1 + len(guard_fields)
    guard_values = operator.itemgetter(*guard_fields) if len(guard_fields) > 1 \
        else lambda fields: (fields[guard_fields[0]],)
    every_present = _HASH + b'$%d\r\n%s\r\n' * len(guard_fields)
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


def _restore_args(group):
    args = []
    for entry in group:
        if entry.kind == 'hash':
            flat = [part for pair in entry.fields.items() for part in pair]
        else:
            flat = [entry.value]
        args.extend([entry.kind, -1 if entry.pexpireat is None else entry.pexpireat, len(flat)] + flat)
    return len(args), b''.join(bulk(arg) for arg in args)


# SCAN pages whose keys are remembered: SCAN lists a key again when the table is resized
# between two calls, and the keys it repeats then come from the buckets it visited just
# before (SCAN walks the table in reverse-binary order, so the buckets of a resized one are
# neighbours). A repeated key is not read, judged, backed up or deleted a second time.
SCAN_MEMORY_PAGES = 16


class _RecentKeys:
    """The keys of the last SCAN_MEMORY_PAGES pages; fresh() drops the ones a page repeats."""

    def __init__(self):
        self._pages = collections.deque()
        self._keys = set()

    def fresh(self, keys):
        page = set(keys)
        if not page.isdisjoint(self._keys) or len(page) < len(keys):
            keys = [key for key in dict.fromkeys(keys) if key not in self._keys]
            page = set(keys)
        self._keys |= page
        self._pages.append(page)
        if len(self._pages) > SCAN_MEMORY_PAGES:
            self._keys -= self._pages.popleft()
        return keys


class RedisPartition(Partition):
    """One server that owns part (or all) of the keyspace: a standalone server or one cluster primary."""

    def __init__(self, client, location: str, pattern: str, cluster: bool, watch=None, redirections=None):
        self.client = client
        self.location = location
        self.pattern = pattern.encode('utf-8')
        self.cluster = cluster
        self.watch = watch  # a _PrimaryWatch behind Sentinels, else None
        self.redirections = redirections  # a cluster's _Redirections, else None
        self._delete = RedisScript(DELETE_SCRIPT)
        self._restore = RedisScript(RESTORE_SCRIPT)
        self._sweep = None

    def _groups(self, entries):
        """Script calls may only touch one hash slot in a cluster: one group per slot there, one group elsewhere."""
        if not self.cluster:
            return [entries]
        groups = {}
        for entry in entries:
            groups.setdefault(key_slot(entry.key), []).append(entry)
        return list(groups.values())

    def _guarded(self, action):
        try:
            return action()
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, self.location)) from None

    def _wire(self) -> Wire:
        wire = self._guarded(lambda: Wire(self.client))
        if self.watch is not None:
            try:
                self._guarded(lambda: self.watch.check_connection(wire))
            except StoreError:
                wire.close()
                raise
        return wire

    def ping(self) -> None:
        self._guarded(self.client.ping)

    def _followed(self, name: bytes, keys, replies):
        """The replies of ``name key`` for ``keys``, the ones a cluster redirected read again where the key is now."""
        if self.redirections is None:
            return replies
        return self.redirections.follow(self.client, keys, replies, lambda key: encode((name, key)))[1]

    def _followed_script(self, script, groups, replies, args_for):
        """(groups, replies) of a script's runs, the runs a cluster redirected (or asked to retry) done where the keys are."""
        if self.redirections is None:
            return groups, replies
        return self.redirections.follow(self.client, groups, replies, lambda group: script.payload([group], args_for),
                                        split=_one_group_per_entry, preamble=encode((b'SCRIPT', b'LOAD', script.source)))

    # ---- sweep: the loop's partition interface ---------------------------------------------------

    @contextlib.contextmanager
    def open(self, job):
        """The reader connection (SCAN, HGETALL, PTTL) with the first SCAN page asked for, and the remover (delete scripts).

        The reads of a batch are sent as soon as the SCAN answer names its keys, so the
        server reads batch n+1 while this process judges batch n; the PTTLs of a batch's
        victims (the backup keeps each TTL) ride with the reads of the batch after it.
        """
        wires = []
        try:
            reader = self._wire()
            wires.append(reader)
            remover = None
            if job.deleting:
                remover = self._wire()
                wires.append(remover)
                self._guarded(lambda: self._delete.load(remover))
            self._sweep = sweep = _SweepState(job.options, reader, remover)
            try:
                first = _reply_or_raise(reader.call([self._scan_command(b'0', sweep.size)])[0])
                sweep.reading = self._send_reads(sweep, *first)
                yield
            except redis.RedisError as exc:
                raise StoreError(describe_redis_error(exc, self.location)) from None
        finally:
            self._sweep = None
            for wire in wires:
                wire.close()

    @property
    def reading(self) -> bool:
        return self._sweep.reading is not None

    def _send_reads(self, sweep, cursor: bytes, keys):
        """Ask for the next SCAN page (unless the scan is done) and every new key's content: (keys, scanning) or None."""
        keys = sweep.recent.fresh(keys)
        scanning = cursor != b'0'
        if not scanning and not keys:
            return None
        payload = encode(self._scan_command(cursor, sweep.size)) if scanning else b''
        sweep.reader.send_encoded(payload + encode_each(b'HGETALL', keys), scanning + len(keys))
        return keys, scanning

    def _scan_command(self, cursor: bytes, count: int):
        return (b'SCAN', cursor, b'MATCH', self.pattern, b'COUNT', count)

    def next_batch(self):
        """The HGETALL answers of the batch read last (the next one asked for first), and the victims whose PTTLs came."""
        sweep = self._sweep
        if sweep.reading is None and not sweep.timed:
            return None
        keys, scanning = sweep.reading or ([], False)
        timed, sweep.timed = sweep.timed, []
        replies = sweep.reader.receive(scanning + len(keys) + len(timed))
        if scanning:
            cursor, next_keys = _reply_or_raise(replies[0])
            sweep.reading = self._send_reads(sweep, cursor, next_keys)
        else:
            sweep.reading = None
        batch = _ReplyBatch(self, keys, replies[scanning:scanning + len(keys)], sweep.read_strings)
        if timed:
            ttls = replies[scanning + len(keys):]
            batch.ready = _with_ttls(timed, self._followed(b'PTTL', [entry.key for entry in timed], ttls)
                                     if self.redirections else ttls)
        return batch

    def prepare(self, victims):
        """Ask for the victims' PTTLs: they come back with the next batch (next_batch's ``ready``)."""
        self._sweep.timed = victims
        self._sweep.reader.send_encoded(encode_each(b'PTTL', [entry.key for entry in victims]), len(victims))

    @property
    def deletes_in_flight(self) -> int:
        return len(self._sweep.in_flight)

    def send_delete(self, victims) -> None:
        """Send the conditional delete of ``victims`` (and the primary's checks behind Sentinels).

        Its slot groups and the number of check answers join the deletes in flight before
        anything is sent, so a delete whose sending failed is still one whose outcome is to
        be found out.
        """
        sweep = self._sweep
        groups = self._groups(victims)
        checks = self.watch.checks() if self.watch is not None else []
        sweep.in_flight.append((groups, len(checks)))
        self._delete.send(sweep.remover, groups, sweep.delete_args)
        sweep.remover.send(checks)

    def settle_oldest(self, job) -> None:
        """Read what the oldest delete in flight did and count it.

        A group the server could not run (NOSCRIPT: it lost its scripts) is sent again
        after the script is loaded. The answers of the deletes sent after it come first on
        the connection, so they are read first, and everything the answers already tell is
        counted before that retry, which may fail too.
        """
        sweep = self._sweep
        wire, in_flight = sweep.remover, sweep.in_flight
        groups, replies, answers = self._receive_delete(wire, in_flight[0])
        in_flight.popleft()
        if in_flight and _noscript_positions(replies):
            for later in list(in_flight):
                later, more, more_answers = self._receive_delete(wire, later)
                groups = groups + later
                replies.extend(more)
                answers.extend(more_answers)
            in_flight.clear()
        if self.watch is not None and not self.watch.confirmed(answers):
            self._stop_unconfirmed(job, groups, replies)
        if self.redirections is not None:
            groups, replies = self._follow_deletes(job, groups, replies)
        lost = _noscript_positions(replies)
        ran = [index for index, reply in enumerate(replies) if not isinstance(reply, Exception)]
        job.settle(*self._deleted([groups[index] for index in ran], [replies[index] for index in ran]))
        refused = [index for index, reply in enumerate(replies) if isinstance(reply, Exception) and not _is_noscript(reply)]
        if refused:
            # a script that failed aborted before anything was unlinked: none of its group was deleted
            job.abandon(_concatenated([groups[index] for index in refused + lost]))
            raise replies[refused[0]]
        if lost:
            lost = [groups[index] for index in lost]
            job.settle(*self._deleted(lost, self._delete.run_again(wire, lost, sweep.delete_args)))

    def _follow_deletes(self, job, groups, replies):
        """(groups, replies) of a delete with the runs the cluster redirected done where their keys are now.

        When a node cannot be asked, what the other runs did is counted first; the redirected
        runs' outcome is unknown then, and they stay in the backup as an unanswered delete does.
        """
        moved = [index for index, reply in enumerate(replies) if _redirection(reply)]
        if not moved:
            return groups, replies
        staying = [index for index in range(len(groups)) if index not in set(moved)]
        try:
            followed = self._guarded(lambda: self._followed_script(
                self._delete, [groups[index] for index in moved], [replies[index] for index in moved], self._sweep.delete_args))
        except StoreError:
            ran = [index for index in staying if not isinstance(replies[index], Exception)]
            job.settle(*self._deleted([groups[index] for index in ran], [replies[index] for index in ran]))
            job.abandon(_concatenated([groups[index] for index in staying if index not in set(ran)]))
            raise
        return [groups[index] for index in staying] + followed[0], [replies[index] for index in staying] + followed[1]

    def after_failure(self, job, exc) -> None:
        """Behind Sentinels: a connection failed, maybe because a failover demoted the server.

        The deletes whose answers are lost are counted by what the primary the Sentinels
        name now no longer holds; when that is another server, that is what stopped the sweep.
        """
        if self.watch is None or not isinstance(exc, redis.RedisError):
            return
        in_flight = self._sweep.in_flight
        unknown = _concatenated(_concatenated(groups for groups, _checks in in_flight))
        in_flight.clear()
        try:
            new, lost = self.watch.settle_on_current(job, unknown, [True] * len(unknown))
        except StoreError:
            return  # no primary to ask: the unanswered deletes stay in the backup, uncounted
        if new != self.watch.address:
            raise StoreError(self.watch.stopped(new, lost))

    @staticmethod
    def _receive_delete(wire, sent):
        """(groups, script answers, check answers) of a delete in flight (as send_delete answered)."""
        groups, checks = sent
        replies = wire.receive(len(groups) + checks)
        return groups, replies[:len(groups)], replies[len(groups):]

    def _stop_unconfirmed(self, job, groups, replies) -> None:
        """The primary did not confirm a delete: count only what the primary the Sentinels name now lacks, then stop.

        The deletes of this answer and of every one still in flight may have reached a server
        that was no longer the primary (a failover promoted a replica meanwhile): they are lost
        when it resyncs. Each victim a script removed (or whose answer never came) is looked
        up on the primary the Sentinels name now: one it still holds was not deleted.
        """
        wire, in_flight = self._sweep.remover, self._sweep.in_flight
        ran = [(group, reply) for group, reply in zip(groups, replies) if not isinstance(reply, Exception)]
        victims, outcome = self._deleted([group for group, _reply in ran], [reply for _group, reply in ran])
        never = _concatenated([group for group, reply in zip(groups, replies) if isinstance(reply, Exception)])
        unknown = []
        try:
            while in_flight:
                later, more, _answers = self._receive_delete(wire, in_flight[0])
                in_flight.popleft()
                for group, reply in zip(later, more):
                    if isinstance(reply, Exception):
                        never.extend(group)
                    else:
                        more_victims, more_outcome = self._deleted([group], [reply])
                        victims.extend(more_victims)
                        outcome.extend(more_outcome)
        except redis.RedisError:
            unknown = _concatenated(_concatenated(groups for groups, _checks in in_flight))
            in_flight.clear()
        job.abandon(never)
        raise StoreError(self.watch.stopped(*self.watch.settle_on_current(job, victims + unknown,
                                                                          outcome + [True] * len(unknown))))

    @staticmethod
    def _deleted(groups, replies):
        """(victims, [deleted?]) of a delete from the script's answers (kept positions), in slot-group order."""
        outcome = []
        for group, kept in zip(groups, replies):
            deleted = [True] * len(group)
            for position in kept:
                deleted[position - 1] = False
            outcome.extend(deleted)
        return _concatenated(groups), outcome

    def whole_entries(self, keys, replies, read_strings: bool):
        """Entries from a batch's HGETALL answers, the ones a cluster redirected read again where the key is now."""
        return self._entries(self.client, keys, self._followed(b'HGETALL', keys, replies), read_strings)

    @staticmethod
    def _entries(client, keys, replies, read_strings: bool):
        """Sessions from HGETALL answers; a key of another type becomes a 'string' entry (GET) or 'other'."""
        entries = []
        other = []
        for key, reply in zip(keys, replies):
            # an empty answer: the key went away since SCAN listed it
            if type(reply) is list:  # pylint: disable=unidiomatic-typecheck  # RESP2 (what the store asks for): a flat list
                if reply:
                    entries.append(Entry(key, 'hash', _hash_of_flat_reply(reply)))
            elif isinstance(reply, dict):  # RESP3: a map
                if reply:
                    entries.append(Entry(key, 'hash', reply))
            elif _is_error(reply, 'WRONGTYPE'):
                other.append(key)
            else:
                _reply_or_raise(reply)
        if other and read_strings:
            pipe = client.pipeline(transaction=False)
            for key in other:
                pipe.get(key)
            for key, value in zip(other, pipe.execute(raise_on_error=False)):
                if _is_error(value, 'WRONGTYPE'):
                    entries.append(Entry(key, 'other'))
                elif value is not None:
                    entries.append(Entry(key, 'string', value=_reply_or_raise(value)))
        else:
            entries.extend(Entry(key, 'other') for key in other)
        return entries

    # ---- restore --------------------------------------------------------------------------------

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists (TTLs are judged by restore)."""
        def probe(wire):
            keys = [entry.key for entry in entries]
            replies = self._followed(b'EXISTS', keys, wire.call([(b'EXISTS', key) for key in keys]))
            return [0 if _reply_or_raise(exists) else 1 for exists in replies]
        return self._with_wire(probe)

    def restore(self, entries):
        """Write back each entry (unique keys) whose key does not exist: 1 restored, 0 exists, -1 its TTL ran out,
        -2 the server refused its expiry (the key is not written).

        The answers come in the order of ``entries``.
        """
        def write(wire):
            self._restore.load(wire)
            groups = self._groups(entries)
            replies = self._restore.run(wire, groups, _restore_args, raising=False)
            answers = _concatenated([_reply_or_raise(reply) for reply in self._followed_script(self._restore, groups, replies, _restore_args)[1]])
            if self.watch is not None and 1 in answers:
                self.watch.confirm_restore(wire)
            by_entry = {id(entry): answer for entry, answer in zip(_concatenated(groups), answers)}
            return [by_entry[id(entry)] for entry in entries]
        return self._with_wire(write)

    def _with_wire(self, action):
        wire = self._wire()
        try:
            return self._guarded(lambda: action(wire))
        finally:
            wire.close()


class _SweepState:
    """A sweep of one partition under way: its connections, the reads and deletes in flight, the victims being timed."""

    def __init__(self, options, reader, remover):
        self.size = options.batch_size
        self.read_strings = options.malformed == 'sweep'
        self.delete_args = _delete_args(options.guard_fields)
        self.reader = reader
        self.remover = remover
        self.recent = _RecentKeys()
        self.reading = None  # (keys, whether a SCAN page was asked for too) of the reads sent last
        self.timed = []  # victims whose PTTL was asked for after the reads
        self.in_flight = collections.deque()  # (slot groups, check answers) of the deletes sent, oldest first


class _ReplyBatch(Batch):
    """A batch as its HGETALL answers came (loop.Batch): the expiry field is read straight off the flat answers.

    Hashes give their raw expiry (raw_expiries); only the victims among them become
    entries. Keys of other types, and answers a cluster redirected, become entries whole.
    """

    def __init__(self, partition, keys, replies, read_strings: bool = False):
        self._partition = partition
        self.keys = keys
        self._replies = replies
        self._read_strings = read_strings
        self._hash_keys, self._flats = keys, replies
        self._other_keys = self._other_replies = ()

    def raw_expiries(self, name: bytes):
        raws = _expiries_in_place(self._replies, name)
        if raws is None:
            self._hash_keys, self._flats, raws, self._other_keys, self._other_replies = \
                _expiries_one_by_one(self.keys, self._replies, name)
        # else the usual batch: every answer a hash, the expiry where it is in the first
        return self._hash_keys, raws

    def entries(self, positions):
        keys, flats = self._hash_keys, self._flats
        return [Entry(keys[at], 'hash', _hash_of_flat_reply(flats[at])) for at in positions]

    def other_entries(self):
        if not self._other_keys:
            return []
        return self._whole(self._other_keys, self._other_replies)

    def all_entries(self):
        return self._whole(self.keys, self._replies)

    def _whole(self, keys, replies):
        return self._partition.whole_entries(keys, replies, self._read_strings)


def _expiries_in_place(replies, name: bytes):
    """The field ``name`` of every HGETALL answer, when each is a hash's flat answer holding it at one position; else None.

    Sessions written alike list their fields alike, so the usual batch is read by position
    in a few passes over it, not answer by answer. A hash's field names are unique and sit
    at even positions: the value after ``name`` there is the one _expiries_one_by_one reads.
    """
    first = replies[0] if replies else None
    if type(first) is not list or set(map(type, replies)) != {list}:  # pylint: disable=unidiomatic-typecheck
        return None
    try:
        at = first.index(name)
    except ValueError:
        return None
    if at % 2:
        return None
    try:
        names = list(map(operator.itemgetter(at), replies))
    except IndexError:  # an empty answer (the key went away) or a hash of fewer fields
        return None
    if names.count(name) != len(names):
        return None
    return list(map(operator.itemgetter(at + 1), replies))


def _expiries_one_by_one(keys, replies, name: bytes):
    """(hash keys, their flat answers, their field ``name`` or None, other keys, their answers) of HGETALL answers.

    An empty answer (the key went away since SCAN listed it) is left out.
    """
    hash_keys, flats, raws = [], [], []
    other_keys, other_replies = [], []
    for key, reply in zip(keys, replies):
        if type(reply) is list:  # pylint: disable=unidiomatic-typecheck  # a hash (RESP2: a flat list)
            if reply:
                hash_keys.append(key)
                flats.append(reply)
                try:
                    at = reply.index(name)
                except ValueError:
                    raws.append(None)
                    continue
                # names sit at even positions; an odd one is a value that equals the name
                raws.append(reply[at + 1] if at % 2 == 0 else _hash_of_flat_reply(reply).get(name))
        else:
            other_keys.append(key)
            other_replies.append(reply)
    return hash_keys, flats, raws, other_keys, other_replies


def _with_ttls(entries, replies):
    """Entries with their absolute expiry (ms) from PTTL answers: -1 no TTL, -2 gone (the delete will see it)."""
    now_ms = int(time.time() * 1000)
    for entry, ttl in zip(entries, replies):
        if isinstance(ttl, Exception):  # _raised, without a call per entry
            raise ttl
        entry.pexpireat = now_ms + ttl if ttl >= 0 else None
    return entries
