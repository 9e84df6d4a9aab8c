# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the recovery worked: one check per proof, and the run's verdict, the one place it is decided.

The verdict of a run is one of passed, failed, not judged (a dry run) or stopped (a step failed before the
validation), with its reason. The reports, the summary, set_stats, the metrics and the fleet report print it.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._recovery_verdict import NOT_PROBED

HEALTH = 'service answers /healthz'
LOGS = 'no token error lines since the restart (or this run)'
SESSIONS = 'every session expires in the future'
PROBE = 'refresh probe is healthy'
REACHED = 'the runbook reached validation'

PASSED = 'passed'
FAILED = 'failed'
NOT_JUDGED = 'not judged'  # a dry run (--check) changes nothing, so there is nothing to judge
STOPPED = 'stopped'  # a step failed before the validation
OUTCOMES = (PASSED, FAILED, NOT_JUDGED, STOPPED)
# what a report's title, the summary's last line and the Markdown report print for each outcome
RESULTS = {PASSED: 'PASSED', FAILED: 'FAILED', NOT_JUDGED: 'check mode, not judged',
           STOPPED: 'FAILED, stopped before validation'}


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


def _failed_reason(checks: list) -> str:
    details = [f"{check.get('name')}: {check.get('detail')}" for check in checks if not check.get('ok')]
    return '; '.join(details) or 'validation failed'


def run_verdict(validation: dict) -> dict:
    """The verdict of a run from its validation (`checks`, `check_mode`, `stopped`): the one place it is decided.

    `outcome` is one of OUTCOMES: stopped when a step failed before the validation (also in check mode), not judged
    in check mode, failed when a check failed or none was made, passed otherwise. `passed` is true for passed
    only; `reason` says why in one line; `result` is what the reports print; `counts` the checks made and failed.
    """
    checks = list(validation.get('checks') or [])
    failing = [check for check in checks if not check.get('ok')]
    if validation.get('stopped'):
        outcome, reason = STOPPED, _failed_reason(checks)
    elif validation.get('check_mode'):
        outcome, reason = NOT_JUDGED, 'check mode: nothing was changed or judged'
    elif failing or not checks:
        outcome, reason = FAILED, _failed_reason(checks) if checks else 'no check was made'
    else:
        outcome, reason = PASSED, f'{len(checks)} checks passed'
    return {'outcome': outcome, 'passed': outcome == PASSED, 'reason': reason, 'result': RESULTS[outcome],
            'counts': {'checks': len(checks), 'failed': len(failing)}}


def stopped_validation(step: str, reason: str, check_mode: bool = False) -> dict:
    """The validation of a run that stopped at `step` before the validation: one failed check that names the step."""
    return {'checks': [{'name': REACHED, 'ok': False, 'detail': f"failed at step '{step}': {reason}"}],
            'failed': [REACHED], 'check_mode': bool(check_mode), 'stopped': True}


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
