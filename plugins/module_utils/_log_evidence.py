# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The incident's error lines in a service log: counts per pattern, first and last seen, since a moment.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import re

from ._timestamps import iso_utc, parse_expiry

# The write-up's symptoms, as the service logs them.
INCIDENT_PATTERNS = (
    'TokenRefreshError',
    'Invalid token in session state',
    'Failed to refresh token',
    'Session token mismatch after restore',
    'Token cache not found or corrupted',
)


def line_time(line: str):
    """Epoch seconds of a line that starts with an ISO 8601 timestamp, else None."""
    head = line.split(' ', 1)[0]
    return parse_expiry(head) if head[:1].isdigit() and '-' in head else None


# How a service line names the session it is about: "... for session <id>" or "(session_id=<id>)"
_SESSION_NAMED = re.compile(r'\bsession_id=([^\s,;()]+)|\bfor session ([^\s,;:()]+)')
# What a service writes where it could not tell the session
_NO_SESSION = ('unknown', 'none', 'null', '-')


def scan(text: str, since=None, patterns=INCIDENT_PATTERNS, session=None) -> dict:
    """Count ``patterns`` in lines logged at or after ``since`` (epoch seconds; None: every line).

    A line without a timestamp belongs to the last timestamped line before it. ``other_session_lines`` counts the
    error lines about a named session other than ``session`` (the refresh probe's session id): the lines that name
    it, and the lines that name no session right after them (the rest of the same failed request). Lines about no
    session that can be named (a start-up line, a token the service matched to no session) are not among them.
    They are lines the probe did not cause: evidence of sessions failing beyond the probe's own.
    """
    found = {pattern: {'count': 0, 'first_seen': None, 'last_seen': None} for pattern in patterns}
    scanned = other_session_lines = 0
    current = about = None
    erred = False
    for line in text.splitlines():
        stamp = line_time(line)
        if stamp is not None:
            current = stamp
        if since is not None and (current is None or current < since):
            continue
        scanned += 1
        hits = 0
        for pattern in patterns:
            if pattern in line:
                hits += 1
                entry = found[pattern]
                entry['count'] += 1
                when = iso_utc(current) if current is not None else None
                entry['first_seen'] = entry['first_seen'] or when
                entry['last_seen'] = when
        named = _SESSION_NAMED.search(line)
        # a line that names no session continues the failed request of the error line before it
        about = (named.group(1) or named.group(2)) if named is not None else (about if hits and erred else None)
        erred = hits > 0
        if about is not None and about != session and about.lower() not in _NO_SESSION:
            other_session_lines += hits
    return {'since': iso_utc(since) if since is not None else None, 'lines_scanned': scanned,
            'error_lines': sum(entry['count'] for entry in found.values()), 'other_session_lines': other_session_lines,
            'patterns': found}


def chosen_patterns(patterns=None) -> tuple:
    """The patterns to count: the ones given, or the incident's when none are."""
    return tuple(patterns or INCIDENT_PATTERNS)


def _known(moments) -> list:
    return [moment for moment in moments if moment is not None]


def merge(evidences, since=None, patterns=INCIDENT_PATTERNS) -> dict:
    """One evidence over several logs (each a ``scan`` with the same ``since`` and ``patterns``): counts add up,
    a pattern was first seen at the earliest of its first sightings and last seen at the latest of its last.

    Each log is scanned on its own, so a line without a timestamp at the top of one log is never dated by the last
    line of another.
    """
    evidences = list(evidences)
    found = {}
    for pattern in patterns:
        entries = [evidence['patterns'][pattern] for evidence in evidences]
        found[pattern] = {'count': sum(entry['count'] for entry in entries),
                          'first_seen': min(_known(entry['first_seen'] for entry in entries), default=None),
                          'last_seen': max(_known(entry['last_seen'] for entry in entries), default=None)}
    return {'since': iso_utc(since) if since is not None else None,
            'lines_scanned': sum(evidence['lines_scanned'] for evidence in evidences),
            'error_lines': sum(entry['count'] for entry in found.values()),
            'other_session_lines': sum(evidence.get('other_session_lines', 0) for evidence in evidences), 'patterns': found}
