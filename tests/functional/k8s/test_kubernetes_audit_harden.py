"""The readiness audit and the Velero snapshot exclusion (dr_harden.yml) on the real API server: the audit names what
is missing, the exclusion is applied, accepted, idempotent, found by the audit, and removed again leaving the
operator's own entries; --check changes nothing; no secret is printed."""

from __future__ import annotations

import json
import secrets as secrets_module
import uuid
from xml.etree import ElementTree

import yaml

from harness.k8s_runbook import leaks
from harness.playbooks import playbook, recap

EXCLUDES = 'backup.velero.io/backup-volumes-excludes'
CACHE_LABEL = 'vllm-dr.inferops.io/token-cache'
# the operator's own resource policy: snapshot every CSI volume
OPERATOR_RULE = {'conditions': {'csi': {}}, 'action': {'type': 'snapshot'}}


def statuses(result):
    return {item['id']: item['status'] for item in result['items']}


def state(workload, velero_ns):
    """What the exclusion touches: the pod template's annotations, the cache PVC's labels, the policy ConfigMap."""
    kube, ns = workload.kube, workload.namespace
    template = workload.deployment()['spec']['template']['metadata']
    config_map = kube.get('configmap', 'backup-policy', velero_ns)
    return {'annotations': template.get('annotations') or {},
            'pvc_labels': kube.get('pvc', 'vllm-pvc', ns)['metadata'].get('labels') or {},
            'policy': yaml.safe_load(config_map['data']['policy.yaml'])}


def test_audit_and_velero_exclusion_on_the_api_server(healthy_workload, tmp_path):
    workload = healthy_workload
    kube, ns = workload.kube, workload.namespace
    velero_ns = f'velero-{uuid.uuid4().hex[:8]}'
    env_secret = 'hf_' + secrets_module.token_hex(16)
    kube.kubectl('create', 'namespace', velero_ns)
    try:
        # the operator already excludes a scratch volume, keeps an API key in the pod template, and has a resource
        # policy of their own in Velero's namespace
        kube.kubectl('-n', ns, 'patch', 'deployment', 'vllm', '-p', json.dumps({'spec': {'template': {
            'metadata': {'annotations': {EXCLUDES: 'scratch'}},
            'spec': {'containers': [{'name': 'vllm', 'env': [{'name': 'HF_TOKEN', 'value': env_secret}]}]}}}}))
        kube.apply({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'backup-policy', 'namespace': velero_ns},
                    'data': {'policy.yaml': yaml.safe_dump({'version': 'v1', 'volumePolicies': [OPERATOR_RULE]})}})
        inventory = workload.write_inventory(vllm_dr_k8s_velero_namespace=velero_ns,
                                             vllm_dr_k8s_velero_policy='backup-policy')
        outputs = {}
        env = dict(kube.env, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))

        def run(name, *extra):
            rc, output = playbook(inventory, name, *extra, env=env)
            outputs[f'{len(outputs)}: {name} {" ".join(extra)}'] = output
            return rc, output

        def audit(*extra):
            rc, output = run('dr_audit.yml', '-e', 'vllm_dr_audit_fail_below=100', *extra)
            assert (workload.reports / 'lab.audit.json').exists(), output[-3000:]
            return rc, output, json.loads((workload.reports / 'lab.audit.json').read_text())['audit']

        before = state(workload, velero_ns)
        rc, output, result = audit('--check')
        assert rc != 0 and 'is below 100%' in output, output[-3000:]
        assert statuses(result) == {'cache_external': 'advice', 'refresh_on_startup': 'fail', 'restore_hook': 'fail',
                                    'cache_outside_snapshots': 'fail', 'alert_rules': 'skip',
                                    'probe_session': 'pass'}
        p3 = next(item for item in result['items'] if item['id'] == 'cache_outside_snapshots')
        assert 'file-system backups include volume vllm-data' in p3['detail']
        assert 'snapshot backups include PVC vllm-pvc' in p3['detail']
        assert 'no PrometheusRule CRD' in next(item['detail'] for item in result['items'] if item['id'] == 'alert_rules')
        suite = ElementTree.parse(workload.reports / 'lab.audit.junit.xml').getroot().find('testsuite')
        assert (suite.get('tests'), suite.get('failures'), suite.get('skipped')) == ('6', '3', '1')
        assert (workload.reports / 'lab.audit.md').read_text().startswith('# vLLM restore readiness on lab: NOT READY')

        # --check: the changes are named, none is made
        rc, output = run('dr_harden.yml', '--check', '--diff')
        assert rc == 0, output[-3000:]
        assert f'{EXCLUDES}: scratch -> scratch,vllm-data (the pod template changed: this starts a rollout)' in output
        assert state(workload, velero_ns) == before
        # bad input is refused by the argument spec, before anything is read or changed
        rc, output = run('dr_harden.yml', '-e', '{"vllm_dr_harden_exclusions": ["labels"]}')
        assert rc != 0 and 'vllm_dr_harden_exclusions' in output and 'labels' in output, output[-3000:]
        assert state(workload, velero_ns) == before

        rc, output = run('dr_harden.yml', '--diff')
        assert rc == 0, output[-3000:]
        assert recap(output)['changed'] >= 3
        assert '--resource-policies-configmap backup-policy' in output
        after = state(workload, velero_ns)
        assert after['annotations'][EXCLUDES] == 'scratch,vllm-data'
        assert after['pvc_labels'] == {CACHE_LABEL: 'true'}
        # the skip rule first (Velero applies the first rule a volume matches), the operator's after it
        assert after['policy'] == {'version': 'v1', 'volumePolicies': [
            {'conditions': {'pvcLabels': {CACHE_LABEL: 'true'}}, 'action': {'type': 'skip'}}, OPERATOR_RULE]}

        rc, output = run('dr_harden.yml')
        assert rc == 0 and recap(output)['changed'] == 0, output[-3000:]
        assert state(workload, velero_ns) == after

        rc, output, result = audit()
        p3 = next(item for item in result['items'] if item['id'] == 'cache_outside_snapshots')
        assert p3['status'] == 'pass', p3
        assert f'{EXCLUDES} lists vllm-data' in p3['detail']
        assert f'resource policy {velero_ns}/backup-policy skips PVC vllm-pvc' in p3['detail']

        rc, output = run('dr_harden.yml', '-e', 'vllm_dr_harden_state=absent')
        assert rc == 0 and recap(output)['changed'] >= 3, output[-3000:]
        removed = state(workload, velero_ns)
        assert removed['annotations'].get(EXCLUDES) == 'scratch'
        assert not [key for key in removed['annotations'] if key.startswith('vllm-dr.inferops.io/')]
        assert CACHE_LABEL not in removed['pvc_labels']
        assert removed['policy'] == {'version': 'v1', 'volumePolicies': [OPERATOR_RULE]}
        rc, output = run('dr_harden.yml', '-e', 'vllm_dr_harden_state=absent')
        assert rc == 0 and recap(output)['changed'] == 0, output[-3000:]

        assert leaks(workload, outputs, tmp_path / 'ansible.log', also={env_secret}) == []
    finally:
        kube.kubectl('delete', 'namespace', velero_ns, '--wait=false', check=False)
