"""The validation verdict: four checks, each passing or failing with a detail line."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.filter.validation_verdict import FilterModule
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_verdict import validation_verdict

verdict_filter = FilterModule().filters()['validation_verdict']

URL = 'http://127.0.0.1:8000/healthz'
SKIPPED_TASK = {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'}


def proofs(**changes):
    base = {'health': {'status': 200}, 'health_url': URL,
            'logs': {'error_lines': 0, 'since': '2024-07-15T03:00:00Z'},
            'sessions': {'scanned': 4, 'matched': 0, 'earliest_expiry': '2024-07-15T04:00:00Z'},
            'probe': {'classification': 'healthy', 'error': None}}
    base.update(changes)
    return base


def check(result, name):
    return next(item for item in result['checks'] if item['name'] == name)


def test_a_recovered_service_passes_every_check():
    result = validation_verdict(proofs(), check_mode=False)
    assert result == {'check_mode': False, 'failed': [], 'checks': [
        {'name': 'service answers /healthz', 'ok': True, 'detail': 'HTTP 200'},
        {'name': 'no token error lines since the restart (or this run)', 'ok': True,
         'detail': '0 error lines since 2024-07-15T03:00:00Z'},
        {'name': 'every session expires in the future', 'ok': True,
         'detail': '4 sessions, 0 expired, earliest expiry 2024-07-15T04:00:00Z'},
        {'name': 'refresh probe is healthy', 'ok': True, 'detail': 'healthy'}]}


def test_check_mode_is_recorded():
    assert validation_verdict(proofs(), check_mode=True)['check_mode'] is True


@pytest.mark.parametrize('health, detail', [({'status': 503}, 'HTTP 503'), ({'status': -1}, 'HTTP -1'),
                                            ({'failed': True}, 'HTTP no answer')])
def test_a_health_endpoint_that_does_not_answer_200_fails(health, detail):
    result = validation_verdict(proofs(health=health))
    assert result['failed'] == ['service answers /healthz']
    assert check(result, 'service answers /healthz')['detail'] == detail


def test_no_health_url_fails_the_health_check_and_says_why():
    result = validation_verdict(proofs(health=SKIPPED_TASK, health_url=''))
    assert check(result, 'service answers /healthz') == {'name': 'service answers /healthz', 'ok': False,
                                                         'detail': 'no health_url'}


def test_error_lines_since_the_restart_fail_and_an_unknown_start_is_named():
    result = validation_verdict(proofs(logs={'error_lines': 2, 'since': None}))
    assert result['failed'] == ['no token error lines since the restart (or this run)']
    assert check(result, result['failed'][0])['detail'] == '2 error lines since the start'


def test_an_expired_session_fails_and_no_expiry_reads_none():
    result = validation_verdict(proofs(sessions={'scanned': 0, 'matched': 1, 'earliest_expiry': None}))
    assert result['failed'] == ['every session expires in the future']
    assert check(result, result['failed'][0])['detail'] == '0 sessions, 1 expired, earliest expiry none'


def test_an_unhealthy_probe_fails_with_its_error():
    result = validation_verdict(proofs(probe={'classification': 'invalid_grant', 'error': 'invalid_grant'}))
    assert result['failed'] == ['refresh probe is healthy']
    assert check(result, result['failed'][0])['detail'] == 'invalid_grant (invalid_grant)'


@pytest.mark.parametrize('probe', [SKIPPED_TASK, None, {'msg': 'module failed'}])
def test_no_probe_fails_the_probe_check_as_not_probed(probe):
    result = validation_verdict(proofs(probe=probe))
    assert check(result, 'refresh probe is healthy') == {'name': 'refresh probe is healthy', 'ok': False,
                                                         'detail': 'not probed'}


def test_failed_lists_every_failing_check_in_order():
    result = validation_verdict(proofs(health={'status': 500}, sessions={'scanned': 1, 'matched': 1},
                                       probe=SKIPPED_TASK))
    assert result['failed'] == ['service answers /healthz', 'every session expires in the future',
                                'refresh probe is healthy']


def test_the_filter_names_missing_proofs_in_one_line():
    with pytest.raises(AnsibleFilterError, match="lack or mistype 'sessions'"):
        verdict_filter({'health': {'status': 200}, 'health_url': URL, 'logs': {'error_lines': 0}})
