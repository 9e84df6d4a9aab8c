"""What the runbook touches on Kubernetes: the named Deployment's pods only, the objects its Role names, and the
init containers in the order asked for."""

from __future__ import annotations

import copy

import pytest

from harness.k8s_runbook import rbac_documents, report, run, service_account_kubeconfig


def add_canary(workload) -> dict:
    """A second Deployment whose pods match the same selector (app=vllm): a canary, with one pod."""
    deployment = copy.deepcopy(workload.deployment())
    template = deployment['spec']['template']
    template['metadata']['labels'] = {'app': 'vllm', 'track': 'canary'}
    canary = {'apiVersion': 'apps/v1', 'kind': 'Deployment',
              'metadata': {'name': 'vllm-canary', 'namespace': workload.namespace, 'labels': {'app': 'vllm'}},
              'spec': {'replicas': 1, 'selector': {'matchLabels': {'app': 'vllm', 'track': 'canary'}},
                       'template': template}}
    workload.kube.apply(canary)
    workload.kube.rollout_status(workload.namespace, 'vllm-canary')
    return workload.kube.get('deployment', 'vllm-canary', workload.namespace)


def canary_pods(workload) -> set:
    return {pod['metadata']['name'] for pod in workload.kube.running_pods(workload.namespace, 'track=canary')}


def test_naming_the_deployment_scopes_the_pods_to_its_own(workload):
    canary = add_canary(workload)
    canary_before = canary_pods(workload)
    assert len(canary_before) == 1
    # every pod of the Deployment is purged, so that a canary pod taken in by mistake would be too
    inventory = workload.write_inventory(vllm_dr_k8s_deployment='vllm', vllm_dr_k8s_cache_reach='every_pod')
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    diagnosis = report(workload)['diagnosis']
    assert not set(diagnosis['kubernetes']['pods']) & canary_before
    # the canary's pod was neither purged nor restarted, and its Deployment not touched
    purged = report(workload)['purge']['cache_pods']
    assert sorted(purged) == sorted(diagnosis['kubernetes']['pods']), purged
    assert not set(purged) & canary_before, purged
    assert canary_pods(workload) == canary_before
    after = workload.kube.get('deployment', 'vllm-canary', workload.namespace)
    assert after['metadata']['generation'] == canary['metadata']['generation']
    assert 'Unknown error' not in output
    assert report(workload)['validation']['failed'] == []


def test_the_shipped_role_scopes_patch_to_the_named_objects(workload, tmp_path):
    kube, namespace = workload.kube, workload.namespace
    kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}})
    kube.apply(*rbac_documents(namespace))
    kubeconfig = service_account_kubeconfig(workload, tmp_path)

    def can(*args):
        return kube.kubectl('auth', 'can-i', *args, '-n', namespace, kubeconfig=kubeconfig, check=False).strip()
    assert can('patch', 'deployment/vllm') == 'yes'
    assert can('patch', 'configmap/vllm-config') == 'yes'
    assert can('patch', 'deployment/other') == 'no'
    assert can('patch', 'configmap/other') == 'no'
    assert can('patch', 'deployments') == 'no'
    inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig}, vllm_dr_k8s_deployment='vllm')
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []


SEED = {'name': 'seed-cache', 'image': 'busybox:1.37', 'command': ['sh', '-c', 'true']}


@pytest.mark.parametrize('position, expected', [
    (None, ['seed-cache', 'purge-token-cache']),        # the default: last, right before vLLM
    ('first', ['purge-token-cache', 'seed-cache']),
])
def test_the_purge_init_container_goes_where_asked(workload, position, expected):
    kube, namespace = workload.kube, workload.namespace
    kube.kubectl('-n', namespace, 'patch', 'deployment/vllm', '--type=strategic',
                 '-p', '{"spec": {"template": {"spec": {"initContainers": [%s]}}}}' % str(SEED).replace("'", '"'))
    kube.rollout_status(namespace)
    overrides = {'vllm_dr_k8s_purge_method': 'init_container'}
    if position:
        overrides['vllm_dr_k8s_init_position'] = position
    inventory = workload.write_inventory(**overrides)
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    inits = workload.deployment()['spec']['template']['spec']['initContainers']
    assert [init['name'] for init in inits] == expected
    assert inits[expected.index('seed-cache')]['command'] == SEED['command']

    # applied again: the order is kept and nothing changes (the pod template is as it was; the forced run's record of
    # the restart it might owe is written on the Deployment's metadata and removed again, as it changed nothing)
    template = workload.deployment()['spec']['template']
    rc, output = run(workload, '-e', 'vllm_dr_force=true', inventory=inventory)
    assert rc == 0, output[-6000:]
    assert workload.deployment()['spec']['template'] == template
    assert 'vllm-dr.inferops.io/restart-pending' not in workload.deployment()['metadata'].get('annotations', {})
