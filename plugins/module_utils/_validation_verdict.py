# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the recovery worked: the validation verdict, one check per proof.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ._recovery_verdict import NOT_PROBED

HEALTH = 'service answers /healthz'
LOGS = 'no token error lines since the restart (or this run)'
SESSIONS = 'every session expires in the future'
PROBE = 'refresh probe is healthy'


def _health_check(health, health_url: str) -> dict:
    # A skipped wait (no health_url) has no status; an endpoint that never answered has status -1.
    health = health or {}
    detail = f"HTTP {health.get('status', 'no answer')}" if health_url else 'no health_url'
    return {'name': HEALTH, 'ok': health.get('status', 0) == 200, 'detail': detail}


def _logs_check(logs: dict) -> dict:
    return {'name': LOGS, 'ok': logs['error_lines'] == 0,
            'detail': f"{logs['error_lines']} error lines since {logs.get('since') or 'the start'}"}


def _sessions_check(sessions: dict) -> dict:
    return {'name': SESSIONS, 'ok': sessions['matched'] == 0,
            'detail': f"{sessions['scanned']} sessions, {sessions['matched']} expired, earliest expiry "
                      f"{sessions.get('earliest_expiry') or 'none'}"}


def _probe_check(probe) -> dict:
    # Only a probe that ran has a classification; a skipped task's result counts as no probe.
    probe = probe if isinstance(probe, dict) and 'classification' in probe else {}
    classification = probe.get('classification', NOT_PROBED)
    error = probe.get('error')
    return {'name': PROBE, 'ok': classification == 'healthy',
            'detail': f'{classification}' + (f' ({error})' if error else '')}


def validation_verdict(evidence: dict, check_mode: bool = False) -> dict:
    """{'checks', 'failed', 'check_mode'} from the evidence dict (health, health_url, logs, sessions, probe)."""
    checks = [
        _health_check(evidence.get('health'), evidence.get('health_url') or ''),
        _logs_check(evidence['logs']),
        _sessions_check(evidence['sessions']),
        _probe_check(evidence.get('probe')),
    ]
    return {'checks': checks, 'failed': [check['name'] for check in checks if not check['ok']],
            'check_mode': bool(check_mode)}
