"""The validation verdict as a node-exporter textfile."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_metrics import (
    MetricsError, check_label, previous_last_success, render)

PASSED = {'checks': [{'name': 'service answers /healthz', 'ok': True, 'detail': 'HTTP 200'},
                     {'name': 'refresh probe is healthy', 'ok': True, 'detail': 'healthy'}], 'failed': []}
FAILED = {'checks': [{'name': 'service answers /healthz', 'ok': True, 'detail': 'HTTP 200'},
                     {'name': 'refresh probe is healthy', 'ok': False, 'detail': 'stale_token'}],
          'failed': ['refresh probe is healthy']}


def samples(text):
    return {line.rsplit(' ', 1)[0]: float(line.rsplit(' ', 1)[1])
            for line in text.splitlines() if line and not line.startswith('#')}


def test_passed_run_reports_success_every_check_and_its_time_as_last_success():
    text = render(PASSED, 1767225600)
    assert samples(text) == {
        'vllm_dr_validation_success': 1,
        'vllm_dr_validation_check_success{check="service_answers_healthz"}': 1,
        'vllm_dr_validation_check_success{check="refresh_probe_is_healthy"}': 1,
        'vllm_dr_validation_last_run_timestamp_seconds': 1767225600,
        'vllm_dr_validation_last_success_timestamp_seconds': 1767225600,
    }
    assert text.endswith('\n') and '# TYPE vllm_dr_validation_success gauge' in text


def test_failed_run_keeps_the_last_success_the_previous_file_recorded():
    before = render(PASSED, 1767225600)
    after = samples(render(FAILED, 1767312000, before))
    assert after['vllm_dr_validation_success'] == 0
    assert after['vllm_dr_validation_check_success{check="refresh_probe_is_healthy"}'] == 0
    assert after['vllm_dr_validation_last_run_timestamp_seconds'] == 1767312000
    assert after['vllm_dr_validation_last_success_timestamp_seconds'] == 1767225600


def test_failed_run_without_an_earlier_success_writes_no_last_success():
    text = render(FAILED, 1767312000, '')
    assert 'vllm_dr_validation_last_success_timestamp_seconds' not in text
    assert samples(text)['vllm_dr_validation_success'] == 0


def test_a_run_with_no_checks_is_not_a_success():
    assert samples(render({'checks': [], 'failed': []}, 10))['vllm_dr_validation_success'] == 0


@pytest.mark.parametrize('text', ['', 'garbage', 'vllm_dr_validation_last_success_timestamp_seconds NaN',
                                  'vllm_dr_validation_last_success_timestamp_seconds x',
                                  'vllm_dr_validation_last_success_timestamp_seconds -5'])
def test_previous_file_without_a_usable_last_success_gives_none(text):
    assert previous_last_success(text) is None


def test_fractional_times_are_kept():
    assert samples(render(PASSED, 1767225600.25))['vllm_dr_validation_last_run_timestamp_seconds'] == 1767225600.25


def test_check_label_keeps_letters_and_digits_only():
    assert check_label('no token error lines since the restart (or this run)') == \
        'no_token_error_lines_since_the_restart_or_this_run'


@pytest.mark.parametrize('validation, message', [
    (None, 'no list of checks'),
    ({'checks': [{'ok': True}]}, 'needs a name and an ok'),
    ({'checks': [{'name': 'a b', 'ok': True}, {'name': 'a-b', 'ok': False}]}, 'same name once written as a label'),
])
def test_malformed_validation_is_refused_with_what_to_pass(validation, message):
    with pytest.raises(MetricsError, match=message):
        render(validation, 1)


def test_run_time_must_be_a_number():
    with pytest.raises(MetricsError, match='Unix seconds'):
        render(PASSED, 'yesterday')
