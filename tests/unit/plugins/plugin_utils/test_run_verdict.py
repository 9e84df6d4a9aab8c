"""The run's verdict, decided in one place: passed, failed, not judged (check mode) or stopped, with its reason."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.filter.validation_verdict import FilterModule
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_verdict import run_verdict

verdict_filter = FilterModule().filters()['validation_verdict']

OK = {'name': 'service answers /healthz', 'ok': True, 'detail': 'HTTP 200'}
BAD = {'name': 'refresh probe is healthy', 'ok': False, 'detail': 'invalid_grant (invalid_grant)'}
STOP = {'name': 'the runbook reached validation', 'ok': False, 'detail': "failed at step 'Sweep': cannot reach Redis"}


@pytest.mark.parametrize('validation, outcome, reason, result, counts', [
    ({'checks': [OK, OK], 'check_mode': False}, 'passed', '2 checks passed', 'PASSED', (2, 0)),
    ({'checks': [OK, BAD], 'check_mode': False}, 'failed', 'refresh probe is healthy: invalid_grant (invalid_grant)',
     'FAILED', (2, 1)),
    ({'checks': [], 'check_mode': False}, 'failed', 'no check was made', 'FAILED', (0, 0)),
    ({'checks': [OK, OK], 'check_mode': True}, 'not judged', 'check mode: nothing was changed or judged',
     'check mode, not judged', (2, 0)),
    ({'checks': [OK, BAD], 'check_mode': True}, 'not judged', 'check mode: nothing was changed or judged',
     'check mode, not judged', (2, 1)),
    ({'checks': [STOP], 'check_mode': False, 'stopped': True}, 'stopped',
     "the runbook reached validation: failed at step 'Sweep': cannot reach Redis", 'FAILED, stopped before validation',
     (1, 1)),
    ({'checks': [STOP], 'check_mode': True, 'stopped': True}, 'stopped',
     "the runbook reached validation: failed at step 'Sweep': cannot reach Redis", 'FAILED, stopped before validation',
     (1, 1)),
], ids=['passed', 'failed', 'no-checks', 'check-mode', 'check-mode-failing', 'stopped', 'stopped-in-check-mode'])
def test_every_outcome_of_a_run_with_its_reason(validation, outcome, reason, result, counts):
    assert run_verdict(validation) == {'outcome': outcome, 'passed': outcome == 'passed', 'reason': reason,
                                       'result': result, 'counts': {'checks': counts[0], 'failed': counts[1]}}


PROOFS = {'health': {'status': 200}, 'health_url': 'http://127.0.0.1:8000/healthz',
          'logs': {'error_lines': 0, 'since': None}, 'sessions': {'scanned': 1, 'matched': 0},
          'probe': {'classification': 'healthy'}}


@pytest.mark.parametrize('proofs, options, outcome', [
    (PROOFS, {}, 'passed'),
    (dict(PROOFS, probe=None), {}, 'failed'),
    (PROOFS, {'check_mode': True}, 'not judged'),
    ({}, {'stopped': {'step': 'Sweep', 'reason': 'cannot reach Redis'}}, 'stopped'),
    ({}, {'stopped': {'step': 'Sweep', 'reason': 'cannot reach Redis'}, 'check_mode': True}, 'stopped'),
])
def test_the_filter_returns_the_checks_with_the_verdict(proofs, options, outcome):
    validation = verdict_filter(proofs, **options)
    assert validation['outcome'] == outcome
    assert {key: validation[key] for key in ('outcome', 'passed', 'reason', 'result', 'counts')} == \
        run_verdict(validation)


def test_a_stopped_run_names_its_step_in_its_one_failed_check():
    validation = verdict_filter({}, stopped={'step': 'Sweep', 'reason': ''})
    assert validation['checks'] == [{'name': 'the runbook reached validation', 'ok': False,
                                     'detail': "failed at step 'Sweep': failed"}]
    assert validation['failed'] == ['the runbook reached validation'] and validation['stopped'] is True


@pytest.mark.parametrize('stopped', [{}, {'reason': 'x'}, 'Sweep'])
def test_a_stopped_run_without_its_step_is_refused_in_one_line(stopped):
    with pytest.raises(AnsibleFilterError, match='stopped needs the step that failed'):
        verdict_filter({}, stopped=stopped)
