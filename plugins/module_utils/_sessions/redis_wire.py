# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Many Redis commands in one write, their replies read later, in order.

A sweep sends a whole batch (a thousand HGETALLs, the next SCAN) as one write and
reads the replies when it needs them, so the server works on one batch while this
process judges the previous one. redis-py opens the connection (TLS, AUTH, SELECT
are its business); with hiredis installed the replies are parsed straight off that
connection's socket (_SocketReplies, through the one documented private hook of
redis_py_internals.py), without redis-py's per-reply overhead. Without hiredis the same calls go through redis-py's public
reader (_PublicReplies), slower but the same. The commands are written by this
module's encoder (encode, encode_each), which writes what redis-py's public
Connection.pack_commands writes (a unit test compares them) about fifty times faster:
through pack_commands the encoding alone would take about 2 s of a 4 s sweep of a
million sessions. This is the one file that writes the protocol (RESP): the scripts'
arguments are built from its bulk, bulk_format and array_header.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import itertools
import socket

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_py_internals import connection_socket, pooled_connection

try:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, ResponseError, TimeoutError as RedisTimeoutError
except ImportError:
    pass  # only the Redis store uses this module, and it reports the missing library

try:
    import hiredis
except ImportError:
    hiredis = None

_READ_SIZE = 1 << 14
# What the reader answers while no whole reply is buffered: no reply is this object, so
# replies can be taken in a loop that runs in C (a reply of 0 equals the default False).
_NO_REPLY = object()


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode('utf-8')


def bulk(value) -> bytes:
    """One argument in the Redis protocol (RESP): a bulk string."""
    value = _as_bytes(value)
    return b'$%d\r\n%s\r\n' % (len(value), value)


def array_header(count: int) -> bytes:
    """The head of an array of ``count`` items (a command of ``count`` arguments), its items to follow."""
    return b'*%d\r\n' % count


def bulk_format(count: int) -> bytes:
    """A %-format of ``count`` bulk strings, each formatted from (length, value): for many values in one go."""
    return b'$%d\r\n%s\r\n' * count


def encode(command) -> bytes:
    """One command in the protocol: an array of bulk strings."""
    return array_header(len(command)) + b''.join([bulk(value) for value in command])


def encode_each(name: bytes, keys) -> bytes:
    """``name key`` for every key, as one payload (the hot path of a sweep: HGETALL, PTTL)."""
    return _joined(keys, b'*2\r\n' + bulk(name))


def bulks(values) -> bytes:
    """Bulk strings of ``values`` (bytes), one after the other."""
    return _joined(values, b'')


def _joined(values, before: bytes) -> bytes:
    """``before`` and a bulk string, for every value."""
    lengths = set(map(len, values))
    if len(lengths) == 1:
        # values of one length (the usual session keys): one join, no formatting per value
        separator = b'\r\n%s$%d\r\n' % (before, lengths.pop())
        return separator[2:] + separator.join(values) + b'\r\n'
    return b''.join([b'%s$%d\r\n%s\r\n' % (before, len(value), value) for value in values])


def error_reply(text: str) -> ResponseError:
    """An error reply read off the wire, classified as redis-py's parser classifies it where the sweep decides by it.

    NOSCRIPT (the server lost a script: run it again after SCRIPT LOAD) is a NoScriptError
    with the code cut off, as redis-py's reader makes it; any other error reply is a
    ResponseError that keeps the server's whole text (errors.py reads its code, and a
    cluster's redirections are read off it).
    """
    if text.startswith('NOSCRIPT '):
        return NoScriptError(text[len('NOSCRIPT '):])
    return ResponseError(text)


def _new_reader():
    """(a hiredis reader, whether it answers _NO_REPLY while no whole reply is buffered: a hiredis since 2.x does)."""
    try:
        return hiredis.Reader(replyError=error_reply, notEnoughData=_NO_REPLY), True
    except TypeError:  # a hiredis without notEnoughData: it answers False
        return hiredis.Reader(replyError=error_reply), False


class _SocketReplies:
    """Replies parsed by hiredis straight off the connection's socket (redis_py_internals.connection_socket).

    Measured with a full sweep (read, judge, back up, guarded delete) of 100,000 sessions,
    alternated with the public path (the connection's ``read_response``) on one server:
    about a fifth less wall time (median 11.1 s against 13.6 s). It is used only when
    hiredis is installed and redis-py lets the connection's socket be reached (a redis-py
    that does not gets _PublicReplies, the tested fallback).
    """

    def __init__(self, sock):
        self._socket = sock  # a connected socket.socket
        self._reader, in_c = _new_reader()
        self._ready = self._ready_replies if in_c else self._ready_one_by_one
        self._buffer = bytearray(_READ_SIZE)

    @classmethod
    def of(cls, connection):
        """The socket reader for ``connection``, or None when hiredis or the socket is missing."""
        sock = connection_socket(connection)
        return cls(sock) if hiredis is not None and sock is not None else None

    def receive(self, count: int) -> list:
        replies = []
        while True:
            self._ready(replies, count - len(replies))
            if len(replies) == count:
                return replies
            self._fill()

    def _ready_replies(self, replies: list, most: int) -> None:
        """Add to ``replies`` the whole replies buffered, at most ``most``."""
        replies.extend(itertools.islice(iter(self._reader.gets, _NO_REPLY), most))

    def _ready_one_by_one(self, replies: list, most: int) -> None:
        gets = self._reader.gets
        for _index in range(most):
            reply = gets()
            if reply is False:
                return
            replies.append(reply)

    def _fill(self) -> None:
        try:
            size = self._socket.recv_into(self._buffer)
        except socket.timeout:
            raise RedisTimeoutError('Timeout reading from socket') from None
        except OSError as exc:
            raise RedisConnectionError(f'Error while reading from socket: {exc.strerror or exc}') from None
        if not size:
            raise RedisConnectionError('Connection closed by server.')
        self._reader.feed(self._buffer, 0, size)


class _PublicReplies:
    """Replies through redis-py's public ``Connection.read_response`` (its own parser, hiredis when installed)."""

    def __init__(self, connection):
        self._connection = connection

    def receive(self, count: int) -> list:
        replies = []
        for _index in range(count):
            try:
                replies.append(self._connection.read_response(disable_decoding=True))
            except ResponseError as exc:
                replies.append(exc)
        return replies


class PipelinedConnection:
    """One connection of a client's pool, used for pipelined commands only, closed when done.

    ``send`` writes commands; ``receive(n)`` returns the next ``n`` replies, an error
    reply as a ResponseError instance in its place (the connection stays usable).
    Replies are read by _SocketReplies where it can (``private_reads`` None or true),
    else by _PublicReplies (``private_reads`` false, or hiredis or the socket missing);
    ``private_reads`` then tells which one reads.
    """

    def __init__(self, client, private_reads=None):
        self._pool = client.connection_pool
        self._connection = pooled_connection(self._pool)
        replies = _SocketReplies.of(self._connection) if private_reads is not False else None
        self.private_reads = replies is not None
        self._replies = replies or _PublicReplies(self._connection)
        self.unread_replies = 0
        self._broken = False

    @property
    def peer(self) -> tuple:
        """(host, port) of the server this connection reached."""
        return self._connection.host, int(self._connection.port)

    def send(self, commands) -> None:
        """Write ``commands`` (tuples of bytes, str or int) in one go."""
        if commands:
            self.send_encoded(b''.join([encode(command) for command in commands]), len(commands))

    def send_encoded(self, payload: bytes, count: int) -> None:
        """Write ``count`` commands already in the protocol (see encode and encode_each)."""
        if count:
            self._connection.send_packed_command([payload], check_health=False)
            self.unread_replies += count

    def receive(self, count: int) -> list:
        if count > self.unread_replies:
            raise ValueError(f'{count} replies asked for, {self.unread_replies} unread')
        if self._broken:
            # a read that failed may have consumed part of the replies: the rest cannot be matched to commands
            raise RedisConnectionError('the connection failed earlier')
        try:
            replies = self._replies.receive(count)
        except Exception:
            self._broken = True
            raise
        self.unread_replies -= count
        return replies

    def call(self, commands) -> list:
        self.send(commands)
        return self.receive(len(commands))

    def close(self) -> None:
        """Disconnect (replies may still be owed, or the stream may be broken) and give the slot back."""
        self._connection.disconnect()
        self._pool.release(self._connection)
