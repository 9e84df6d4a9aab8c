"""vllm_pod_logs on the kwok control plane: the logs of every replica in one call, a pod deleted before the read named,
a refused read one clear line."""

from __future__ import annotations

import json
import sys
import time

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.filter.log_evidence import log_evidence
from conftest import lab_workload
from harness.k8s import KubeError
from harness.k8s_runbook import rbac_documents, service_account_kubeconfig
from harness.playbooks import playbook

SINCE = '2000-01-01T00:00:00Z'


@pytest.fixture
def three_replicas(kwok, tmp_path):
    yield from lab_workload(kwok, tmp_path, incident=True, replicas=3)


def read_logs(workload, tmp_path, pods, *extra, kubeconfig=None):
    """(exit code, output, the module's result) of one vllm_pod_logs call, its connection from module_defaults."""
    result_path = tmp_path / 'result.json'
    play = [{
        'hosts': 'localhost', 'gather_facts': False,
        'module_defaults': {'group/inferops.vllm_dr.kubernetes': {'kubeconfig': kubeconfig or workload.kube.kubeconfig}},
        'tasks': [
            {'name': 'Read the logs', 'register': 'logs',
             'inferops.vllm_dr.vllm_pod_logs': {'namespace': workload.namespace, 'pods': pods, 'container': 'vllm',
                                                'since': SINCE, 'workers': 2}},
            {'name': 'Keep the result', 'check_mode': False,
             'ansible.builtin.copy': {'content': '{{ logs | to_json }}', 'dest': str(result_path), 'mode': '0600'}},
        ]}]
    path = tmp_path / 'pod_logs.yml'
    path.write_text(yaml.safe_dump(play))
    rc, output = playbook('localhost,', str(path), '-c', 'local', '-e', f'ansible_python_interpreter={sys.executable}',
                          *extra, env=workload.kube.env)
    return rc, output, json.loads(result_path.read_text()) if rc == 0 else None


def delete_pod(workload, pod):
    workload.kube.kubectl('-n', workload.namespace, 'delete', 'pod', pod, '--grace-period=0', '--force')
    deadline = time.monotonic() + 30
    while workload.kube.kubectl('-n', workload.namespace, 'get', 'pod', pod, '--ignore-not-found', '-o', 'name').strip():
        assert time.monotonic() < deadline, f'pod {pod} still there'
        time.sleep(0.2)


def served_log(workload, pod):
    """The pod's log as kubectl reads it, once kwok serves it: a pod just created may have none yet (BadRequest)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return workload.kube.kubectl('-n', workload.namespace, 'logs', pod, '-c', 'vllm')
        except KubeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_every_replica_is_counted_in_one_call_and_a_pod_deleted_before_the_read_is_named(three_replicas, tmp_path):
    workload = three_replicas
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == 3
    served = served_log(workload, pods[0])
    expected = log_evidence(served, since=SINCE)
    assert expected['error_lines'] > 0, served[-2000:]
    delete_pod(workload, pods[1])

    rc, output, result = read_logs(workload, tmp_path, pods, '--check')
    assert rc == 0, output[-4000:]
    assert result['changed'] is False
    assert result['gone'] == [pods[1]]
    read = {'state': 'read', 'lines': len(served.splitlines()), 'lines_scanned': expected['lines_scanned'],
            'error_lines': expected['error_lines']}
    assert result['pods'] == [dict(read, name=pods[0]),
                              {'name': pods[1], 'state': 'gone', 'lines': 0, 'lines_scanned': 0, 'error_lines': 0},
                              dict(read, name=pods[2])]
    # every pod serves the lab gateway's log: the two read count it twice
    assert result['evidence']['error_lines'] == 2 * expected['error_lines']
    assert result['evidence']['lines_scanned'] == 2 * expected['lines_scanned']
    for pattern, entry in expected['patterns'].items():
        assert result['evidence']['patterns'][pattern] == dict(entry, count=2 * entry['count'])
    # the log text itself never leaves the module
    error_line = next(line for line in served.splitlines() if any(pattern in line for pattern in expected['patterns']))
    assert error_line not in output and error_line not in json.dumps(result)


def test_a_read_the_role_does_not_allow_fails_with_one_line_naming_the_permission(three_replicas, tmp_path):
    workload = three_replicas
    workload.kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}})
    workload.kube.apply(*rbac_documents(workload.namespace, drop_verb=('get', 'pods/log')))
    kubeconfig = service_account_kubeconfig(workload, tmp_path)
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())

    rc, output, _result = read_logs(workload, tmp_path, pods, kubeconfig=kubeconfig)
    assert rc != 0
    assert f'"msg": "reading the log of pod {pods[0]} in namespace {workload.namespace} failed: 403 ' in output, \
        output[-4000:]
    assert 'grant get on pods/log in the namespace (roles/restore/files/rbac.yml)"' in output
    assert 'Traceback' not in output
    token = yaml.safe_load(open(kubeconfig, encoding='utf-8'))['users'][0]['user']['token']
    assert token not in output
