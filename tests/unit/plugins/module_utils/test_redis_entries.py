"""HGETALL answers become the same sessions whichever protocol the connection speaks, and are judged the same
whether by the expiry alone or as whole entries; delete arguments say what was read."""

from __future__ import annotations

import hiredis
import pytest
from redis.exceptions import ResponseError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_deletes import delete_args
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_reads import ReplyBatch, entries_from_replies
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.model import Entry
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import Stats, Sweeper, SweepJob, SweepOptions

KEYS = [b'vllm:session:a', b'vllm:session:gone', b'vllm:session:s']


def entries(replies):
    return [(entry.key, entry.kind, entry.fields) for entry in entries_from_replies(None, KEYS, replies, False)]


def test_resp2_lists_and_resp3_maps_give_the_same_entries():
    wrong = ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value')
    resp2 = [[b'expires_at', b'1', b'refresh_token', b'expires_at'], [], wrong]
    resp3 = [{b'expires_at': b'1', b'refresh_token': b'expires_at'}, {}, wrong]
    expected = [(KEYS[0], 'hash', {b'expires_at': b'1', b'refresh_token': b'expires_at'}), (KEYS[2], 'other', None)]
    assert entries(resp2) == entries(resp3) == expected


GUARD = [b'expires_at', b'refresh_token']
FULL = [Entry(b'vllm:session:%d' % i, 'hash', {b'expires_at': b'%d' % (10 ** i), b'refresh_token': b'rt\r\n%d' % i, b'x': b''})
        for i in range(4)]
GAPS = Entry(b'vllm:session:m', 'hash', {b'refresh_token': b'rt'})
STRING = Entry(b'vllm:session:s', 'string', value=b'a string')


def expectations(entry):
    """One entry's ARGV after the guard names, decoded back from the protocol."""
    count, argv = delete_args(GUARD)([entry])
    reader = hiredis.Reader()
    reader.feed(b'*%d\r\n%s' % (count, argv))
    return reader.gets()[1 + len(GUARD):]


@pytest.mark.parametrize('group', [FULL, FULL + [GAPS], [STRING] + FULL, [GAPS]], ids=['every-field', 'gaps', 'string', 'only-gaps'])
def test_delete_arguments_of_a_group_are_each_entry_in_turn(group):
    count, argv = delete_args(GUARD)(group)
    reader = hiredis.Reader()
    reader.feed(b'*%d\r\n%s' % (count, argv))
    assert reader.gets() == [b'2'] + GUARD + [arg for entry in group for arg in expectations(entry)]


def test_delete_expectations_say_what_was_read():
    assert expectations(FULL[1]) == [b'hash', b'10', b'rt\r\n1']
    assert expectations(GAPS) == [b'hash?', b'!', b'=rt']
    assert expectations(STRING) == [b'string', b'a string', b'']


class Names:
    """The one thing a sweep asks of its store while judging: a key's session id."""

    @staticmethod
    def session_id(key):
        return key.decode()


BATCH_KEYS = [b'vllm:session:%d' % i for i in range(9)]
BATCH = [
    [b'access_token', b'at', b'refresh_token', b'rt', b'expires_at', b'2020-01-01T00:00:00Z'],  # expired, ISO
    [b'expires_at', b'4102444800', b'refresh_token', b'rt'],                                     # valid (2100), digits
    [b'refresh_token', b'rt'],                                                                    # no expiry: malformed
    [b'expires_at', b'unreadable', b'refresh_token', b'rt'],                                     # malformed
    [],                                                                                            # gone since SCAN
    [b'access_token', b'expires_at', b'expires_at', b'1000'],                                    # a value that is the name
    [b'refresh_token', b'expires_at'],                                                            # only as a value: malformed
    [b'expires_at', b'1700000000000'],                                                            # expired, epoch ms
    ResponseError('WRONGTYPE Operation against a key holding the wrong kind of value'),          # a string
]


def judged(options, batch, fast):
    """(victims as (key, kind, fields), the counts) of a batch, by the expiry fast path or by whole entries."""
    job = SweepJob(Sweeper(Names(), options), Stats(), delete=True)
    if fast:
        assert job.by_expiry
        victims = job.judge_batch(ReplyBatch(lambda keys, replies: entries_from_replies(None, keys, replies, False), BATCH_KEYS, batch))
    else:
        victims = job.judge(entries_from_replies(None, BATCH_KEYS, batch, False))
    stats = job.stats
    counts = (stats.scanned, stats.matched, stats.malformed, stats.wrong_type, stats.earliest, stats.latest, stats.sample_ids)
    return [(entry.key, entry.kind, entry.fields) for entry in victims], counts


@pytest.mark.parametrize('select', ['expired', 'all'])
@pytest.mark.parametrize('malformed', ['keep', 'sweep'])
def test_judging_by_the_expiry_alone_gives_what_judging_whole_entries_gives(select, malformed):
    options = SweepOptions(state='swept', select=select, malformed=malformed, cutoff=1_750_000_000)
    # malformed=sweep reads strings with GET (the integration tests do that on a server): none here
    batch = BATCH if malformed == 'keep' else BATCH[:-1]
    fast, slow = judged(options, batch, fast=True), judged(options, batch, fast=False)
    assert fast == slow
    victims, counts = fast
    matched = {'expired': {'keep': 3, 'sweep': 6}, 'all': {'keep': 4, 'sweep': 7}}[select][malformed]
    assert counts[:4] == (len(batch) - 1, matched, 3, int(malformed == 'keep'))
    assert (BATCH_KEYS[5], 'hash', {b'access_token': b'expires_at', b'expires_at': b'1000'}) in victims
