"""Expiry and restore times in every form the token stores hold them."""

from __future__ import annotations

import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import (
    TimestampError, backup_stamp, in_range, iso_utc, parse_expiry, parse_optional, parse_timestamp)

JULY_10_NOON = 1720612800.0


@pytest.mark.parametrize('value', [
    '2024-07-10T12:00:00Z',
    '2024-07-10T12:00:00z',
    '2024-07-10T14:00:00+02:00',
    '2024-07-10T12:00:00.000Z',
    '2024-07-10 12:00:00',
    '1720612800',
    ' 1720612800 ',
    '1720612800000',
    1720612800,
    1720612800000,
    1720612800.0,
    b'2024-07-10T12:00:00Z',
])
def test_every_form_means_the_same_moment(value):
    assert parse_timestamp(value) == JULY_10_NOON


def test_fractional_seconds_are_kept():
    assert parse_timestamp('2024-07-10T12:00:00.25Z') == JULY_10_NOON + 0.25


@pytest.mark.parametrize('value', ['next tuesday', '', '2024-13-45', True, '12:00'])
def test_unreadable_values_name_the_option_and_the_fix(value):
    with pytest.raises(TimestampError, match=r'^restored_at: .* (is not|not a timestamp).*2024-07-15T03:00:00Z'):
        parse_timestamp(value, 'restored_at')


def test_unset_optional_is_none_or_now():
    assert parse_optional(None, 'cutoff') is None
    assert abs(parse_optional('', 'cutoff', default_now=True) - time.time()) < 5


def test_iso_utc_and_backup_stamp():
    assert iso_utc(JULY_10_NOON) == '2024-07-10T12:00:00Z'
    assert iso_utc(None) is None
    assert backup_stamp(JULY_10_NOON + 0.5) == '20240710T120000.500000Z'


def _general_parse(raw):
    """parse_expiry without its fast paths: what every stored value must mean."""
    try:
        value = float(raw)
    except ValueError:
        pass
    else:
        return value / 1000.0 if value > 100_000_000_000 else value
    try:
        return parse_timestamp(raw)
    except TimestampError:
        return None


EXPIRY_FORMS = [
    b'2024-07-10T12:00:00Z', b'2024-07-10 12:00:00Z', b'2024-02-29T23:59:59Z', b'2023-02-29T00:00:00Z',
    b'2024-13-01T00:00:00Z', b'2024-07-10T24:00:00Z', b' 2024-07-10T12:00:0Z', b'2024-07-10T12:00+05Z',
    b'2024-07-10T120000.5Z', b'20240710T120000Z', b'2024-07-10T12:00:00z', b'2024-07-10T12:00:00.5Z',
    b'1720612800', b'1720612800000', b'0', b'99999999999', b'100000000001', b'999999999999999',
    b'9999999999999999', b'1' * 400, b'1720612800.5', b' 1720612800', b'-5', b'', b'soon',
    '１７２０６１２８００'.encode(), b'\xff\xfe', b'2024-07-10T12:00:00\xffZ'[:20],
]


@pytest.mark.parametrize('raw', EXPIRY_FORMS)
def test_parse_expiry_fast_paths_agree_with_the_general_parser(raw):
    expected = _general_parse(raw)
    if expected is not None and not in_range(expected):  # NaN, infinities, outside the years 0001 to 9999
        expected = None
    assert parse_expiry(raw) == expected
