# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one way this collection runs a server-side Lua script in Redis.

Every script (the sweep's guarded delete and restore, the token swap of the refresh
probe, the run lock's owner-checked write) is a RedisScript: run by its SHA1 with
EVALSHA, and loaded again where the server lost it (NOSCRIPT: a restart, a failover,
SCRIPT FLUSH). A single call goes through redis-py's own Script (``register_script``),
on any client (standalone, Sentinel primary, cluster). The sweep's runs, many per
write on a PipelinedConnection, are written in the protocol here, from the same source and
SHA1.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import hashlib

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import array_header, bulk, bulks

try:
    from redis.exceptions import NoScriptError
except ImportError:
    pass  # only the Redis store and the run lock use this module, and they report the missing library


def is_error(reply, code: str) -> bool:
    """Whether a pipelined reply is the server's error ``code`` (an error reply stays in its place as an exception)."""
    return isinstance(reply, Exception) and str(reply).startswith(code)


def is_noscript(reply) -> bool:
    """Whether a reply says the server lost the script (NOSCRIPT): a NoScriptError, as redis-py's parser and redis_wire.py classify it."""
    return isinstance(reply, NoScriptError)


def noscript_positions(replies) -> list:
    """The positions of the script runs the server could not start: it had lost the script (NOSCRIPT)."""
    return [index for index, reply in enumerate(replies) if is_noscript(reply)]


def reply_or_raise(reply):
    """A reply, or its error raised (the caller's guard turns it into one line)."""
    if isinstance(reply, Exception):
        raise reply
    return reply


class RedisScript:
    """A Lua script run with EVALSHA, loaded again when the server lost it.

    ``call`` runs it once on a redis-py client; ``load``, ``payload``, ``send``, ``run``
    and ``run_again`` run it per group of entries on a PipelinedConnection (``args_for(group)`` gives a
    group's ARGV already in the protocol: (count, bytes)). ``loaded`` tells whether this
    instance sent SCRIPT LOAD already (one instance per server). ``keys_in_argv``: the
    group's keys are sent as ARGV (their count first, then the keys) and none as KEYS, for a
    script whose flags let it touch the keys of several hash slots of one cluster node
    (Redis Cluster refuses declared keys of several slots before the script starts).
    """

    def __init__(self, source: str, keys_in_argv: bool = False):
        self.source = source.encode('utf-8')
        self.sha = hashlib.sha1(self.source).hexdigest().encode('ascii')
        self.loaded = False
        self.keys_in_argv = keys_in_argv

    def call(self, client, keys, args):
        """One run on ``client`` (EVALSHA, SCRIPT LOAD and again on NOSCRIPT): redis-py's Script does exactly that."""
        return client.register_script(self.source)(keys=list(keys), args=list(args))

    def payload(self, groups, args_for) -> bytes:
        """One EVALSHA per group of entries (a cluster's slot groups; one group elsewhere), in the protocol."""
        parts = []
        evalsha = bulk(b'EVALSHA') + bulk(self.sha)
        for group in groups:
            count, argv = args_for(group)
            if self.keys_in_argv:
                parts.append(array_header(4 + len(group) + count) + evalsha + bulk(0) + bulk(len(group)))
            else:
                parts.append(array_header(3 + len(group) + count) + evalsha + bulk(len(group)))
            parts.append(bulks([entry.key for entry in group]))
            parts.append(argv)
        return b''.join(parts)

    def send(self, wire, groups, args_for) -> None:
        wire.send_encoded(self.payload(groups, args_for), len(groups))

    def load(self, wire) -> None:
        if not self.loaded:
            self.sha = reply_or_raise(wire.call([(b'SCRIPT', b'LOAD', self.source)])[0])
            self.loaded = True

    def run(self, wire, groups, args_for, raising: bool = True) -> list:
        """The answers of one run per group; the groups the server could not run (it lost its scripts) run again.

        ``raising`` false: an error reply stays in its group's place.
        """
        self.send(wire, groups, args_for)
        replies = wire.receive(len(groups))
        lost = noscript_positions(replies)
        if lost:
            for index, reply in zip(lost, self.run_again(wire, [groups[index] for index in lost], args_for, raising)):
                replies[index] = reply
        return [reply_or_raise(reply) for reply in replies] if raising else replies

    def run_again(self, wire, groups, args_for, raising: bool = True) -> list:
        """Load the script again (the server answered NOSCRIPT: it never ran) and run it for ``groups``."""
        self.loaded = False
        self.load(wire)
        self.send(wire, groups, args_for)
        replies = wire.receive(len(groups))
        return [reply_or_raise(reply) for reply in replies] if raising else replies
