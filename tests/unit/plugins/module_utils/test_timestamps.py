"""Expiry and restore times in every form the token stores hold them."""

from __future__ import annotations

import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import (
    TimestampError, backup_stamp, iso_utc, parse_optional, parse_timestamp)

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
