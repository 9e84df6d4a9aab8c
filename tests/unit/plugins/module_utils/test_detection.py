"""Detection without a restart: the probe decides; a stale answer fails or repairs; anything else cannot tell."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._detection import DetectionError, render, verdict


def diagnosis(classification, needed, reasons=(), evidence=None, **probe):
    """A diagnosis; ``evidence`` (what the probe did not say itself) defaults to the reasons other than the probe's."""
    if evidence is None:
        evidence = [reason for reason in reasons if not reason.startswith('refresh probe:')]
    return {'probe': dict({'classification': classification}, **probe), 'recovery_needed': needed,
            'reasons': list(reasons), 'evidence': list(evidence)}


def test_a_healthy_probe_is_nothing_to_do_and_says_what_else_the_diagnosis_noted():
    assert verdict(diagnosis('healthy', False)) == {'outcome': 'healthy', 'repair': False, 'failed': False,
                                                    'message': 'refresh path healthy: nothing to repair'}
    noted = verdict(diagnosis('healthy', True, ['3 sessions to sweep (expired)']), auto_repair=True)
    assert not noted['repair'] and not noted['failed']
    assert noted['message'].endswith('(the diagnosis notes: 3 sessions to sweep (expired))')


def test_stale_tokens_fail_the_run_unless_the_operator_opted_in_to_the_repair():
    stale = diagnosis('stale_token', True, ['refresh probe: stale_token', '3 sessions to sweep (revoked)'])
    found = verdict(stale)
    assert (found['outcome'], found['repair'], found['failed']) == ('stale', False, True)
    assert 'set vllm_dr_auto_repair=true' in found['message']
    repaired = verdict(stale, auto_repair=True)
    assert (repaired['outcome'], repaired['repair'], repaired['failed']) == ('stale', True, False)


def test_a_stale_probe_without_a_recovery_to_run_is_not_repaired():
    found = verdict(diagnosis('stale_token', False), auto_repair=True)
    assert (found['repair'], found['failed']) == (False, True)
    assert 'sign the probe session in again' in found['message']


def test_the_probes_own_stale_answer_is_no_evidence_for_a_repair():
    """The diagnosis counts the probe's answer among its reasons: that alone never starts the repair."""
    found = verdict(diagnosis('stale_token', True, ['refresh probe: stale_token', '1 sessions to sweep (revoked)'],
                              evidence=[], stale_answers=3), auto_repair=True)
    assert (found['outcome'], found['repair'], found['failed']) == ('stale', False, True)
    assert found['message'].startswith('stale refresh tokens for the probe session only: the provider rejects the '
                                       "probe session's token (3 answers), but nothing independent of the probe agrees")


def test_a_stale_probe_with_independent_evidence_is_repaired_and_names_it():
    found = verdict(diagnosis('stale_token', True, evidence=['2 sessions to sweep beyond the probe\'s own (revoked)'],
                              stale_answers=3), auto_repair=True)
    assert (found['repair'], found['failed']) == (True, False)
    assert "(3 answers) and 2 sessions to sweep beyond the probe's own (revoked); repairing" in found['message']


def test_a_diagnosis_without_an_evidence_list_is_refused_for_a_stale_probe():
    with pytest.raises(DetectionError, match='has no evidence list'):
        verdict({'probe': {'classification': 'stale_token'}, 'recovery_needed': True, 'reasons': []}, auto_repair=True)


def test_a_race_or_a_transient_rejection_that_ends_healthy_says_so():
    raced = verdict(diagnosis('healthy', False, raced=True, stale_answers=1), auto_repair=True)
    assert not raced['repair'] and 'refreshed the probe session while the probe ran' in raced['message']
    transient = verdict(diagnosis('healthy', False, stale_answers=1), auto_repair=True)
    assert not transient['repair'] and 'after 1 transient stale_token answer(s)' in transient['message']


@pytest.mark.parametrize('classification', ['unreachable', 'server_error', 'tls_error', 'unauthorized', 'unexpected',
                                            'not probed'])
def test_any_other_probe_answer_cannot_tell_and_is_not_green(classification):
    found = verdict(diagnosis(classification, True, status=503, error='temporarily_unavailable'), auto_repair=True)
    assert (found['outcome'], found['repair'], found['failed']) == ('inconclusive', False, True)
    assert found['message'].startswith(f'cannot tell: the refresh probe answered {classification} (503, '
                                       'temporarily_unavailable)')


@pytest.mark.parametrize('bad', [None, {}, {'probe': None}, 'stale'])
def test_a_diagnosis_without_a_probe_is_refused(bad):
    with pytest.raises(DetectionError, match='has no refresh probe'):
        verdict(bad)


def test_metrics_name_the_outcome_and_the_time():
    text = render(verdict(diagnosis('stale_token', True)), 1764800000)
    samples = dict(line.split() for line in text.splitlines() if not line.startswith('#'))
    assert samples == {'vllm_dr_detection_stale': '1', 'vllm_dr_detection_inconclusive': '0',
                       'vllm_dr_detection_repair_started': '0',
                       'vllm_dr_detection_last_run_timestamp_seconds': '1764800000'}
    assert text.count('# TYPE ') == 4 and text.endswith('\n')
    healthy = render(verdict(diagnosis('healthy', False)), 1764800000.5)
    assert 'vllm_dr_detection_stale 0\n' in healthy and 'seconds 1764800000.5\n' in healthy


@pytest.mark.parametrize('result, now', [({'outcome': 'maybe'}, 1), (None, 1),
                                         ({'outcome': 'healthy'}, 'soon')])
def test_metrics_refuse_what_is_not_a_verdict_or_a_time(result, now):
    with pytest.raises(DetectionError):
        render(result, now)
