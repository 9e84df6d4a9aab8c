"""The sweep's batch fast paths give exactly what the general, value-by-value paths give."""

from __future__ import annotations

import socket

import hiredis
import pytest
from redis.exceptions import ResponseError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions import redis_wire as _redis_wire
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_reads import expiries_in_place, expiries_one_by_one
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_wire import PipelinedConnection
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.backup import backup_lines
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import (
    TimestampError, epoch_from_number, in_range, parse_expiries, parse_expiry, parse_timestamp)


def _general(raw):
    """What a stored expiry means, by the general parser alone: a number, else parse_timestamp; in range, else None."""
    if raw is None:
        return None
    try:
        value = epoch_from_number(raw)
    except (TypeError, ValueError, OverflowError):
        try:
            return parse_timestamp(raw)
        except TimestampError:
            return None
    return value if in_range(value) else None


class Bytes(bytes):
    """A bytes subclass: never taken by the inline paths, still read the same."""


ISO_SHAPES = [
    '2024-07-10T12:00:00Z', '2024-07-10T12:00:00z', '2024-07-10 12:00:00Z', '2024-07-10T12:00:00', '2024-07-10',
    '2024-07-10T12:00:00.5Z', '2024-07-10T12:00:00.123456Z', '2024-07-10T12:00:00+02:00', '2024-07-10T12:00:00-02:30',
    '2024-07-10T12:00:00+00:00', '2024-07-10T12:00+05Z', '2024-07-10T120000.5Z', '20240710T120000Z', '20240710T120000.123Z',
    '2024-W28-3T12:00:00Z', '2024-02-29T23:59:59Z', '2023-02-29T00:00:00Z', '2024-13-01T00:00:00Z', '2024-07-10T24:00:00Z',
    '2024-07-10T12:00:60Z', '0000-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:59:59-01:00', ' 2024-07-10T12:00:00Z', '2024-07-10T12:00:00Z ', ' 2024-07-10T12:00:0Z', '2024-07-10T12:00:0 Z',
    '2024-07-10T12:00:00ZZ', '2024-07-10T12:00:00\u00a0Z'[:20], '２０２４-07-10T12:00:00Z', '2024-07-10T12:00:0٠Z', '2024-07-1OT12:00:00Z',
]
NUMBER_SHAPES = [
    '0', '1', '00001720612800', '1720612800', '1720612800000', '99999999999', '100000000000', '100000000001',
    '999999999999999', '9999999999999999', '1' * 400, '253402300799', '253402300800', '253402300800000', '253402300800001',
    '-1', '-62135596800', '-62135596801', '+1720612800', '1720612800.5', '1720612800.', '.5', '1e9', '1E12', '1e400', '-1e400',
    ' 1720612800', '1720612800 ', '\t1720612800\n', '1_720_612_800', '0x10', 'nan', 'inf', '-inf', 'NaN',
    '１７２０６１２８００', '١٧٢٠٦١٢٨٠٠', '²', '', ' ', 'soon', 'unreadable', 'None', 'true', 'Z', 'z' * 20,
]
TEXT_SHAPES = ISO_SHAPES + NUMBER_SHAPES
OTHER_VALUES = [
    None, True, False, 0, 1, -1, 1720612800, 1720612800000, 10 ** 400, -10 ** 400, 1720612800.5, float('nan'), float('inf'),
    b'\xff\xfe', b'2024-07-10T12:00:00\xffZ'[:20], b'\x00' * 20, b'2024-07-10T12:00:00Z\x00', bytearray(b'1720612800'),
    Bytes(b'1720612800'), Bytes(b'2024-07-10T12:00:00Z'), Bytes(b'soon'),
]
# every text as bytes (how a store answers), as text (as a caller may pass it), and the other kinds of value
ALL_VALUES = [text.encode('utf-8') for text in TEXT_SHAPES] + TEXT_SHAPES + OTHER_VALUES


@pytest.mark.parametrize('raw', ALL_VALUES, ids=repr)
def test_each_expiry_reads_as_the_general_parser_reads_it(raw):
    expected = _general(raw)
    assert parse_expiries([raw]) == [expected]
    assert parse_expiry(raw) == expected
    if expected is not None:
        assert type(parse_expiries([raw])[0]) is float  # pylint: disable=unidiomatic-typecheck


def test_a_batch_of_every_shape_reads_as_the_general_parser_reads_it_in_order():
    batch = ALL_VALUES * 3
    assert parse_expiries(batch) == [_general(raw) for raw in batch]
    assert parse_expiries(()) == []


def test_inline_epoch_digits_are_read_exactly():
    """Every length the inline path takes, at the edge of the seconds/milliseconds threshold and of float precision."""
    values = [b'9' * digits for digits in range(1, 16)] + [b'1' + b'0' * digits for digits in range(15)]
    values += [b'%d' % number for number in (99_999_999_999, 100_000_000_000, 100_000_000_001, 2 ** 53 - 1, 2 ** 53 + 1)]
    assert parse_expiries(values) == [_general(raw) for raw in values]


FLAT = [b'access_token', b'at', b'refresh_token', b'rt', b'expires_at', b'1720612800']
WRONG_TYPE = ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value')
BATCHES = {
    'alike': [FLAT, FLAT[:4] + [b'expires_at', b'2024-07-10T12:00:00Z'], FLAT[:5] + [b'']],
    'first field': [[b'expires_at', b'1', b'refresh_token', b'rt'], [b'expires_at', b'2', b'refresh_token', b'rt']],
    'another order': [FLAT, [b'expires_at', b'1', b'access_token', b'at', b'refresh_token', b'rt']],
    'a name as a value first': [[b'access_token', b'expires_at', b'expires_at', b'1000'],
                                [b'access_token', b'expires_at', b'expires_at', b'2000']],
    'a name as a value after the field': [[b'expires_at', b'1', b'refresh_token', b'expires_at'],
                                          [b'expires_at', b'expires_at', b'refresh_token', b'rt']],
    'a name only as a value later': [FLAT, [b'access_token', b'at', b'refresh_token', b'rt', b'refresh_token', b'expires_at']],
    'a value equal to the name where the name sits': [FLAT, FLAT[:4] + [b'x', b'expires_at']],
    'one without the field': [FLAT, [b'access_token', b'at', b'refresh_token', b'rt']],
    'a shorter hash': [FLAT, [b'access_token', b'at']],
    'a longer hash': [FLAT, FLAT + [b'user', b'u']],
    'a key gone since SCAN': [FLAT, []],
    'only gone keys': [[], []],
    'a string': [FLAT, WRONG_TYPE],
    'a string first': [WRONG_TYPE, FLAT],
    'a RESP3 map': [FLAT, {b'access_token': b'at', b'expires_at': b'1'}],
    'a tuple': [FLAT, tuple(FLAT)],
    'no field anywhere': [[b'a', b'b'], [b'c', b'd']],
    'empty batch': [],
}


@pytest.mark.parametrize('name', BATCHES)
def test_expiries_read_in_place_are_what_reading_one_by_one_gives(name):
    replies = BATCHES[name]
    keys = [b'vllm:session:%d' % index for index in range(len(replies))]
    in_place = expiries_in_place(replies, b'expires_at')
    if in_place is None:
        assert name not in ('alike', 'first field', 'a name as a value after the field')
        return
    hash_keys, flats, raws, other_keys, other_replies = expiries_one_by_one(keys, replies, b'expires_at')
    assert (hash_keys, flats, other_keys, other_replies) == (keys, replies, [], [])
    assert in_place == raws


def test_the_usual_batch_is_read_in_place():
    replies = [FLAT[:5] + [b'%d' % (1720612800 + index)] for index in range(1000)]
    assert expiries_in_place(replies, b'expires_at') == [b'%d' % (1720612800 + index) for index in range(1000)]


# Every kind of RESP2 reply, 0 and the empty array among them (0 equals hiredis's default "no reply yet", False).
REPLIES = [
    (b':0\r\n', 0), (b':1\r\n', 1), (b':-2\r\n', -2), (b'$-1\r\n', None), (b'$0\r\n\r\n', b''), (b'+OK\r\n', b'OK'),
    (b'$5\r\nhello\r\n', b'hello'), (b'*0\r\n', []), (b'*2\r\n$1\r\na\r\n:0\r\n', [b'a', 0]), (b'*-1\r\n', None),
]


def _wire(ready: str, read_size: int):
    """A PipelinedConnection on one end of a socket pair, reading with hiredis as a sweep does, by the given way of taking replies."""
    ours, theirs = socket.socketpair()
    ours.settimeout(5)  # a wire that waits for a reply never sent fails, it does not hang
    replies = _redis_wire._SocketReplies(ours)  # pylint: disable=protected-access  # as a PipelinedConnection makes it
    replies._buffer = bytearray(read_size)  # pylint: disable=protected-access
    if ready == 'in C':
        assert replies._ready == replies._ready_replies  # pylint: disable=protected-access  # this hiredis has notEnoughData
    else:
        replies._reader = hiredis.Reader(replyError=ResponseError)  # pylint: disable=protected-access  # an old hiredis's
        replies._ready = replies._ready_one_by_one  # pylint: disable=protected-access
    wire = PipelinedConnection.__new__(PipelinedConnection)
    wire._replies, wire.unread_replies, wire._broken = replies, 0, False  # pylint: disable=protected-access
    return wire, ours, theirs


@pytest.mark.parametrize('read_size', [7, 1 << 14])  # replies split over many reads; all of them in one read
@pytest.mark.parametrize('ready', ['in C', 'one by one'])
def test_replies_are_taken_in_order_and_never_more_than_asked(ready, read_size):
    wire, ours, theirs = _wire(ready, read_size)
    try:
        encoded = [data for data, _reply in REPLIES] * 3 + [b'-ERR no such thing\r\n', b':0\r\n']
        expected = [reply for _data, reply in REPLIES] * 3
        theirs.sendall(b''.join(encoded))
        wire.unread_replies = len(encoded)
        assert wire.receive(0) == []
        assert wire.receive(1) == expected[:1]
        assert wire.receive(len(expected) - 1) == expected[1:]
        error, zero = wire.receive(2)
        assert isinstance(error, ResponseError) and str(error) == 'ERR no such thing'
        assert zero == 0 and wire.unread_replies == 0
    finally:
        ours.close()
        theirs.close()


def test_this_hiredis_lets_the_sweep_take_replies_in_c():
    reader, in_c = _redis_wire._new_reader()  # pylint: disable=protected-access
    assert in_c and reader.gets() is _redis_wire._NO_REPLY  # pylint: disable=protected-access


def _hash(fields: int, **metadata):
    return Entry(b'vllm:session:%d' % fields, 'hash', {b'f%d' % index: b'v%d' % index for index in range(fields)}, **metadata)


@pytest.mark.parametrize('shapes', [
    [3, 3, 3, 3],
    [3, 2, 3, 2, 1],
    [3, ('pexpireat', 1720612800000), 3, ('version', 7), ('lease', 5), 3, 4],
    [1, ('pexpireat', 0), 1, 1, ('pexpireat', 5), 2],
], ids=repr)
def test_backup_lines_of_alike_and_mixed_batches_are_what_the_json_encoder_writes(shapes):
    entries = [_hash(3, **{shape[0]: shape[1]}) if isinstance(shape, tuple) else _hash(shape) for shape in shapes]
    assert backup_lines(entries) == b''.join(entry.to_line() + b'\n' for entry in entries)
