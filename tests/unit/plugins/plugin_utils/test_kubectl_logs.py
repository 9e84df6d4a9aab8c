"""The logs of every replica from one kubectl call, and no secret on its command line."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._kubectl_logs import kubectl_logs_argv, pod_log_lines


def pods(*hashes):
    return [{'metadata': {'name': f'vllm-{h}-{i}', 'labels': {'app': 'vllm', 'pod-template-hash': h}}}
            for i, h in enumerate(hashes)]


def test_one_call_reads_every_pod_of_the_deployments_replicasets_side_by_side():
    argv = kubectl_logs_argv({'kubeconfig': '/k/config', 'context': 'prod'}, 'vllm', 'app=vllm', pods('a1', 'a1', 'b2'),
                             'vllm')
    assert argv == ['kubectl', '--kubeconfig=/k/config', '--context=prod', 'logs', '--namespace=vllm',
                    '--selector=app=vllm,pod-template-hash in (a1,b2)', '--container=vllm', '--prefix', '--tail=-1',
                    '--max-log-requests=3']


def test_certificate_files_and_the_server_become_flags():
    argv = kubectl_logs_argv({'host': 'https://api:6443', 'ca_cert': '/ca.pem', 'validate_certs': False}, 'ns',
                             'app=vllm', pods('a1'), 'vllm')
    assert argv[1:4] == ['--server=https://api:6443', '--certificate-authority=/ca.pem', '--insecure-skip-tls-verify=true']


@pytest.mark.parametrize('auth', [{'api_key': 'sekrit'}, {'kubeconfig': {'apiVersion': 'v1'}}, {'proxy': 'http://p'}])
def test_options_kubectl_would_take_only_on_its_command_line_fall_back_to_the_api(auth):
    assert kubectl_logs_argv(auth, 'ns', 'app=vllm', pods('a1'), 'vllm') is None


def test_pods_without_a_template_hash_fall_back_to_the_api():
    assert kubectl_logs_argv({}, 'ns', 'app=vllm', [{'metadata': {'name': 'bare', 'labels': {}}}], 'vllm') is None
    assert kubectl_logs_argv({}, 'ns', 'app=vllm', [], 'vllm') is None


def test_each_pods_lines_come_back_without_the_prefix():
    lines = ['[pod/vllm-a/vllm] 2026-01-01T00:00:00Z ERROR one', '[pod/vllm-b/vllm] two',
             '[pod/vllm-a/vllm] three', 'stray']
    assert pod_log_lines(lines, 'vllm-a') == ['2026-01-01T00:00:00Z ERROR one', 'three']
    assert pod_log_lines(lines, 'vllm-c') == []
    assert pod_log_lines(lines) == ['2026-01-01T00:00:00Z ERROR one', 'two', 'three']
