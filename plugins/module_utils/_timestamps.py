# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Timestamps as the incident sees them: ISO 8601 strings or epoch numbers.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import datetime
import re
import time

# Epoch values above this are taken as milliseconds: 1e11 seconds is the year
# 5138, 1e11 milliseconds is March 1973, so the two ranges cannot be confused
# for any timestamp a token store holds.
EPOCH_MILLIS_THRESHOLD = 100_000_000_000

# The moments a timestamp can name: what datetime holds, 0001-01-01T00:00:00Z up to (not
# including) 10000-01-01T00:00:00Z, in epoch seconds. A stored value outside them is
# malformed data and an option outside them is an error, so that nothing downstream (a
# comparison, a report, a backup name) ever meets a moment it cannot write down.
EARLIEST_EPOCH = -62135596800.0
END_EPOCH = 253402300800.0
# Epoch digits this short are always in range, seconds or milliseconds (1e14 ms is the year 5138).
_SHORT_DIGITS = 15

_NUMBER = re.compile(r'^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*$')
_FROM_ISO = datetime.datetime.fromisoformat
_EPOCH = datetime.datetime(1970, 1, 1)
_EXAMPLES = 'give e.g. 2024-07-15T03:00:00Z or 1721012400'


class TimestampError(ValueError):
    """A value that is neither ISO 8601 nor epoch seconds/milliseconds."""


def epoch_from_number(value: float) -> float:
    """Epoch seconds from epoch seconds or milliseconds."""
    value = float(value)
    return value / 1000.0 if value > EPOCH_MILLIS_THRESHOLD else value


def in_range(epoch: float) -> bool:
    """Whether ``epoch`` names a moment of the years 0001 to 9999 (False for NaN and infinities)."""
    return EARLIEST_EPOCH <= epoch < END_EPOCH


def _out_of_range(name: str, value) -> TimestampError:
    return TimestampError(f'{name}: {value!r} is outside the years 0001 to 9999 a timestamp can name; {_EXAMPLES}')


def _checked(epoch: float, name: str, value) -> float:
    if not in_range(epoch):
        raise _out_of_range(name, value)
    return epoch


def parse_timestamp(value, name: str = 'timestamp') -> float:
    """Epoch seconds (UTC) from ISO 8601 (Z, offset, fraction; naive is UTC) or epoch s/ms.

    Raises TimestampError with a one-line message naming ``name`` and the fix, also for a
    moment outside the years 0001 to 9999 (``in_range``) and for NaN or an infinity.
    """
    if isinstance(value, bool):
        raise TimestampError(f'{name}: {value!r} is not a timestamp; give ISO 8601 (2024-07-15T03:00:00Z) or epoch seconds')
    if isinstance(value, (int, float)):
        try:
            return _checked(epoch_from_number(value), name, value)
        except OverflowError:  # an int too large for a float
            raise _out_of_range(name, value) from None
    if isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    text = str(value).strip()
    if _NUMBER.match(text):
        return _checked(epoch_from_number(float(text)), name, text)
    iso = text[:-1] + '+00:00' if text[-1:] in ('Z', 'z') else text
    try:
        parsed = datetime.datetime.fromisoformat(iso)
    except ValueError:
        if text.startswith('0000-'):
            raise _out_of_range(name, text) from None
        raise TimestampError(f'{name}: {text!r} is not ISO 8601 or epoch seconds; {_EXAMPLES}') from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    try:
        return _checked(parsed.timestamp(), name, text)
    except OverflowError:  # an offset that moves the moment past datetime's own range
        raise _out_of_range(name, text) from None


def parse_expiry(raw):
    """Epoch seconds from a stored expiry (bytes, text or number), or None when unreadable.

    Unreadable includes a moment outside the years 0001 to 9999 (``in_range``) and NaN
    or an infinity: such a value is malformed data, never a moment to compare or report.
    """
    return parse_expiries((raw,))[0]


def parse_expiries(raws) -> list:
    """parse_expiry of every value of ``raws``, in order (None for a missing or unreadable one).

    The hot path of a sweep over millions of sessions, a batch at a time: no exception
    escapes, and the two forms services write as bytes (epoch digits,
    ``YYYY-MM-DDTHH:MM:SS`` with a ``Z``) are read inline, without a call per value or
    the general parser; they give exactly what it gives. Both are always in range: fewer
    than ``_SHORT_DIGITS`` digits (exact as a float), and a four-digit year.
    """
    expiries = []
    add = expiries.append
    for raw in raws:
        if type(raw) is bytes:  # pylint: disable=unidiomatic-typecheck  # a subclass takes the general path
            if raw.isdigit() and len(raw) < _SHORT_DIGITS:  # ASCII digits only, for bytes
                value = float(raw)
                add(value / 1000.0 if value > EPOCH_MILLIS_THRESHOLD else value)
                continue
            if len(raw) == 20 and raw[19] == 90:  # b'Z'
                try:
                    add(_FROM_ISO(raw.decode('ascii')).timestamp())
                    continue
                except ValueError:
                    pass  # not ASCII, not ISO, or a Python (< 3.11) that reads no Z: the general parser judges
        add(None if raw is None else _parse_stored(raw))
    return expiries


def _parse_stored(raw):
    """parse_expiry without its fast paths: a number, or what parse_timestamp reads, in range; else None."""
    try:
        value = epoch_from_number(raw)
    except (TypeError, ValueError, OverflowError):
        pass
    else:
        return value if in_range(value) else None
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
    """ISO 8601 UTC with a Z, second precision; None stays None.

    Any moment ``in_range`` is written, the first and last years included (by
    arithmetic, not the platform's gmtime, which refuses some of them); TimestampError
    for one outside.
    """
    if epoch is None:
        return None
    if not in_range(epoch):
        raise _out_of_range('timestamp', epoch)
    moment = _EPOCH + datetime.timedelta(seconds=epoch)
    return moment.isoformat(timespec='seconds') + 'Z'


def backup_stamp(epoch: float | None = None) -> str:
    """UTC timestamp for backup file names, to the microsecond so runs never collide."""
    moment = datetime.datetime.fromtimestamp(time.time() if epoch is None else epoch, tz=datetime.timezone.utc)
    return moment.strftime('%Y%m%dT%H%M%S.%fZ')
