"""The log-to-alert path end to end on the incident lab: the OpenTelemetry Collector tails the gateway's log with the
shipped configuration (extensions/observability/otelcol/vllm-dr.yaml), Prometheus scrapes it and evaluates the shipped
rules; the incident's alert fires on the failing refreshes and resolves after the runbook.

The rules are the shipped ones with the log alerts' window (5m) and hold (for: 2m) shortened (harness.observability
.quick_rules), so that firing and resolving take seconds. Run by `make observability`, which builds the collector and
Prometheus first (tools/observability/otelcol.sh, prometheus.sh); a cold build here makes the first test wait for it.
"""

from __future__ import annotations

import re
import time

import pytest

from harness.lab_runs import incident_lab, write_inventory
from harness.observability import OTELCOL, PROMETHEUS, RULES, OtelCollector, PrometheusServer, build, quick_rules
from harness.playbooks import playbook

WINDOW, HOLD = '15s', '2s'
LOG_ALERTS = ('VllmTokenRefreshErrors', 'VllmInvalidSessionToken')
SERVICE, INSTANCE = 'vllm-lab', 'lab-gateway'


@pytest.fixture(scope='module')
def built():
    build(OTELCOL, 'components')
    build(PROMETHEUS, '--version')


@pytest.fixture
def broken_lab(tmp_path):
    with incident_lab(tmp_path) as lab:
        yield write_inventory(lab, tmp_path)


def wait_for(condition, timeout: float, what: str, step=None):
    """condition()'s first true answer within timeout seconds; step() runs before each try (traffic, say)."""
    deadline = time.monotonic() + timeout
    answer = None
    while time.monotonic() < deadline:
        if step:
            step()
        answer = condition()
        if answer:
            return answer
        time.sleep(1)
    pytest.fail(f'{what} within {timeout:g} s; last answer: {answer!r}')


def log_alerts(prometheus, state: str) -> dict:
    return {alert['labels']['alertname']: alert for alert in prometheus.alerts()
            if alert['labels']['alertname'] in LOG_ALERTS and alert['state'] == state}


def counter(exposition: str, name: str) -> float | None:
    match = re.search(rf'^{name}\{{[^}}]*\}} (\S+)$', exposition, re.MULTILINE)
    return float(match.group(1)) if match else None


def lines_with(path: str, pattern: str, after: int) -> int:
    with open(path, encoding='utf-8') as handle:
        return sum(pattern in line for line in handle.read().splitlines()[after:])


def test_the_incidents_alert_fires_from_the_gateway_log_and_resolves_after_the_runbook(built, broken_lab, tmp_path):
    lab = broken_lab
    rules = tmp_path / 'vllm-dr.rules.yml'
    with open(RULES, encoding='utf-8') as handle:
        rules.write_text(quick_rules(handle.read(), WINDOW, HOLD))
    with open(lab.log_path, encoding='utf-8') as handle:
        before = len(handle.read().splitlines())

    with OtelCollector(lab.log_path, SERVICE, INSTANCE, workdir=str(tmp_path / 'otelcol')) as collector, \
            PrometheusServer([collector.address], str(rules), workdir=str(tmp_path / 'prometheus')) as prometheus:

        def failing_refreshes():
            # the incident's traffic: clients refresh with the restored sessions' tokens, which the provider revoked
            for sid in lab.state['sessions'][:2]:
                status, _body = lab.refresh(sid)
                assert status == 401, f'session {sid} refreshed with HTTP {status}: is this the incident?'

        def both_firing():
            alerts = log_alerts(prometheus, 'firing')
            return alerts if set(alerts) == set(LOG_ALERTS) else None

        firing = wait_for(both_firing, 45, 'both log alerts firing', step=failing_refreshes)

        alert = firing['VllmTokenRefreshErrors']
        # the service's labels come through the collector (job = service.name); severity and runbook as shipped
        assert alert['labels']['job'] == SERVICE
        assert alert['labels']['severity'] == 'critical'
        assert alert['annotations']['runbook_url'].endswith('#vllmtokenrefresherrors')
        assert 'instance' not in alert['labels']

        # the exported counters add up every incident line the gateway writes: cumulative, not the last batch (what
        # the count connector's deltas give the exporter by themselves). The receiver starts at the file's end on its
        # first read, so lines written before that read are not counted: from a quiet moment on, each new line must be.
        counted = {'vllm_log_token_refresh_error_total': 'TokenRefreshError',
                   'vllm_log_invalid_session_token_total': 'Invalid token in session state'}

        def quiet():
            first = {name: counter(collector.metrics(), name) for name in counted}
            time.sleep(2)
            second = {name: counter(collector.metrics(), name) for name in counted}
            return second if first == second and None not in second.values() else None

        at_rest = wait_for(quiet, 20, 'the counters at rest')
        lines_at_rest = {name: lines_with(lab.log_path, pattern, before) for name, pattern in counted.items()}
        for _round in range(3):
            failing_refreshes()
        for name, pattern in counted.items():
            wait_for(lambda name=name, pattern=pattern: counter(collector.metrics(), name) - at_rest[name] ==
                     lines_with(lab.log_path, pattern, before) - lines_at_rest[name] > 2, 10,
                     f'{name} grown by the log\'s new lines')
        exposed = collector.metrics()
        assert re.search(rf'^vllm_log_token_refresh_error_total\{{.*instance="{INSTANCE}".*\}}', exposed, re.MULTILINE)

        rc, output = playbook(lab.inventory_path, 'dr_restore.yml')
        assert rc == 0, output[-3000:]

        # the runbook's own diagnosis refreshes the stale probe session once more; then the log stays clean, and both
        # alerts leave /api/v1/alerts once those lines are older than the window
        wait_for(lambda: not {alert['labels']['alertname'] for alert in prometheus.alerts()} & set(LOG_ALERTS),
                 60, 'both log alerts resolved')
        status, _body = lab.refresh(lab.state['service_session'])
        assert status == 200
