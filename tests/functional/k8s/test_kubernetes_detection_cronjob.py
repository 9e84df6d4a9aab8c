"""The detection CronJob (extensions/detection/kubernetes) is accepted by the API server as shipped, and runs as the
ServiceAccount the collection's RBAC manifest creates."""

from __future__ import annotations

import os
import uuid

import pytest
import yaml

from harness.k8s import KubeError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CRONJOB = os.path.join(ROOT, 'extensions', 'detection', 'kubernetes', 'vllm-dr-detect-cronjob.yml')
RBAC = os.path.join(ROOT, 'roles', 'restore', 'files', 'rbac.yml')


def test_the_api_server_accepts_the_detection_cronjob_with_the_shipped_rbac(kube):
    namespace = f'detect-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', namespace)
    try:
        # the RBAC manifest's objects of the workload's namespace (vllm), moved into this test's namespace
        with open(RBAC, encoding='utf-8') as handle:
            rbac = [item for item in yaml.safe_load(handle)['items'] if item['metadata'].get('namespace') == 'vllm']
        for item in rbac:
            item['metadata']['namespace'] = namespace
            for subject in item.get('subjects', []):
                subject['namespace'] = namespace
        assert {item['kind'] for item in rbac} == {'ServiceAccount', 'Role', 'RoleBinding'}
        kube.apply(*rbac)
        with open(CRONJOB, encoding='utf-8') as handle:
            shipped = yaml.safe_load(handle)
        shipped['metadata']['namespace'] = namespace
        kube.apply(shipped)
        stored = kube.get('cronjob', 'vllm-dr-detect', namespace)
        assert stored['spec']['schedule'] == '*/15 * * * *'
        pod = stored['spec']['jobTemplate']['spec']['template']['spec']
        assert pod['containers'][0]['args'][0] == 'inferops.vllm_dr.dr_detect'
        account = kube.get('serviceaccount', pod['serviceAccountName'], namespace)
        assert account['metadata']['name'] == 'vllm-dr'
        # the check is strict: a misspelt field is refused, not dropped
        shipped['spec']['jobTemplate']['spec']['template']['spec']['containers'][0]['imagePullPolcy'] = 'Always'
        with pytest.raises(KubeError, match='imagePullPolcy'):
            kube.kubectl('apply', '--dry-run=server', '--validate=strict', '-f', '-', stdin=yaml.safe_dump(shipped))
    finally:
        kube.kubectl('delete', 'namespace', namespace, '--wait=false', check=False)
