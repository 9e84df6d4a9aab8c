# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the restored state needs the recovery (purge, sweep, restart), and why: the diagnosis verdict.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import json

from ._refresh_probe import CLIENT_ERRORS

NOT_PROBED = 'not probed'
# A probe that was not made, or that the module skipped, says nothing about the refresh path.
_NO_LIVE_PROBE = (NOT_PROBED, 'skipped')
# A probe whose answer says how the run is set up, not how the service stands, is no evidence either way, and the purge
# refuses before its first change, naming the setting to fix (in the roles' names): see setup_problem().
_TLS_FIX = ("give vllm_dr_http.ca_path the CA bundle that signed the gateway's certificate (vllm_dr_http.client_cert "
            'when it wants a client certificate), or check the host name in vllm_dr_refresh_url')
_CLIENT_FIX = ('the gateway or its identity provider refused the client: check vllm_dr_client_id and the service\'s '
               'client credentials at the identity provider')
_URL_FIX = 'nothing answers a refresh there: check vllm_dr_refresh_url'


def setup_problem(probe) -> str | None:
    """The setting to fix when the probe's answer is about the run's own setup, else None: a TLS handshake that
    failed; a client the provider refused by name (invalid_client, unauthorized_client; a bare 401 may be the
    incident's own answer); a refresh URL that is not one (404, 405). A probe that gave no answer at all (its module
    failed: the probe session swept by an earlier run, an option refused) counts as not probed, as it always did: a
    re-run must still finish the restart an earlier run left undone."""
    probe = probe or {}
    classification = probe.get('classification')
    if classification == 'tls_error':
        return _TLS_FIX
    if classification == 'unauthorized' and probe.get('error') in CLIENT_ERRORS:
        return _CLIENT_FIX
    if classification == 'unexpected' and probe.get('status') in (404, 405):
        return _URL_FIX
    return None


def probe_classification(probe) -> str:
    """The probe's classification, or 'not probed' when no probe ran (its task was skipped or absent)."""
    return (probe or {}).get('classification', NOT_PROBED)


def restart_pending(record) -> dict | None:
    """The restart an earlier run left undone, from its record on the target (the text of restart-pending.json, or of
    the workload's annotation; None when there is none): {'run', 'since'}.

    A run writes the record before its first change and removes it once the service restarted; a run stopped between
    the two (killed, its restart failed) leaves it, and the service still runs with what it loaded before the purge.
    A record that does not parse still says that much: {'run': 'unknown', 'since': 'unknown'}.
    """
    if record is None or not str(record).strip():
        return None
    try:
        parsed = json.loads(record)
    except ValueError:
        parsed = None
    parsed = parsed if isinstance(parsed, dict) else {}
    return {'run': str(parsed.get('run') or 'unknown'), 'since': str(parsed.get('since') or 'unknown')}


def probe_refusal(probe) -> str | None:
    """One line naming why the refresh probe could not judge the refresh path and what to set, when its answer was
    about the run's own setup (setup_problem()); None otherwise."""
    fix = setup_problem(probe)
    if fix is None:
        return None
    # setup_problem() answers only for a probe with a classification
    error = probe.get('error')
    return (f"the refresh probe could not judge the refresh path ({probe['classification']}"
            f"{': ' + str(error) if error else ''}), so nothing is changed: {fix}")


def pending_reason(pending: dict) -> str:
    return (f"run {pending['run']} changed the service at {pending['since']} and did not restart it: it still runs "
            'with what it loaded before the purge')


def recovery_reasons(cache: dict, sessions: dict, probe, logs: dict, select: str, pending=None) -> list:
    """Every reason the restored state needs the recovery, one line each; empty when it needs none.

    `cache` is vllm_token_cache's inspection (the worst copy), `sessions` vllm_session_sweep's report,
    `probe` vllm_refresh_probe's result (None or a skipped result when no probe was made), `logs` the
    log_evidence of the service log since the restore, `select` the sweep's selection rule, `pending` the restart
    an earlier run left undone (restart_pending()).
    """
    reasons = [pending_reason(pending)] if pending else []
    if cache['stale']:
        reasons.append(cache['stale_reason'])
    if cache['exists'] and cache['integrity'] != 'ok':
        reasons.append(f"token cache is damaged: {cache['integrity']}")
    if sessions['matched'] > 0:
        reasons.append(f"{sessions['matched']} sessions to sweep ({select})")
    classification = probe_classification(probe)
    if classification not in ('healthy',) + _NO_LIVE_PROBE and setup_problem(probe) is None:
        reasons.append(f'refresh probe: {classification}')
    # Old error lines describe the past; they decide only when no live probe could be made.
    if classification in _NO_LIVE_PROBE and logs['error_lines'] > 0:
        reasons.append(f"{logs['error_lines']} token error lines in the service log since the restore")
    return reasons


def independent_evidence(cache: dict, sessions: dict, logs: dict, select: str, pending=None) -> list:
    """The reasons for the recovery that the refresh probe did not make itself, one line each.

    What a repair may rest on when the probe says stale_token: a stale or damaged cache, sessions to sweep beyond
    the probe's own (``sessions['watched_matched']`` says whether the probe session is among ``matched``), and
    token error lines in the service log about other sessions (``logs['other_session_lines']``).
    The probe's own answer is never among them: one probe session rejected, or a probe that raced the service's
    own refresh, is not the incident.
    """
    found = [pending_reason(pending)] if pending else []
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
    """{'recovery_needed', 'reasons', 'evidence', 'probe_classification', 'probe_refusal', 'restart_pending'} from
    the evidence dict (cache, sessions, probe, logs, and restart_pending: the record restart_pending() reads, if any):
    ``evidence`` in the answer is independent_evidence(), ``probe_refusal`` probe_refusal() (the purge refuses when it
    is set), ``restart_pending`` the restart an earlier run left undone (or None)."""
    pending = restart_pending(evidence.get('restart_pending'))
    reasons = recovery_reasons(evidence['cache'], evidence['sessions'], evidence.get('probe'), evidence['logs'], select,
                               pending)
    return {'recovery_needed': bool(reasons), 'reasons': reasons,
            'evidence': independent_evidence(evidence['cache'], evidence['sessions'], evidence['logs'], select, pending),
            'probe_classification': probe_classification(evidence.get('probe')),
            'probe_refusal': probe_refusal(evidence.get('probe')), 'restart_pending': pending}
