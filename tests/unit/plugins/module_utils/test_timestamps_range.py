"""Timestamps outside what a datetime holds: malformed when stored, one clear error when given."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import Stats
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import (
    EARLIEST_EPOCH, END_EPOCH, TimestampError, in_range, iso_utc, parse_expiry, parse_optional, parse_timestamp)

# Every value a hostile or unlucky store or user was seen to give, as text.
OUT_OF_RANGE_TEXT = [
    '1e300', '-1e300', '1e+300', '1.0e300',
    '12345678901234567', '-12345678901234567',  # 17 digits: milliseconds of the year 393,000
    '999999999999999', '9999999999999999',  # 15 and 16 digits: beyond the year 9999 as milliseconds
    '-99999999999',  # seconds before the year 1
    '1' + '0' * 400, '-1' + '0' * 400,  # beyond a float: infinities
    '0000-01-01T00:00:00Z', '0000-01-01T00:00:00+00:00', '0000-12-31 23:59:59',
    '0001-01-01T00:00:00+01:00',  # an hour before the first moment
    '9999-12-31T23:59:59-01:00',  # an hour after the last
]
NON_FINITE = [float('inf'), float('-inf'), float('nan')]
OUT_OF_RANGE_NUMBERS = [1e300, -1e300, 12345678901234567, -12345678901234567, 10 ** 400, -10 ** 400] + NON_FINITE


@pytest.mark.parametrize('text', OUT_OF_RANGE_TEXT)
@pytest.mark.parametrize('form', ['bytes', 'str'])
def test_a_stored_expiry_outside_the_years_1_to_9999_is_malformed(text, form):
    assert parse_expiry(text.encode() if form == 'bytes' else text) is None


@pytest.mark.parametrize('number', OUT_OF_RANGE_NUMBERS, ids=repr)
def test_a_stored_expiry_number_outside_the_range_is_malformed(number):
    assert parse_expiry(number) is None


@pytest.mark.parametrize('raw, expected', [
    (b'0001-01-01T00:00:00Z', EARLIEST_EPOCH),
    (b'9999-12-31T23:59:59Z', END_EPOCH - 1),
    (b'99999999999999', 99999999999.999),  # the longest digits the fast path reads: 1e14 ms, the year 5138
    (b'-62135596800', EARLIEST_EPOCH),
    ('0001-01-01T00:00:00-01:00', EARLIEST_EPOCH + 3600),
])
def test_the_first_and_last_moments_are_read(raw, expected):
    assert parse_expiry(raw) == pytest.approx(expected)


@pytest.mark.parametrize('value', OUT_OF_RANGE_TEXT + OUT_OF_RANGE_NUMBERS, ids=repr)
def test_an_option_outside_the_range_is_one_line_naming_it(value):
    with pytest.raises(TimestampError) as caught:
        parse_optional(value, 'cutoff')
    message = str(caught.value)
    assert message.startswith('cutoff: ') and '\n' not in message
    assert 'give e.g. 2024-07-15T03:00:00Z or 1721012400' in message


@pytest.mark.parametrize('value', ['1e300', '-1e300', '12345678901234567', '0000-01-01T00:00:00Z', 1e300])
def test_an_option_outside_the_range_says_so(value):
    with pytest.raises(TimestampError, match=r'^restored_at: .* is outside the years 0001 to 9999 a timestamp can name; give'):
        parse_timestamp(value, 'restored_at')


@pytest.mark.parametrize('value', ['1e9', '-5', '+1720612800', '1720612800.'])
def test_signed_and_exponent_epochs_are_read_like_stored_ones(value):
    assert parse_timestamp(value) == parse_expiry(value.encode())


@pytest.mark.parametrize('epoch, text', [
    (EARLIEST_EPOCH, '0001-01-01T00:00:00Z'),
    (EARLIEST_EPOCH + 0.5, '0001-01-01T00:00:00Z'),
    (END_EPOCH - 1, '9999-12-31T23:59:59Z'),
    (END_EPOCH - 0.0001, '9999-12-31T23:59:59Z'),
    (-1, '1969-12-31T23:59:59Z'),
])
def test_iso_utc_writes_every_moment_in_range(epoch, text):
    assert in_range(epoch)
    assert iso_utc(epoch) == text


@pytest.mark.parametrize('epoch', [END_EPOCH, EARLIEST_EPOCH - 1, 1e300, -1e300] + NON_FINITE, ids=repr)
def test_iso_utc_refuses_a_moment_out_of_range_with_its_own_error(epoch):
    with pytest.raises(TimestampError, match='is outside the years 0001 to 9999'):
        iso_utc(epoch)


def test_the_sweep_counts_and_reports_the_extreme_moments():
    stats = Stats()
    for raw in (b'0001-01-01T00:00:00Z', b'9999-12-31T23:59:59Z', b'1720612800'):
        stats.add_expiry(parse_expiry(raw))
    assert (iso_utc(stats.earliest), iso_utc(stats.latest)) == ('0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z')
