# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Detection without a restart: what a scheduled, diagnose-only run concludes from the diagnosis, and its metrics.

The refresh probe decides. ``healthy``: the refresh path works, nothing to do (exit 0). ``stale_token``: stale
tokens (exit non-zero). The repair (when the operator opted in) rests only on evidence independent of the probe
(the diagnosis's ``evidence``: a stale or damaged cache, sessions revoked beyond the probe's own, token error lines
from the service about other sessions): the probe's own rejection, repeated, is one session, not
the incident, and restarting a service that serves every other session would damage it. The probe has already
asked again with backoff (a single transient invalid_grant passes) and presented the session's new token when the
service refreshed it meanwhile (a race). Any other probe answer (unreachable, a server error, a TLS failure, ...)
cannot tell either way and is not green: the scheduled job fails with the probe's own words.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

HEALTHY, STALE, INCONCLUSIVE = 'healthy', 'stale', 'inconclusive'

STALE_METRIC = 'vllm_dr_detection_stale'
INCONCLUSIVE_METRIC = 'vllm_dr_detection_inconclusive'
REPAIR_METRIC = 'vllm_dr_detection_repair_started'
LAST_RUN = 'vllm_dr_detection_last_run_timestamp_seconds'

HELP = {
    STALE_METRIC: '1 when the last detection run found stale refresh tokens (the probe answered stale_token).',
    INCONCLUSIVE_METRIC: '1 when the last detection run could not tell (the refresh probe gave no usable answer).',
    REPAIR_METRIC: '1 when the last detection run started the repair (vllm_dr_auto_repair), 0 otherwise.',
    LAST_RUN: 'Unix time the last detection run ended its diagnosis.',
}


class DetectionError(ValueError):
    """The diagnosis cannot be judged."""


def verdict(diagnosis, auto_repair=False) -> dict:
    """{'outcome', 'repair', 'failed', 'message'} for the diagnosis the restore role published."""
    if not isinstance(diagnosis, dict) or not isinstance(diagnosis.get('probe'), dict):
        raise DetectionError('the diagnosis has no refresh probe; pass vllm_dr_diagnosis as the restore role set it')
    probe = diagnosis['probe']
    classification = probe.get('classification')
    needed = bool(diagnosis.get('recovery_needed'))
    reasons = '; '.join(diagnosis.get('reasons') or []) or 'none'
    if classification == 'healthy':
        note = f' (the diagnosis notes: {reasons})' if needed else ''
        if probe.get('raced'):
            note += ' (the service refreshed the probe session while the probe ran; its new token works)'
        elif probe.get('stale_answers'):
            note += f' (after {probe["stale_answers"]} transient stale_token answer(s), asked again)'
        return {'outcome': HEALTHY, 'repair': False, 'failed': False,
                'message': f'refresh path healthy: nothing to repair{note}'}
    if classification == 'stale_token':
        evidence = diagnosis.get('evidence')
        if not isinstance(evidence, list):
            raise DetectionError('the diagnosis has no evidence list; pass vllm_dr_diagnosis as the restore role of '
                                 'this collection sets it')
        answers = probe.get('stale_answers') or 1
        rejected = f'the provider rejects the probe session\'s token ({answers} answer{"s" if answers > 1 else ""})'
        if not evidence:
            return {'outcome': STALE, 'repair': False, 'failed': True,
                    'message': f'stale refresh tokens for the probe session only: {rejected}, but nothing independent of '
                               'the probe agrees (the cache is current, no session beyond the probe\'s own is revoked, '
                               'no token error lines from the service); not repairing: sign the probe session in again '
                               '(vllm_dr_probe_session), or run playbooks/dr_restore.yml if the service fails'}
        repair = bool(auto_repair)
        if repair:
            action = 'repairing (vllm_dr_auto_repair): purge, restart, validate'
        else:
            action = 'run playbooks/dr_restore.yml, or set vllm_dr_auto_repair=true to let this job repair it'
        return {'outcome': STALE, 'repair': repair, 'failed': not repair,
                'message': f'stale refresh tokens: {rejected} and {"; ".join(evidence)}; {action}'}
    detail = ', '.join(str(part) for part in (probe.get('status'), probe.get('error'), probe.get('error_description'))
                       if part not in (None, ''))
    return {'outcome': INCONCLUSIVE, 'repair': False, 'failed': True,
            'message': f'cannot tell: the refresh probe answered {classification}'
                       + (f' ({detail})' if detail else '') + '; check vllm_dr_refresh_url and the service'}


def _number(value) -> str:
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


def render(result, now) -> str:
    """The node-exporter textfile of one detection run (``result`` as verdict() returns it, ``now`` Unix seconds)."""
    if not isinstance(result, dict) or result.get('outcome') not in (HEALTHY, STALE, INCONCLUSIVE):
        raise DetectionError('pass the detection verdict as the detection_verdict filter returns it')
    try:
        now = float(now)
    except (TypeError, ValueError) as exc:
        raise DetectionError('the run time must be Unix seconds, got %r' % (now,)) from exc
    samples = ((STALE_METRIC, int(result['outcome'] == STALE)),
               (INCONCLUSIVE_METRIC, int(result['outcome'] == INCONCLUSIVE)),
               (REPAIR_METRIC, int(bool(result.get('repair')))),
               (LAST_RUN, now))
    lines = []
    for name, value in samples:
        lines += ['# HELP %s %s' % (name, HELP[name]), '# TYPE %s gauge' % name, '%s %s' % (name, _number(value))]
    return '\n'.join(lines) + '\n'
