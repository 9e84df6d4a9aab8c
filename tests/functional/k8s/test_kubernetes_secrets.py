"""No identity and no secret of the lab in any output of the Kubernetes drill, at -vvv with --diff."""

from __future__ import annotations

import base64

import yaml

from harness.k8s_runbook import leaks, rbac_documents, report
from harness.playbooks import playbook


def token_identity(workload, tmp_path) -> dict:
    """vllm_dr_k8s_auth for the shipped Role's ServiceAccount: its bearer token, the API server and its CA."""
    kube = workload.kube
    kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}})  # where the Role reads Restores
    kube.apply(*rbac_documents(workload.namespace))
    token = kube.kubectl('-n', workload.namespace, 'create', 'token', 'vllm-dr', '--duration=1h').strip()
    cluster = yaml.safe_load(kube.kubectl('config', 'view', '--raw', '--minify', '-o', 'yaml'))['clusters'][0]['cluster']
    ca_path = cluster.get('certificate-authority')
    if not ca_path:
        ca_path = str(tmp_path / 'ca.crt')
        with open(ca_path, 'wb') as handle:
            handle.write(base64.b64decode(cluster['certificate-authority-data']))
    return {'host': cluster['server'], 'api_key': token, 'ca_cert': ca_path}


def test_kubernetes_drill_with_a_token_identity_prints_no_secret_at_vvv_with_diff(healthy_workload, tmp_path):
    workload = healthy_workload
    # the pod template carries a secret as an env value (POD_ENV), as vLLM's often does: every read of the
    # Deployment, its ReplicaSets and pods returns it
    auth = token_identity(workload, tmp_path)
    inventory = workload.write_inventory(vllm_dr_k8s_auth=auth)
    log_path = tmp_path / 'ansible.log'
    # only the token identity: no kubeconfig to fall back on
    env = {key: value for key, value in workload.kube.env.items() if key != 'KUBECONFIG'}
    env['ANSIBLE_LOG_PATH'] = str(log_path)

    rc, output = playbook(inventory, 'dr_drill.yml', '-vvv', '--diff', env=env)
    assert rc == 0, output[-6000:]
    result = report(workload)
    assert result['diagnosis']['recovery_needed'] is True
    assert result['validation']['failed'] == [], result['validation']
    # the run really went through the pods and the ConfigMap edit with diff mode on
    assert 'ESTABLISH kubectl CONNECTION' in output
    assert 'session_state_store.refresh_on_startup set to true' in output

    assert leaks(workload, {'output': output}, log_path, also={auth['api_key']}) == []
