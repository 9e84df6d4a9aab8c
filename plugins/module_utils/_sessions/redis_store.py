# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Session stores in Redis: standalone, Sentinel and Cluster.

A sweep reads with plain pipelined commands (SCAN, HGETALL, PTTL: one write and one
read per batch) and judges in Python; deletes and restores run as one server-side
script per batch (per hash slot in a cluster), so every decision to delete or write
is atomic on the server.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import collections
import itertools
import operator
import re
import threading
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import Wire, bulk, encode, encode_each
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import (
    RedisScript, is_error as _is_error, noscript_positions as _noscript_positions, reply_or_raise as _reply_or_raise,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import (
    StoreError, describe_redis_error, redis_error_text,
)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_connection as _connection
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_connection import (
    REDIS_IMPORT_ERROR, as_text, host_port,
)

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
RESTORE_SCRIPT = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local result = {}
local at = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local kind = ARGV[at]
  local expire_at = tonumber(ARGV[at + 1])
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
    if expire_at >= 0 then
      redis.call('PEXPIREAT', key, expire_at)
    end
    result[i] = 1
  end
end
return result
"""


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


_ASKING = encode((b'ASKING',))


def _redirection(reply):
    """('MOVED' or 'ASK', (slot, host, port)) of a cluster redirection, ('TRYAGAIN', None), or None for any other reply.

    Replies read by hiredis keep the server's text (``MOVED 3999 127.0.0.1:6381``); redis-py's
    own reader turns them into MovedError / AskError / TryAgainError with the code cut off.
    """
    if not isinstance(reply, Exception):
        return None
    if isinstance(reply, redis.exceptions.AskError):
        kind = 'MOVED' if isinstance(reply, redis.exceptions.MovedError) else 'ASK'
        return kind, (int(reply.slot_id), reply.host, int(reply.port))
    if isinstance(reply, redis.exceptions.TryAgainError):
        return 'TRYAGAIN', None
    words = str(reply).split(' ')
    if words[0] in ('MOVED', 'ASK') and len(words) == 3:
        host, _colon, port = words[2].rpartition(':')
        return words[0], (int(words[1]), host, int(port))
    return ('TRYAGAIN', None) if words[0] == 'TRYAGAIN' else None


class _Redirections:
    """A cluster's redirections followed within a batch, the way redis-py's cluster client follows them.

    MOVED: the slot has a new owner (a reshard finished, a replica took over); the slot
    map is read again and the command runs on the owner the reply names. ASK: the slot is
    being migrated and the key is already on the target; the command runs there once,
    behind ASKING. TRYAGAIN: a multi-key script met a slot whose keys are split between
    the two nodes; it runs again key by key (``split``), each following its own redirection.
    Whatever still redirects after HOPS is left as the error it is (the sweep stops saying
    that slots moved). A script runs on any node with the same guard, so the rules of a
    delete and a restore hold wherever the key is.
    """

    HOPS = 3

    def __init__(self, cluster_client, kwargs: dict):
        self._cluster = cluster_client
        self._kwargs = kwargs
        self._clients = {}
        self._moved = set()  # (slot, host, port) of the MOVED answers the slot map was read again for
        self._lock = threading.Lock()

    def client(self, address):
        with self._lock:
            if address not in self._clients:
                self._clients[address] = redis.Redis(host=address[0], port=address[1], **self._kwargs)
            return self._clients[address]

    def refresh(self, moved) -> None:
        """Read the slot map again once a slot has a new owner (it decides which partition a restore writes through)."""
        with self._lock:
            if moved - self._moved:
                self._moved |= moved
                self._cluster.nodes_manager.initialize()

    def follow(self, client, items, replies, payload_of, split=None, preamble=b'', asking=False, hops=HOPS):
        """(items, replies) with every redirection followed; ``payload_of(item)`` is the item's command in the protocol.

        ``client`` is the node that gave ``replies``; ``split`` breaks a multi-key item in
        single-key items (a TRYAGAIN answer); ``preamble`` is sent ahead on every other
        node (a SCRIPT LOAD). A split item's parts take its place, in order.
        """
        targets = {}
        moved = set()
        for position, reply in enumerate(replies):
            where = _redirection(reply)
            if where is None or not hops:
                continue
            kind, address = where
            if kind == 'MOVED':
                moved.add(address)
            if kind == 'TRYAGAIN':
                if split is None or len(items[position]) < 2:
                    continue
                targets.setdefault((None, asking, True), []).append(position)
            else:
                targets.setdefault((address[1:], kind == 'ASK', False), []).append(position)
        if not targets:
            return items, replies
        if moved:
            self.refresh(moved)
        answered = {position: ([item], [reply]) for position, (item, reply) in enumerate(zip(items, replies))}
        for (address, asks, splitting), positions in targets.items():
            node = client if address is None else self.client(address)
            for position in positions:
                parts = split(items[position]) if splitting else [items[position]]
                answered[position] = self.run(node, parts, payload_of, split, preamble, asks, hops - 1)
        out_items, out_replies = [], []
        for position in range(len(items)):
            out_items.extend(answered[position][0])
            out_replies.extend(answered[position][1])
        return out_items, out_replies

    def run(self, client, items, payload_of, split=None, preamble=b'', asking=False, hops=HOPS):
        """(items, replies) of ``items`` run on ``client`` (ASKING before each when ``asking``), redirections followed."""
        per_item = 2 if asking else 1
        wire = Wire(client)
        try:
            wire.send_encoded(preamble + b''.join([(_ASKING if asking else b'') + payload_of(item) for item in items]),
                              bool(preamble) + per_item * len(items))
            replies = wire.receive(bool(preamble) + per_item * len(items))
        finally:
            wire.close()
        if preamble:
            _reply_or_raise(replies.pop(0))
        replies = replies[per_item - 1::per_item]
        return self.follow(client, items, replies, payload_of, split, preamble, asking, hops)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


def _one_group_per_entry(group) -> list:
    """Script groups of one entry each: a group a cluster node could not run whole (TRYAGAIN), split."""
    return [[entry] for entry in group]


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


# Deletes sent before the answers of earlier ones are read: the server runs the next one
# while this process reads what the last one did.
DELETES_AHEAD = 2
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


class RedisPartition:
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

    # ---- sweep ----------------------------------------------------------------------------------

    def sweep(self, job) -> None:
        """Scan, read, judge, back up and delete, one round trip per batch and stage, the stages overlapped.

        The reader connection carries SCAN, HGETALL and PTTL, the remover connection the
        delete scripts. The reads of the next batch are sent as soon as the SCAN answer
        names its keys, so the server reads batch n+1 while this process judges batch n,
        the backup thread makes the victims of batch n-1 durable, and the delete of an
        earlier batch runs. A batch is in the backup (fsynced) before its delete is sent,
        and at most DELETES_AHEAD deletes are in flight.
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
            self._guarded(lambda: self._sweep(job, reader, remover))
        finally:
            for wire in wires:
                wire.close()

    def _send_reads(self, reader, cursor: bytes, keys, size: int, recent: _RecentKeys):
        """Ask for the next SCAN page (unless the scan is done) and every new key's content: (keys, scanning) or None."""
        keys = recent.fresh(keys)
        scanning = cursor != b'0'
        if not scanning and not keys:
            return None
        payload = encode(self._scan_command(cursor, size)) if scanning else b''
        reader.send_encoded(payload + encode_each(b'HGETALL', keys), scanning + len(keys))
        return keys, scanning

    def _scan_command(self, cursor: bytes, count: int):
        return (b'SCAN', cursor, b'MATCH', self.pattern, b'COUNT', count)

    def _sweep(self, job, reader, remover) -> None:
        size = job.options.batch_size
        delete_args = _delete_args(job.options.guard_fields)
        recent = _RecentKeys()
        reading = self._send_reads(reader, *_reply_or_raise(reader.call([self._scan_command(b'0', size)])[0]), size, recent)
        timed = []                     # victims whose PTTL was asked for after the reads (the backup keeps the TTL)
        backing = collections.deque()  # (victims, their backup write), oldest first
        in_flight = collections.deque()  # slot groups of the deletes whose answers are still to be read, oldest first
        try:
            while reading or timed or backing:
                keys, scanning = reading or ([], False)
                replies = reader.receive(scanning + len(keys) + len(timed))
                if scanning:
                    cursor, next_keys = _reply_or_raise(replies[0])
                    reading = self._send_reads(reader, cursor, next_keys, size, recent)
                else:
                    reading = None
                contents, ttls = replies[scanning:scanning + len(keys)], replies[scanning + len(keys):]
                if timed:
                    ready = _with_ttls(timed, self._followed(b'PTTL', [entry.key for entry in timed], ttls)
                                       if self.redirections else ttls)
                    backing.append((ready, job.start_backup(ready)))
                # the oldest backup's delete once it is durable (waited for when a second backup
                # is queued behind it, or when nothing is left to read)
                if backing and (len(backing) > 1 or not reading or job.backup_done(backing[0][1])):
                    if len(in_flight) == DELETES_AHEAD:
                        self._settle_oldest(job, remover, in_flight, delete_args)
                    job.finish_backup(backing[0][1])
                    self.send_delete(remover, backing.popleft()[0], delete_args, in_flight)
                timed = []
                if keys:
                    victims = self._judge(job, keys, contents)
                    if job.backing_up:
                        timed = victims
                        reader.send_encoded(encode_each(b'PTTL', [entry.key for entry in victims]), len(victims))
                    elif job.deleting and victims:
                        backing.append((victims, None))
        except Exception as exc:
            # whatever stopped the sweep (the store, the backup, the identity provider): the backup
            # says which backed-up victims were never sent, and the deletes in flight are counted
            # if the server can still say (one whose answer is lost stays in the backup: restore
            # never overwrites a session that is still there)
            for victims, pending in backing:
                job.abandon(victims, pending)
            try:
                while in_flight:
                    self._settle_oldest(job, remover, in_flight, delete_args)
            except StoreError:
                raise  # the primary changed under the sweep: that is the news, counted on the new primary
            except Exception:  # pylint: disable=broad-except  # the first error is the one to report
                pass
            if self.watch is not None and isinstance(exc, redis.RedisError):
                self._after_lost_connection(job, in_flight)
            raise
        while in_flight:
            self._settle_oldest(job, remover, in_flight, delete_args)

    def _judge(self, job, keys, replies):
        """A batch's victims, from its HGETALL answers.

        When the expiry alone decides (``job.by_expiry``), hashes are judged by that field
        read straight off the flat answer, and only the victims become entries: half a
        sweep's sessions are usually kept, and building their dicts cost more than judging.
        """
        read_strings = job.options.malformed == 'sweep'
        if not job.by_expiry:
            return job.judge(self._entries(self.client, keys, self._followed(b'HGETALL', keys, replies), read_strings))
        name = job.options.expires_field
        raws = _expiries_in_place(replies, name)
        if raws is None:
            hash_keys, flats, raws, other_keys, other_replies = _expiries_one_by_one(keys, replies, name)
        else:  # the usual batch: every answer a hash, the expiry where it is in the first
            hash_keys, flats, other_keys, other_replies = keys, replies, (), ()
        victims = [Entry(hash_keys[at], 'hash', _hash_of_flat_reply(flats[at])) for at in job.judge_expiries(hash_keys, raws)]
        if other_keys:
            other_replies = self._followed(b'HGETALL', other_keys, other_replies)
            victims.extend(job.judge(self._entries(self.client, other_keys, other_replies, read_strings)))
        return victims

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

    def send_delete(self, wire, victims, args_for, in_flight) -> None:
        """Send the conditional delete of ``victims`` (and the primary's checks behind Sentinels).

        Its slot groups and the number of check answers join ``in_flight`` before anything
        is sent, so a delete whose sending failed is still one whose outcome is to be found
        out. ``args_for`` is _delete_args of the guard fields, built once per sweep.
        """
        groups = self._groups(victims)
        checks = self.watch.checks() if self.watch is not None else []
        in_flight.append((groups, len(checks)))
        self._delete.send(wire, groups, args_for)
        wire.send(checks)

    def _settle_oldest(self, job, wire, in_flight, args_for) -> None:
        """Read what the oldest delete in flight did and count it.

        A group the server could not run (NOSCRIPT: it lost its scripts) is sent again
        after the script is loaded. The answers of the deletes sent after it come first on
        the connection, so they are read first, and everything the answers already tell is
        counted before that retry, which may fail too.
        """
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
            self._stop_unconfirmed(job, wire, in_flight, groups, replies)
        if self.redirections is not None:
            groups, replies = self._follow_deletes(job, groups, replies, args_for)
        lost = _noscript_positions(replies)
        ran = [index for index, reply in enumerate(replies) if not isinstance(reply, Exception)]
        job.settle(*self._deleted([groups[index] for index in ran], [replies[index] for index in ran]))
        refused = [index for index, reply in enumerate(replies)
                   if isinstance(reply, Exception) and not _is_error(reply, 'NOSCRIPT')]
        if refused:
            # a script that failed aborted before anything was unlinked: none of its group was deleted
            job.abandon(_concatenated([groups[index] for index in refused + lost]))
            raise replies[refused[0]]
        if lost:
            lost = [groups[index] for index in lost]
            job.settle(*self._deleted(lost, self._delete.run_again(wire, lost, args_for)))

    def _follow_deletes(self, job, groups, replies, args_for):
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
                self._delete, [groups[index] for index in moved], [replies[index] for index in moved], args_for))
        except StoreError:
            ran = [index for index in staying if not isinstance(replies[index], Exception)]
            job.settle(*self._deleted([groups[index] for index in ran], [replies[index] for index in ran]))
            job.abandon(_concatenated([groups[index] for index in staying if index not in set(ran)]))
            raise
        return [groups[index] for index in staying] + followed[0], [replies[index] for index in staying] + followed[1]

    def _after_lost_connection(self, job, in_flight) -> None:
        """Behind Sentinels: a connection failed, maybe because a failover demoted the server.

        The deletes whose answers are lost are counted by what the primary the Sentinels
        name now no longer holds; when that is another server, that is what stopped the sweep.
        """
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

    def _stop_unconfirmed(self, job, wire, in_flight, groups, replies) -> None:
        """The primary did not confirm a delete: count only what the primary the Sentinels name now lacks, then stop.

        The deletes of this answer and of every one still in flight may have reached a server
        that was no longer the primary (a failover promoted a replica meanwhile): they are lost
        when it resyncs. Each victim a script removed (or whose answer never came) is looked
        up on the primary the Sentinels name now: one it still holds was not deleted.
        """
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

    # ---- restore --------------------------------------------------------------------------------

    def would_restore(self, entries):
        """What restore() would answer, without writing: 1 absent, 0 exists (TTLs are judged by restore)."""
        def probe(wire):
            keys = [entry.key for entry in entries]
            replies = self._followed(b'EXISTS', keys, wire.call([(b'EXISTS', key) for key in keys]))
            return [0 if _reply_or_raise(exists) else 1 for exists in replies]
        return self._with_wire(probe)

    def restore(self, entries):
        """Write back each entry (unique keys) whose key does not exist: 1 restored, 0 exists, -1 its TTL ran out.

        The answers come in slot-group order.
        """
        def write(wire):
            self._restore.load(wire)
            groups = self._groups(entries)
            replies = self._restore.run(wire, groups, _restore_args, raising=False)
            answers = _concatenated([_reply_or_raise(reply) for reply in self._followed_script(self._restore, groups, replies, _restore_args)[1]])
            if self.watch is not None and 1 in answers:
                self.watch.confirm_restore(wire)
            return answers
        return self._with_wire(write)

    def _with_wire(self, action):
        wire = self._wire()
        try:
            return self._guarded(lambda: action(wire))
        finally:
            wire.close()


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


class _PrimaryWatch:
    """The primary the Sentinels name, checked on every connection and after every delete (backend redis_sentinel).

    A failover promotes a replica while the old primary still takes writes, until the
    Sentinels demote it seconds later; whatever it took meanwhile is lost when it resyncs.
    So every connection must reach the primary the Sentinels named and serve as primary,
    and every delete is followed by WAIT for every replica the primary had (whichever one
    is promoted then holds it) and ROLE. A delete not confirmed so stops the sweep, and only
    what the primary the Sentinels name then no longer holds is counted as deleted.
    """

    def __init__(self, sentinel, name: str, kwargs: dict, timeout: float, address):
        self.sentinel = sentinel
        self.name = name
        self.kwargs = kwargs
        self.timeout = timeout
        self.address = address
        self.replicas = 0

    def check_connection(self, wire) -> None:
        """A new connection reached the primary the Sentinels named, and it still serves as one."""
        role = _reply_or_raise(wire.call([(b'ROLE',)])[0])
        if wire.peer != self.address:
            raise StoreError(f'the primary of service {self.name} changed from {host_port(self.address)} to '
                             f'{host_port(wire.peer)} while the module connected (a Sentinel failover); re-run')
        if as_text(role[0]) != 'master':
            raise StoreError(f'{host_port(self.address)}, the primary of service {self.name}, now serves as '
                             f'{as_text(role[0])} (a Sentinel failover); re-run when the failover is done')
        self.replicas = max(self.replicas, len(role[2]))

    @property
    def wait_ms(self) -> int:
        """How long WAIT waits: within the socket's ``timeout``, so that its answer (short) arrives rather than a timeout."""
        return max(1, int(self.timeout * 800))

    def checks(self) -> list:
        """The commands sent after each delete: WAIT for every replica (when there are any), then ROLE."""
        commands = [(b'WAIT', self.replicas, self.wait_ms)] if self.replicas else []
        return commands + [(b'ROLE',)]

    def confirmed(self, answers) -> bool:
        """Whether the answers of checks() say every replica holds the deletes and the server is still primary."""
        for answer in answers:
            if isinstance(answer, Exception):
                return False
            if isinstance(answer, int) and answer < self.replicas:
                return False
            if isinstance(answer, list) and as_text(answer[0]) != 'master':
                return False
        return True

    def confirm_restore(self, wire) -> None:
        """The restore's writes are held by every replica and the server is still primary (checks()), or stop.

        The rule of the sweep's deletes: a write a primary took after a failover demoted it
        is lost when it resyncs, so a restore is done only when it is confirmed.
        """
        answers = wire.call(self.checks())
        if self.confirmed(answers):
            return
        old = host_port(self.address)
        if isinstance(answers[-1], list) and as_text(answers[-1][0]) != 'master':
            raise StoreError(f'{old}, the primary of service {self.name}, now serves as {as_text(answers[-1][0])} '
                             '(a Sentinel failover) and may lose the sessions it restored; re-run the restore when the '
                             'failover is done (it never overwrites a session that exists again)')
        raise StoreError(f'the replicas of {old} did not confirm the restored sessions in time (WAIT {self.replicas}); '
                         'check the replicas\' link to the primary, or raise timeout, then re-run the restore (it never '
                         'overwrites a session that exists again)')

    def current(self):
        """The primary the Sentinels name now: a new one as soon as they agree on it, else the same after ``timeout``."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            named = {view for view in _connection.sentinel_views(self.sentinel, self.name).values() if isinstance(view, tuple)}
            if len(named) == 1 and named != {self.address}:
                break
            time.sleep(0.2)
        return _connection.settled_master(self.sentinel, self.name, self.kwargs, self.timeout)

    def client(self, address):
        return redis.Redis(host=address[0], port=address[1], **self.kwargs)

    def holding(self, address, keys) -> set:
        """The keys that exist on the server at ``address``."""
        client = self.client(address)
        found = set()
        try:
            for start in range(0, len(keys), 1000):
                chunk = keys[start:start + 1000]
                pipe = client.pipeline(transaction=False)
                for key in chunk:
                    pipe.exists(key)
                found.update(key for key, exists in zip(chunk, pipe.execute()) if exists)
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, host_port(address))) from None
        finally:
            client.close()
        return found

    def settle_on_current(self, job, victims, outcome):
        """Count the deletes of ``victims`` the primary named now confirms (the key is gone there).

        Returns that primary and how many deletes it does not confirm.
        """
        new = self.current()
        held = self.holding(new, [entry.key for entry, gone in zip(victims, outcome) if gone])
        confirmed = [gone and entry.key not in held for entry, gone in zip(victims, outcome)]
        job.settle(victims, confirmed)
        return new, sum(outcome) - sum(confirmed)

    def stopped(self, new, lost: int) -> str:
        """Why the sweep stopped after settle_on_current answered (``new``, ``lost``)."""
        old = host_port(self.address)
        if new != self.address:
            return (f'the primary of service {self.name} changed from {old} to {host_port(new)} during the sweep '
                    f'(a Sentinel failover); only the deletes {host_port(new)} confirms are counted ({lost} taken by the '
                    'old primary after it lost its role are lost, the sessions are still there and the backup says so); '
                    're-run to finish')
        return (f'the replicas of {old} did not confirm the deletes in time (WAIT {self.replicas}); {lost} deletes it '
                'does not hold are not counted; check the replicas\' link to the primary, or raise timeout, then re-run')

    def swap(self, key: bytes, expected: bytes, fields: dict) -> str:
        """The compare-and-set of RedisStore.swap_tokens on the primary the Sentinels name now, confirmed there.

        The write is confirmed by WAIT for the primary's replicas, else by reading it back
        from the primary the Sentinels name after it; a write a failover lost is a failure
        that names the server that took it.
        """
        primary = _connection.settled_master(self.sentinel, self.name, self.kwargs, self.timeout)
        new_token = fields[b'refresh_token']
        client = self.client(primary)
        try:
            replicas = len(client.role()[2])
            outcome = int(_SWAP.call(client, [key], [expected, new_token, *_concatenated(fields.items())]))
            acked = client.wait(replicas, self.wait_ms) if replicas and outcome == 1 else replicas
        except redis.RedisError as exc:
            raise StoreError(describe_redis_error(exc, host_port(primary))) from None
        finally:
            client.close()
        answer = {1: 'written', 2: 'already'}.get(outcome, 'conflict')
        if outcome != 1:
            return answer
        now = _connection.settled_master(self.sentinel, self.name, self.kwargs, self.timeout)
        if now == primary and acked >= replicas:
            return answer
        reader = self.client(now)
        try:
            held = reader.hget(key, b'refresh_token')
        except redis.RedisError as exc:
            raise StoreError(f'the new refresh token was written to {host_port(primary)}, but the primary the Sentinels '
                             f'name now, {host_port(now)}, could not confirm it ({redis_error_text(exc)})') from None
        finally:
            reader.close()
        if held != new_token:
            raise StoreError(f'the new refresh token was written to {host_port(primary)}, which lost it: the primary the '
                             f'Sentinels name now, {host_port(now)}, does not hold it (a Sentinel failover)')
        return answer


class RedisStore:
    """The partitions of a Redis deployment, connected and checked."""

    def __init__(self, params: dict, pattern: str):
        if REDIS_IMPORT_ERROR:
            raise StoreError('the redis Python library is required for Redis backends; '
                             'install it on the host that runs the module: pip install redis')
        self.backend = params['backend']
        self.pattern = pattern
        self.prefix = check_pattern(pattern)
        self._matches = glob_matcher(pattern)
        self._cluster_client = None
        self._redirections = None
        self._partitions = self._connect(params)

    def _connect(self, params: dict):
        kwargs = _connection.client_kwargs(params)
        if params['backend'] == 'redis_cluster':
            return self._connect_cluster(params, kwargs)
        watch = None
        if params['backend'] == 'redis_sentinel':
            sentinel, client, location, master = _connection.connect_sentinel(params, kwargs)
            watch = _PrimaryWatch(sentinel, params['sentinel_service_name'], dict(kwargs, db=params['db']),
                                  params['timeout'], master)
        else:
            client, location = _connection.connect_standalone(params, kwargs)
        partition = RedisPartition(client, location, self.pattern, cluster=False, watch=watch)
        partition.ping()
        return [partition]

    def _connect_cluster(self, params: dict, kwargs: dict):
        self._cluster_client, primaries = _connection.connect_cluster(params, kwargs)
        partitions = []
        self._redirections = _Redirections(self._cluster_client, kwargs)
        for client, location in primaries:
            partition = RedisPartition(client, location, self.pattern, cluster=True, redirections=self._redirections)
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
        if self._cluster_client is None:
            return [(self._partitions[0], list(entries))]
        owners = {(p.location): p for p in self._partitions}
        grouped = {}
        for entry in entries:
            node = self._cluster_client.get_node_from_key(entry.key)
            grouped.setdefault(f'{node.host}:{node.port}', []).append(entry)
        # a primary that took over after the connect (a failover) is not a partition: any node
        # will do, its answer (MOVED) sends the writes there
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
        watch = self._partitions[0].watch
        if watch is not None:
            return watch.swap(key, expected_refresh, fields)
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
        if self._redirections is not None:
            self._redirections.close()
