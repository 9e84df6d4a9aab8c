"""The runbook against a gateway served over TLS by a private CA: vllm_dr_http's keys reach the diagnosis's probe, the
validation's health check and its probe. With ca_path (or validate_certs false) the run recovers; with neither, the
probe's tls_error is no reason for the recovery, and the run stops naming vllm_dr_http.ca_path before the first
change; a key the runbook does not know is refused before the run starts."""

from __future__ import annotations

import json

import pytest

from harness.lab_runs import incident_lab, run_with
from harness.reports import report_path


@pytest.fixture
def tls_lab(tmp_path):
    """The lab after the incident, its gateway (the refresh and health endpoints) on https with a private CA."""
    with incident_lab(tmp_path, tls=True) as lab:
        yield lab


def run(lab, tmp_path, http: dict, *extra) -> tuple:
    return run_with(lab, tmp_path, {'vllm_dr_http': http}, *extra)


def result(tmp_path, output: str) -> dict:
    path = report_path(tmp_path / 'reports', 'lab.json')
    assert path.exists(), output[-4000:]
    return json.loads(path.read_text())


@pytest.mark.parametrize('http', ['ca_path', 'validate_certs'])
def test_the_runbook_recovers_through_a_private_ca_or_without_checking_it(tls_lab, tmp_path, http):
    options = {'ca_path': tls_lab.state['tls_files']['ca']} if http == 'ca_path' else {'validate_certs': False}
    rc, output = run(tls_lab, tmp_path, dict(options, retries=2))
    assert rc == 0, output[-4000:]
    report = result(tmp_path, output)
    assert report['diagnosis']['probe']['classification'] == 'stale_token', report['diagnosis']['probe']
    assert report['passed'] is True, report['validation']


def test_without_the_ca_the_run_names_the_setting_before_anything_is_changed(tls_lab, tmp_path):
    with open(tls_lab.cache_path, 'rb') as handle:
        cache = handle.read()
    rc, output = run(tls_lab, tmp_path, {})
    assert rc != 0
    report = result(tmp_path, output)
    # the probe's answer was about the run's setup, not the service: no reason for the recovery, and the purge refused
    assert report['diagnosis']['probe']['classification'] == 'tls_error', report['diagnosis']['probe']
    refusal = report['diagnosis']['probe_refusal']
    assert refusal.startswith('the refresh probe could not judge the refresh path (tls_error') and \
        'give vllm_dr_http.ca_path' in refusal, refusal
    assert report['outcome'] == 'stopped' and refusal in report['reason'], report['reason']
    assert 'refresh probe: tls_error' not in report['diagnosis']['reasons']
    with open(tls_lab.cache_path, 'rb') as handle:
        assert handle.read() == cache, 'the token cache was left as it was'
    assert report['purge'].get('not_run') or not report['purge'].get('cache_removed'), report['purge']
    assert 'Traceback' not in output


def test_a_key_the_runbook_does_not_know_is_refused_before_the_run_starts(tls_lab, tmp_path):
    rc, output = run(tls_lab, tmp_path, {'cacert': tls_lab.state['tls_files']['ca']}, '--check')
    assert rc != 0
    report = result(tmp_path, output)
    assert report['outcome'] == 'stopped' and report['diagnosis'] == {}, report
    assert 'vllm_dr_http.cacert' in report['reason'] and 'ca_path' in report['reason'], report['reason']
