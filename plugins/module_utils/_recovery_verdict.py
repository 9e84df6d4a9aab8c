# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the restored state needs the recovery (purge, sweep, restart), and why: the diagnosis verdict.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

NOT_PROBED = 'not probed'
# A probe that was not made, or that the module skipped, says nothing about the refresh path.
_NO_LIVE_PROBE = (NOT_PROBED, 'skipped')


def probe_classification(probe) -> str:
    """The probe's classification, or 'not probed' when no probe ran (its task was skipped or absent)."""
    return (probe or {}).get('classification', NOT_PROBED)


def recovery_reasons(cache: dict, sessions: dict, probe, logs: dict, select: str) -> list:
    """Every reason the restored state needs the recovery, one line each; empty when it needs none.

    `cache` is vllm_token_cache's inspection (the worst copy), `sessions` vllm_session_sweep's report,
    `probe` vllm_refresh_probe's result (None or a skipped result when no probe was made), `logs` the
    log_evidence of the service log since the restore, `select` the sweep's selection rule.
    """
    reasons = []
    if cache['stale']:
        reasons.append(cache['stale_reason'])
    if cache['exists'] and cache['integrity'] != 'ok':
        reasons.append(f"token cache is damaged: {cache['integrity']}")
    if sessions['matched'] > 0:
        reasons.append(f"{sessions['matched']} sessions to sweep ({select})")
    classification = probe_classification(probe)
    if classification not in ('healthy',) + _NO_LIVE_PROBE:
        reasons.append(f'refresh probe: {classification}')
    # Old error lines describe the past; they decide only when no live probe could be made.
    if classification in _NO_LIVE_PROBE and logs['error_lines'] > 0:
        reasons.append(f"{logs['error_lines']} token error lines in the service log since the restore")
    return reasons


def independent_evidence(cache: dict, sessions: dict, logs: dict, select: str) -> list:
    """The reasons for the recovery that the refresh probe did not make itself, one line each.

    What a repair may rest on when the probe says stale_token: a stale or damaged cache, sessions to sweep beyond
    the probe's own (``sessions['watched_matched']`` says whether the probe session is among ``matched``), and
    token error lines in the service log about other sessions (``logs['other_session_lines']``).
    The probe's own answer is never among them: one probe session rejected, or a probe that raced the service's
    own refresh, is not the incident.
    """
    found = []
    if cache['stale']:
        found.append(cache['stale_reason'])
    if cache['exists'] and cache['integrity'] != 'ok':
        found.append(f"token cache is damaged: {cache['integrity']}")
    others = sessions['matched'] - (1 if sessions.get('watched_matched') else 0)
    if others > 0:
        found.append(f"{others} sessions to sweep beyond the probe's own ({select})")
    lines = logs.get('other_session_lines') or 0
    if lines > 0:
        found.append(f'{lines} token error lines in the service log about sessions other than the probe\'s')
    return found


def recovery_verdict(evidence: dict, select: str) -> dict:
    """{'recovery_needed', 'reasons', 'evidence', 'probe_classification'} from the evidence dict (cache, sessions,
    probe, logs): ``evidence`` is independent_evidence()."""
    reasons = recovery_reasons(evidence['cache'], evidence['sessions'], evidence.get('probe'), evidence['logs'], select)
    return {'recovery_needed': bool(reasons), 'reasons': reasons,
            'evidence': independent_evidence(evidence['cache'], evidence['sessions'], evidence['logs'], select),
            'probe_classification': probe_classification(evidence.get('probe'))}
