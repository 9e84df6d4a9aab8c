# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: log_evidence
short_description: Count the incident's error lines in a service log since a moment
version_added: 0.1.0
description:
  - Scans log text for the token-refresh error lines of the incident (C(TokenRefreshError),
    C(Invalid token in session state), C(Failed to refresh token), C(Session token mismatch after restore),
    C(Token cache not found or corrupted)) and returns counts per pattern with first and last seen times.
  - Lines are dated by their leading ISO 8601 timestamp; a line without one belongs to the line before it.
options:
  _input:
    description: The log text.
    type: str
    required: true
  since:
    description: Only lines logged at or after this moment count (ISO 8601 or epoch seconds).
    type: str
  patterns:
    description: The substrings to count.
    type: list
    elements: str
  session:
    description:
      - A session id (the refresh probe's). C(other_session_lines) counts the error lines about a named session
        other than it, those that name one (C(for session <id>), C(session_id=<id>), not C(unknown)) and those that
        name no session right after them.
    type: str
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Error lines since the restore
  ansible.builtin.set_fact:
    evidence: "{{ log_text | inferops.vllm_dr.log_evidence(since='2024-07-15T03:00:00Z') }}"
"""

RETURN = r"""
_value:
  description: >-
    C(since), C(lines_scanned), C(error_lines), C(other_session_lines) (of them, the lines about a named session
    other than O(session)) and C(patterns) (count, first_seen, last_seen per pattern).
  type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._log_evidence import chosen_patterns, scan
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError, parse_optional


def log_evidence(text, since=None, patterns=None, session=None):
    try:
        moment = parse_optional(since, 'since')
    except TimestampError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return scan(str(text or ''), moment, chosen_patterns(patterns), None if session in (None, '') else str(session))


class FilterModule:
    def filters(self):
        return {'log_evidence': log_evidence}
