# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where a key lives in a Redis Cluster, and its redirections (MOVED, ASK, TRYAGAIN) followed within a batch.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import threading

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_py_internals import refresh_slot_map
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_script import reply_or_raise
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import PipelinedConnection, encode

try:
    import redis
    from redis.crc import key_slot
except ImportError:
    pass  # REDIS_IMPORT_ERROR says so when a store is opened


_ASKING = encode((b'ASKING',))


def redirection(reply):
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


def one_group_per_entry(group) -> list:
    """Script groups of one entry each: a group a cluster node could not run whole (TRYAGAIN), split."""
    return [[entry] for entry in group]


class ClusterRouter:
    """Where a cluster's keys are, and its redirections followed the way redis-py's cluster client follows them.

    Every redirect of the sweep's reads, deletes and restores is followed here. MOVED: the
    slot has a new owner (a reshard finished, a replica took over); the slot map is read
    again and the command runs on the owner the reply names. ASK: the slot is being migrated
    and the key is already on the target; the command runs there once, behind ASKING.
    TRYAGAIN: a multi-key script met a slot whose keys are split between the two nodes; it
    runs again key by key, each following its own redirection. Whatever still redirects
    after HOPS is left as the error it is (the sweep stops saying that slots moved). A
    script runs on any node with the same guard, so the rules of a delete and a restore
    hold wherever the key is.
    """

    HOPS = 3
    spans_slots = True  # a script's keys must share a slot, or its flags must allow several (see redis_deletes)

    def __init__(self, cluster_client, kwargs: dict):
        self._cluster = cluster_client
        self._kwargs = kwargs
        self._clients = {}
        self._moved = set()  # (slot, host, port) of the MOVED answers the slot map was read again for
        self._lock = threading.Lock()

    @staticmethod
    def slot_groups(entries) -> list:
        """Script calls may only touch one hash slot in a cluster: the entries grouped by slot."""
        groups = {}
        for entry in entries:
            groups.setdefault(key_slot(entry.key), []).append(entry)
        return list(groups.values())

    def owner(self, key: bytes) -> str:
        """host:port of the primary the slot map names for ``key``."""
        node = self._cluster.get_node_from_key(key)
        return f'{node.host}:{node.port}'

    @staticmethod
    def redirected(replies) -> list:
        """The positions of the replies that are redirections."""
        return [index for index, reply in enumerate(replies) if redirection(reply)]

    def replies_where_keys_are(self, client, name: bytes, keys, replies):
        """The replies of ``name key`` for ``keys`` from ``client``, the redirected ones read again where the key is now."""
        return self.follow(client, keys, replies, lambda key: encode((name, key)))[1]

    def script_runs_where_keys_are(self, client, script, groups, replies, args_for):
        """(groups, replies) of a script's runs on ``client``, the redirected (or retried) ones done where the keys are."""
        return self.follow(client, groups, replies, lambda group: script.payload([group], args_for),
                           split=one_group_per_entry, preamble=encode((b'SCRIPT', b'LOAD', script.source)))

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
                refresh_slot_map(self._cluster)

    def follow(self, client, items, replies, payload_of, split=None, preamble=b'', asking=False, hops=HOPS):
        """(items, replies) with every redirection followed; ``payload_of(item)`` is the item's command in the protocol.

        ``client`` is the node that gave ``replies``; ``split`` breaks a multi-key item in
        single-key items (a TRYAGAIN answer); ``preamble`` is sent ahead on every other
        node (a SCRIPT LOAD). A split item's parts take its place, in order.
        """
        targets = {}
        moved = set()
        for position, reply in enumerate(replies):
            where = redirection(reply)
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
        connection = PipelinedConnection(client)
        try:
            connection.send_encoded(preamble + b''.join([(_ASKING if asking else b'') + payload_of(item) for item in items]),
                                    bool(preamble) + per_item * len(items))
            replies = connection.receive(bool(preamble) + per_item * len(items))
        finally:
            connection.close()
        if preamble:
            reply_or_raise(replies.pop(0))
        replies = replies[per_item - 1::per_item]
        return self.follow(client, items, replies, payload_of, split, preamble, asking, hops)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
