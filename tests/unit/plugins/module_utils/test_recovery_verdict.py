"""The diagnosis verdict: each piece of evidence that calls for the recovery, and the log lines a live probe overrules."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.filter.recovery_verdict import FilterModule
from ansible_collections.inferops.vllm_dr.plugins.module_utils._recovery_verdict import recovery_verdict

verdict_filter = FilterModule().filters()['recovery_verdict']

CLEAN_CACHE = {'stale': False, 'stale_reason': '', 'exists': True, 'integrity': 'ok'}
HEALTHY_PROBE = {'classification': 'healthy', 'status': 200}
SKIPPED_TASK = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}


def evidence(cache=None, matched=0, probe='healthy', error_lines=0):
    probe = HEALTHY_PROBE if probe == 'healthy' else probe
    return {'cache': dict(CLEAN_CACHE, **(cache or {})), 'sessions': {'matched': matched, 'scanned': 10},
            'probe': probe, 'logs': {'error_lines': error_lines}}


def test_recovery_is_not_needed_when_every_piece_of_evidence_is_clean():
    assert recovery_verdict(evidence(), 'expired') == {'recovery_needed': False, 'reasons': [], 'evidence': [],
                                                       'probe_classification': 'healthy', 'probe_refusal': None,
                                                       'restart_pending': None}


def test_a_stale_cache_needs_the_recovery_with_its_own_reason():
    result = recovery_verdict(evidence(cache={'stale': True, 'stale_reason': 'cache older than the restore'}), 'expired')
    assert result['recovery_needed'] and result['reasons'] == ['cache older than the restore']


def test_a_damaged_cache_needs_the_recovery():
    result = recovery_verdict(evidence(cache={'integrity': 'malformed'}), 'expired')
    assert result['reasons'] == ['token cache is damaged: malformed']


def test_a_missing_cache_is_not_damaged():
    assert recovery_verdict(evidence(cache={'exists': False, 'integrity': 'missing'}), 'expired')['reasons'] == []


def test_sessions_to_sweep_are_counted_with_the_selection_rule():
    assert recovery_verdict(evidence(matched=3), 'restored')['reasons'] == ['3 sessions to sweep (restored)']


@pytest.mark.parametrize('classification', ['invalid_grant', 'unreachable', 'server_error'])
def test_a_probe_that_is_not_healthy_needs_the_recovery(classification):
    result = recovery_verdict(evidence(probe={'classification': classification}), 'expired')
    assert result['reasons'] == [f'refresh probe: {classification}']
    assert result['probe_classification'] == classification


def test_a_healthy_probe_overrules_old_error_lines():
    assert recovery_verdict(evidence(error_lines=5), 'expired')['recovery_needed'] is False


@pytest.mark.parametrize('probe, classification', [
    (None, 'not probed'), (SKIPPED_TASK, 'not probed'), ({'classification': 'skipped'}, 'skipped')])
def test_error_lines_decide_when_no_live_probe_was_made(probe, classification):
    result = recovery_verdict(evidence(probe=probe, error_lines=4), 'expired')
    assert result['reasons'] == ['4 token error lines in the service log since the restore']
    assert result['probe_classification'] == classification


@pytest.mark.parametrize('probe', [None, SKIPPED_TASK])
def test_no_probe_and_no_error_lines_need_nothing(probe):
    assert recovery_verdict(evidence(probe=probe), 'expired')['recovery_needed'] is False


def test_every_reason_is_listed_in_order():
    result = recovery_verdict(evidence(cache={'stale': True, 'stale_reason': 'stale', 'integrity': 'torn'}, matched=2,
                                       probe={'classification': 'invalid_grant'}, error_lines=9), 'expired')
    assert result['reasons'] == ['stale', 'token cache is damaged: torn', '2 sessions to sweep (expired)',
                                 'refresh probe: invalid_grant']


def test_the_filter_names_missing_evidence_in_one_line():
    with pytest.raises(AnsibleFilterError, match="lacks or mistypes 'logs'"):
        verdict_filter({'cache': CLEAN_CACHE, 'sessions': {'matched': 0}, 'probe': None}, 'expired')


def test_evidence_leaves_out_the_probe_and_its_own_session():
    """What a repair may rest on: never the probe's answer, nor the probe session among the sessions to sweep."""
    own = dict(evidence(matched=1, probe={'classification': 'stale_token'}), sessions={'matched': 1, 'watched_matched': True})
    result = recovery_verdict(own, 'revoked')
    assert result['recovery_needed'] and result['evidence'] == []
    more = dict(own, sessions={'matched': 3, 'watched_matched': True})
    assert recovery_verdict(more, 'revoked')['evidence'] == ["2 sessions to sweep beyond the probe's own (revoked)"]


def test_evidence_counts_a_stale_cache_and_error_lines_about_other_sessions():
    found = evidence(cache={'stale': True, 'stale_reason': 'cache older than the restore'}, error_lines=7)
    found['logs']['other_session_lines'] = 4
    assert recovery_verdict(found, 'expired')['evidence'] == [
        'cache older than the restore', "4 token error lines in the service log about sessions other than the probe's"]


def test_a_restart_an_earlier_run_left_undone_needs_the_recovery_and_counts_as_independent_evidence():
    record = '{"run": "20261206T010000Z-lab-0123abcd", "since": "2026-12-06T01:00:02Z"}'
    result = recovery_verdict(dict(evidence(), restart_pending=record), 'expired')
    line = ('run 20261206T010000Z-lab-0123abcd changed the service at 2026-12-06T01:00:02Z and did not restart it: '
            'it still runs with what it loaded before the purge')
    assert result['recovery_needed'] and result['reasons'] == [line] and result['evidence'] == [line]
    assert result['restart_pending'] == {'run': '20261206T010000Z-lab-0123abcd', 'since': '2026-12-06T01:00:02Z'}


@pytest.mark.parametrize('record', ['{"run": "20261206T0', 'null', '[1, 2]', '{}'])
def test_a_damaged_restart_record_still_needs_the_restart(record):
    result = recovery_verdict(dict(evidence(), restart_pending=record), 'expired')
    assert result['restart_pending'] == {'run': 'unknown', 'since': 'unknown'} and result['recovery_needed']


@pytest.mark.parametrize('record', [None, '', ' \n'])
def test_no_restart_record_needs_nothing(record):
    result = recovery_verdict(dict(evidence(), restart_pending=record), 'expired')
    assert result['restart_pending'] is None and not result['recovery_needed']


@pytest.mark.parametrize('probe, setting', [
    ({'classification': 'tls_error', 'error': 'CERTIFICATE_VERIFY_FAILED'}, 'vllm_dr_http.ca_path'),
    ({'classification': 'unauthorized', 'error': 'invalid_client', 'status': 401}, 'vllm_dr_client_id'),
    ({'classification': 'unauthorized', 'error': 'unauthorized_client', 'status': 400}, 'vllm_dr_client_id'),
    ({'classification': 'unexpected', 'error': 'HTTP 404', 'status': 404}, 'vllm_dr_refresh_url')])
def test_a_probe_refused_for_the_runs_own_setup_is_no_reason_and_names_the_setting(probe, setting):
    result = recovery_verdict(evidence(probe=probe), 'expired')
    assert result['recovery_needed'] is False and result['reasons'] == []
    assert result['probe_refusal'].startswith(
        f"the refresh probe could not judge the refresh path ({probe['classification']}: {probe['error']}), so "
        'nothing is changed: ')
    assert setting in result['probe_refusal'] and '\n' not in result['probe_refusal']


@pytest.mark.parametrize('probe', [
    None, SKIPPED_TASK, {'classification': 'healthy'}, {'classification': 'stale_token'},
    {'classification': 'unreachable'}, {'classification': 'skipped'},
    # a bare 401 or an RFC 6750 invalid_token may be the incident's own answer to a stale token
    {'classification': 'unauthorized', 'error': 'HTTP 401', 'status': 401},
    {'classification': 'unauthorized', 'error': 'invalid_token', 'status': 401},
    # a gateway that answers 200 without a token, or a token with an unusable expiry, is the service's own state
    {'classification': 'unexpected', 'error': 'no token in the response', 'status': 200},
    # a probe whose module failed gave no answer: not probed, so that a re-run after a sweep that took the probe's
    # session still finishes the restart an earlier run left undone
    {'changed': False, 'failed': False, 'msg': 'session svc does not exist; give the id of a session'}])
def test_every_other_probe_leaves_no_refusal(probe):
    assert recovery_verdict(evidence(probe=probe), 'expired')['probe_refusal'] is None


@pytest.mark.parametrize('classification', ['unauthorized', 'unexpected'])
def test_an_unauthorized_or_unexpected_answer_about_the_service_still_needs_the_recovery(classification):
    result = recovery_verdict(evidence(probe={'classification': classification, 'error': 'HTTP 401', 'status': 401}),
                              'expired')
    assert result['reasons'] == [f'refresh probe: {classification}'] and result['probe_refusal'] is None
