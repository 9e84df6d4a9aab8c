# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The reads of a sweep of one Redis server: SCAN pages, HGETALLs and PTTLs, one write and one read per batch.

The reads of a batch are sent as soon as the SCAN answer names its keys, so the server
reads batch n+1 while this process judges batch n; the PTTLs of a batch's victims (the
backup keeps each TTL) ride with the reads of the batch after it.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import collections
import operator
import time

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import is_error, reply_or_raise
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import encode, encode_each
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep_pipeline import Batch

# SCAN pages whose keys are remembered: SCAN lists a key again when the table is resized
# between two calls, and the keys it repeats then come from the buckets it visited just
# before (SCAN walks the table in reverse-binary order, so the buckets of a resized one are
# neighbours). A repeated key is not read, judged, backed up or deleted a second time.
SCAN_MEMORY_PAGES = 16


class RecentKeys:
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


class PipelinedReads:
    """The reader connection of one partition's sweep: the reads in flight and the victims being timed.

    ``routing`` finds the answers a cluster redirected where the key is now (see
    redis_cluster.ClusterRouter); ``client`` is the server's redis-py client (the GETs of
    keys of another type, and the node the redirections are followed from).
    """

    def __init__(self, connection, client, pattern: bytes, options, routing):
        self.connection = connection
        self._client = client
        self._pattern = pattern
        self._size = options.batch_size
        self._read_strings = options.sweeps_malformed  # a string under the pattern may go then: read it
        self._routing = routing
        self._recent = RecentKeys()
        self.reading = None  # (keys, whether a SCAN page was asked for too) of the reads sent last
        self.timed = []  # victims whose PTTL was asked for after the reads

    def start(self) -> None:
        """Ask for the first SCAN page, and the reads of the keys it names."""
        first = reply_or_raise(self.connection.call([self._scan_command(b'0')])[0])
        self.reading = self._send_reads(*first)

    def _send_reads(self, cursor: bytes, keys):
        """Ask for the next SCAN page (unless the scan is done) and every new key's content: (keys, scanning) or None."""
        keys = self._recent.fresh(keys)
        scanning = cursor != b'0'
        if not scanning and not keys:
            return None
        payload = encode(self._scan_command(cursor)) if scanning else b''
        self.connection.send_encoded(payload + encode_each(b'HGETALL', keys), scanning + len(keys))
        return keys, scanning

    def _scan_command(self, cursor: bytes):
        return (b'SCAN', cursor, b'MATCH', self._pattern, b'COUNT', self._size)

    def next_batch(self):
        """The HGETALL answers of the batch read last (the next one asked for first), and the victims whose PTTLs came."""
        if self.reading is None and not self.timed:
            return None
        keys, scanning = self.reading or ([], False)
        timed, self.timed = self.timed, []
        replies = self.connection.receive(scanning + len(keys) + len(timed))
        if scanning:
            cursor, next_keys = reply_or_raise(replies[0])
            self.reading = self._send_reads(cursor, next_keys)
        else:
            self.reading = None
        batch = ReplyBatch(self.whole_entries, keys, replies[scanning:scanning + len(keys)])
        if timed:
            ttls = self._routing.replies_where_keys_are(self._client, b'PTTL', [entry.key for entry in timed],
                                                        replies[scanning + len(keys):])
            batch.ready = with_ttls(timed, ttls)
        return batch

    def prepare(self, victims) -> None:
        """Ask for the victims' PTTLs: they come back with the next batch (next_batch's ``ready``)."""
        self.timed = victims
        self.connection.send_encoded(encode_each(b'PTTL', [entry.key for entry in victims]), len(victims))

    def whole_entries(self, keys, replies):
        """Entries from a batch's HGETALL answers, the ones a cluster redirected read again where the key is now."""
        replies = self._routing.replies_where_keys_are(self._client, b'HGETALL', keys, replies)
        return entries_from_replies(self._client, keys, replies, self._read_strings)


def hash_of_flat_reply(flat) -> dict:
    """A hash from its flat HGETALL answer (name, value, name, value, ...)."""
    pairs = iter(flat)
    return dict(zip(pairs, pairs))


def entries_from_replies(client, keys, replies, read_strings: bool):
    """Sessions from HGETALL answers; a key of another type becomes a 'string' entry (GET on ``client``) or 'other'."""
    entries = []
    other = []
    for key, reply in zip(keys, replies):
        # an empty answer: the key went away since SCAN listed it
        if type(reply) is list:  # pylint: disable=unidiomatic-typecheck  # RESP2 (what the store asks for): a flat list
            if reply:
                entries.append(Entry(key, 'hash', hash_of_flat_reply(reply)))
        elif isinstance(reply, dict):  # RESP3: a map
            if reply:
                entries.append(Entry(key, 'hash', reply))
        elif is_error(reply, 'WRONGTYPE'):
            other.append(key)
        else:
            reply_or_raise(reply)
    if other and read_strings:
        pipe = client.pipeline(transaction=False)
        for key in other:
            pipe.get(key)
        for key, value in zip(other, pipe.execute(raise_on_error=False)):
            if is_error(value, 'WRONGTYPE'):
                entries.append(Entry(key, 'other'))
            elif value is not None:
                entries.append(Entry(key, 'string', value=reply_or_raise(value)))
    else:
        entries.extend(Entry(key, 'other') for key in other)
    return entries


class ReplyBatch(Batch):
    """A batch as its HGETALL answers came (sweep_pipeline.Batch): the expiry field is read straight off the flat answers.

    Hashes give their raw expiry (raw_expiries); only the victims among them become
    entries. Keys of other types, and answers a cluster redirected, become entries whole
    (``whole(keys, replies)``).
    """

    def __init__(self, whole, keys, replies):
        self._whole = whole
        self.keys = keys
        self._replies = replies
        self._hash_keys, self._flats = keys, replies
        self._other_keys = self._other_replies = ()

    def raw_expiries(self, name: bytes):
        raws = expiries_in_place(self._replies, name)
        if raws is None:
            self._hash_keys, self._flats, raws, self._other_keys, self._other_replies = \
                expiries_one_by_one(self.keys, self._replies, name)
        # else the usual batch: every answer a hash, the expiry where it is in the first
        return self._hash_keys, raws

    def entries(self, positions):
        keys, flats = self._hash_keys, self._flats
        return [Entry(keys[at], 'hash', hash_of_flat_reply(flats[at])) for at in positions]

    def other_entries(self):
        if not self._other_keys:
            return []
        return self._whole(self._other_keys, self._other_replies)

    def all_entries(self):
        return self._whole(self.keys, self._replies)


def expiries_in_place(replies, name: bytes):
    """The field ``name`` of every HGETALL answer, when each is a hash's flat answer holding it at one position; else None.

    Sessions written alike list their fields alike, so the usual batch is read by position
    in a few passes over it, not answer by answer. A hash's field names are unique and sit
    at even positions: the value after ``name`` there is the one expiries_one_by_one reads.
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


def expiries_one_by_one(keys, replies, name: bytes):
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
                raws.append(reply[at + 1] if at % 2 == 0 else hash_of_flat_reply(reply).get(name))
        else:
            other_keys.append(key)
            other_replies.append(reply)
    return hash_keys, flats, raws, other_keys, other_replies


def with_ttls(entries, replies):
    """Entries with their absolute expiry (ms) from PTTL answers: -1 no TTL, -2 gone (the delete will see it)."""
    now_ms = int(time.time() * 1000)
    for entry, ttl in zip(entries, replies):
        if isinstance(ttl, Exception):  # raised, without a call per entry
            raise ttl
        entry.pexpireat = now_ms + ttl if ttl >= 0 else None
    return entries
