# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Timestamps as the incident sees them: ISO 8601 strings or epoch numbers.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import datetime
import math
import re
import time

# Epoch values above this are taken as milliseconds: 1e11 seconds is the year
# 5138, 1e11 milliseconds is March 1973, so the two ranges cannot be confused
# for any timestamp a token store holds.
EPOCH_MILLIS_THRESHOLD = 100_000_000_000

_NUMBER = re.compile(r'^\s*[0-9]+(\.[0-9]+)?\s*$')
_FROM_ISO = datetime.datetime.fromisoformat


class TimestampError(ValueError):
    """A value that is neither ISO 8601 nor epoch seconds/milliseconds."""


def epoch_from_number(value: float) -> float:
    """Epoch seconds from epoch seconds or milliseconds."""
    value = float(value)
    return value / 1000.0 if value > EPOCH_MILLIS_THRESHOLD else value


def parse_timestamp(value, name: str = 'timestamp') -> float:
    """Epoch seconds (UTC) from ISO 8601 (Z, offset, fraction; naive is UTC) or epoch s/ms.

    Raises TimestampError with a one-line message naming ``name`` and the fix.
    """
    if isinstance(value, bool):
        raise TimestampError(f'{name}: {value!r} is not a timestamp; give ISO 8601 (2024-07-15T03:00:00Z) or epoch seconds')
    if isinstance(value, (int, float)):
        return epoch_from_number(value)
    if isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    text = str(value).strip()
    if _NUMBER.match(text):
        return epoch_from_number(float(text))
    iso = text[:-1] + '+00:00' if text[-1:] in ('Z', 'z') else text
    try:
        parsed = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise TimestampError(
            f'{name}: {text!r} is not ISO 8601 or epoch seconds; give e.g. 2024-07-15T03:00:00Z or 1721012400'
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed.timestamp()


def parse_expiry(raw):
    """Epoch seconds from a stored expiry (bytes, text or number), or None when unreadable.

    The hot path of a sweep over millions of sessions: no exception escapes, and the
    two forms services write (epoch digits, ``YYYY-MM-DDTHH:MM:SS`` with a ``Z``) are
    read without the general parser; they give exactly what it gives.
    """
    if isinstance(raw, bytes):
        if raw.isdigit() and len(raw) < 16:
            return epoch_from_number(int(raw))
        if len(raw) == 20 and raw[19:] == b'Z':
            try:
                return _FROM_ISO(raw.decode('ascii')).timestamp()
            except ValueError:
                pass  # not ASCII, not ISO, or a Python (< 3.11) that reads no Z: the general parser judges
    try:
        value = float(raw)
    except (TypeError, ValueError):
        pass
    else:
        return epoch_from_number(value) if math.isfinite(value) else None
    try:
        return parse_timestamp(raw)
    except TimestampError:
        return None


def parse_optional(value, name: str, default_now: bool = False):
    """parse_timestamp for an optional option: None (or now, with default_now) when unset."""
    if value is None or value == '':
        return time.time() if default_now else None
    return parse_timestamp(value, name)


def iso_utc(epoch) -> str | None:
    """ISO 8601 UTC with a Z, second precision; None stays None."""
    if epoch is None:
        return None
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return moment.strftime('%Y-%m-%dT%H:%M:%SZ')


def backup_stamp(epoch: float | None = None) -> str:
    """UTC timestamp for backup file names, to the microsecond so runs never collide."""
    moment = datetime.datetime.fromtimestamp(time.time() if epoch is None else epoch, tz=datetime.timezone.utc)
    return moment.strftime('%Y%m%dT%H%M%S.%fZ')
