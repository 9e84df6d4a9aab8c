"""The logs of many pods in one call: read side by side, counted per pod and over all, a pod gone named."""

from __future__ import annotations

import json
import socket
import threading

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.inferops.vllm_dr.plugins.filter.log_evidence import log_evidence
from ansible_collections.inferops.vllm_dr.plugins.module_utils._log_evidence import INCIDENT_PATTERNS, merge, scan
from ansible_collections.inferops.vllm_dr.plugins.module_utils._pod_logs import (
    PodGone,
    PodLogError,
    api_error,
    api_reader,
    read_logs,
)
from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_pod_logs
from harness.modules import run_module

SINCE = 1721012400.0  # 2024-07-15T03:00:00Z

POD_A = ('2024-07-15T02:59:00Z INFO started\n'
         '2024-07-15T03:01:00Z ERROR TokenRefreshError: refresh_token=SECRET-A invalid_grant\n'
         'Traceback line without a timestamp\n'
         '2024-07-15T03:05:00Z ERROR Invalid token in session state\n')
POD_B = ('continued line at the top of the log\n'
         '2024-07-15T03:02:00Z ERROR TokenRefreshError: Failed to refresh token\n'
         '2024-07-15T03:09:00Z ERROR TokenRefreshError again\n')


def reader(logs: dict):
    def read(name):
        if name not in logs:
            raise PodGone(name)
        return logs[name]
    return read


def test_evidence_over_pods_adds_counts_and_spans_first_and_last_seen():
    result = read_logs(reader({'a': POD_A, 'b': POD_B}), ['a', 'b'], since=SINCE)
    evidence = result['evidence']
    assert evidence['since'] == '2024-07-15T03:00:00Z'
    assert evidence['error_lines'] == 5
    assert evidence['patterns']['TokenRefreshError'] == {
        'count': 3, 'first_seen': '2024-07-15T03:01:00Z', 'last_seen': '2024-07-15T03:09:00Z'}
    assert evidence['patterns']['Failed to refresh token']['count'] == 1
    assert evidence['patterns']['Invalid token in session state']['last_seen'] == '2024-07-15T03:05:00Z'
    # a's line before the restore is not scanned; b's undated first line is not dated by a's last line
    assert evidence['lines_scanned'] == 3 + 2
    assert result['pods'] == [
        {'name': 'a', 'state': 'read', 'lines': 4, 'lines_scanned': 3, 'error_lines': 2},
        {'name': 'b', 'state': 'read', 'lines': 3, 'lines_scanned': 2, 'error_lines': 3}]
    assert result['gone'] == []


def test_one_pod_counts_as_the_log_evidence_filter_counts_its_log():
    result = read_logs(reader({'a': POD_A}), ['a'], since=SINCE)
    assert result['evidence'] == log_evidence(POD_A, since='2024-07-15T03:00:00Z')


def test_patterns_given_replace_the_incident_ones():
    result = read_logs(reader({'a': POD_A, 'b': POD_B}), ['a', 'b'], patterns=('invalid_grant',))
    assert list(result['evidence']['patterns']) == ['invalid_grant']
    assert result['evidence']['error_lines'] == 1 and result['evidence']['since'] is None


def test_a_pod_deleted_before_the_read_is_named_and_the_others_still_count():
    result = read_logs(reader({'a': POD_A, 'c': POD_A}), ['a', 'b', 'c'], since=SINCE)
    assert result['gone'] == ['b']
    assert result['pods'][1] == {'name': 'b', 'state': 'gone', 'lines': 0, 'lines_scanned': 0, 'error_lines': 0}
    assert result['evidence']['error_lines'] == 4


def test_a_pod_named_twice_is_read_once():
    calls = []
    logs = {'a': POD_A}

    def read(name):
        calls.append(name)
        return logs[name]
    result = read_logs(read, ['a', 'a'])
    assert calls == ['a'] and [pod['name'] for pod in result['pods']] == ['a']


def test_no_pods_gives_empty_evidence():
    result = read_logs(reader({}), [], since=SINCE)
    assert result == {'evidence': merge([], SINCE, INCIDENT_PATTERNS), 'pods': [], 'gone': []}
    assert result['evidence']['error_lines'] == 0 and result['evidence']['lines_scanned'] == 0


def test_the_log_text_never_reaches_the_result():
    result = read_logs(reader({'a': POD_A, 'b': POD_B}), ['a', 'b'])
    assert 'SECRET' not in json.dumps(result)


def test_logs_are_read_side_by_side_and_never_more_than_workers_at_once():
    workers = 4
    # every read waits until `workers` reads are under way together: one at a time would never get past it
    barrier = threading.Barrier(workers, timeout=10)
    lock = threading.Lock()
    running = {'now': 0, 'most': 0}

    def read(name):
        with lock:
            running['now'] += 1
            running['most'] = max(running['most'], running['now'])
        barrier.wait()
        with lock:
            running['now'] -= 1
        return POD_A
    result = read_logs(read, [f'pod-{index}' for index in range(12)], workers=workers)
    assert running['most'] == workers
    assert len(result['pods']) == 12 and result['evidence']['error_lines'] == 12 * 2


def test_a_refused_read_raises_after_every_read_ended():
    done = []

    def read(name):
        if name == 'b':
            raise PodLogError('refused')
        done.append(name)
        return POD_A
    with pytest.raises(PodLogError, match='refused'):
        read_logs(read, ['a', 'b', 'c', 'd'], workers=2)
    assert sorted(done) == ['a', 'c', 'd']


def api_exception(status, reason, message=None):
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({'kind': 'Status', 'message': message}) if message else None
    return exc


def test_api_404_means_the_pod_is_gone():
    assert isinstance(api_error(api_exception(404, 'Not Found', 'pods "a" not found'), 'ns', 'a'), PodGone)


def test_api_403_names_the_pod_and_the_permission_to_grant():
    error = api_error(api_exception(403, 'Forbidden', 'pods "a" is forbidden: cannot get resource "pods/log"'),
                      'ns', 'a')
    assert isinstance(error, PodLogError)
    assert str(error) == ('reading the log of pod a in namespace ns failed: 403 pods "a" is forbidden: cannot get '
                          'resource "pods/log"; grant get on pods/log in the namespace (roles/restore/files/rbac.yml)')


def test_api_error_without_a_status_body_gives_the_reason():
    error = api_error(api_exception(500, 'Internal Server Error'), 'ns', 'a')
    assert str(error) == ('reading the log of pod a in namespace ns failed: 500 Internal Server Error; '
                          'check the API server')


@pytest.fixture
def silent_server():
    """A port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(('127.0.0.1', 0))
        server.listen(8)
        yield f'http://127.0.0.1:{server.getsockname()[1]}'


def test_api_reader_names_the_pod_when_the_api_server_does_not_answer(silent_server):
    configuration = kubernetes.client.Configuration()
    configuration.host = silent_server
    configuration.retries = False
    core_v1 = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(configuration))
    read = api_reader(core_v1, 'ns', 'vllm', timeout=0.3)
    with pytest.raises(PodLogError, match=r'^reading the log of pod b in namespace ns failed: the API server did '
                                          r'not answer \(ReadTimeoutError\); check the host and the network$'):
        read('b')


def test_merge_keeps_undated_sightings_unknown():
    one = scan('TokenRefreshError\n')
    two = scan('2024-07-15T03:01:00Z TokenRefreshError\n')
    assert merge([one, two])['patterns']['TokenRefreshError'] == {
        'count': 2, 'first_seen': '2024-07-15T03:01:00Z', 'last_seen': '2024-07-15T03:01:00Z'}
    assert merge([one, one])['patterns']['TokenRefreshError']['first_seen'] is None


@pytest.mark.parametrize('args, message', [
    ({'workers': 0}, 'workers must be from 1 to 64, not 0; set workers to fewer logs read at the same time'),
    ({'timeout': 0}, 'timeout must be more than 0 and at most 86400 seconds, not 0.0'),
    ({'since': 'yesterday'}, "since: 'yesterday' is not ISO 8601 or epoch seconds"),
])
def test_module_bad_input_fails_with_one_line_before_any_call(capsys, args, message):
    # host names no server: a call would fail differently
    result = run_module(vllm_pod_logs, dict({'namespace': 'ns', 'pods': ['a'], 'host': 'https://127.0.0.1:1'}, **args),
                        capsys)
    assert result['_rc'] == 1 and result['msg'].startswith(message) and '\n' not in result['msg']
