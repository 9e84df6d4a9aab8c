"""The Deployment's own pods, what one read during a rollout wait says, and the purge's preconditions."""

from __future__ import annotations

import re

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target, purge_preconditions
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import deployment_pods, running_pods

CONFIG = '# kept by hand\nsession_state_store:\n  refresh_on_startup: false\noauth:\n  client_secret: s3cr3t-value\n'


def owned(kind, uid):
    return [{'kind': kind, 'uid': uid, 'name': uid}]


def deployment(name='vllm', uid='d1', paused=False):
    return {'metadata': {'name': name, 'uid': uid}, 'spec': {'paused': paused} if paused else {}}


def replicaset(uid, deployment_uid):
    return {'metadata': {'uid': uid, 'ownerReferences': owned('Deployment', deployment_uid)}}


def pod(name, replicaset_uid, phase='Running', deleting=False):
    meta = {'name': name, 'ownerReferences': owned('ReplicaSet', replicaset_uid)}
    if deleting:
        meta['deletionTimestamp'] = '2026-12-01T00:00:00Z'
    return {'metadata': meta, 'status': {'phase': phase}}


REPLICASETS = [replicaset('rs-main', 'd1'), replicaset('rs-old', 'd1'), replicaset('rs-canary', 'd2')]
PODS = [pod('vllm-a', 'rs-main'), pod('vllm-b', 'rs-old'), pod('canary-a', 'rs-canary'),
        {'metadata': {'name': 'bare'}, 'status': {'phase': 'Running'}}]


def test_deployment_pods_are_found_through_its_replicasets_not_the_selector():
    assert [p['metadata']['name'] for p in deployment_pods(PODS, REPLICASETS, deployment())] == ['vllm-a', 'vllm-b']
    assert [p['metadata']['name'] for p in deployment_pods(PODS, REPLICASETS, deployment('canary', 'd2'))] == ['canary-a']


def test_running_pods_leave_out_pending_and_terminating_ones():
    pods = [pod('a', 'x'), pod('b', 'x', phase='Pending'), pod('c', 'x', deleting=True)]
    assert [p['metadata']['name'] for p in running_pods(pods)] == ['a']


@pytest.mark.parametrize('result, outcome', [
    ({'failed': True, 'msg': 'connection refused'}, 'error'),
    ({'msg': 'Failed to get client due to HTTPSConnectionPool'}, 'error'),
    ({'resources': []}, 'gone'),
    ({'resources': [{'metadata': {'generation': 2}, 'spec': {'replicas': 1}, 'status': {'observedGeneration': 1}}]},
     'progressing'),
    ({'resources': [{'metadata': {'generation': 2}, 'spec': {'replicas': 1},
                     'status': {'observedGeneration': 2, 'replicas': 1, 'updatedReplicas': 1,
                                'availableReplicas': 1}}]}, 'complete'),
])
def test_a_failed_read_during_the_wait_is_an_error_to_retry_not_an_answer(result, outcome):
    assert k8s_target(result, namespace='vllm')['rollout']['wait'] == outcome


def problems(dep=None, config_maps=None, pods=None, expected=('vllm-a',), **options):
    dep = deployment() if dep is None else dep
    config_maps = [{'data': {'vllm.yaml': CONFIG}}] if config_maps is None else config_maps
    target = k8s_target({'resources': [dep] if dep else []}, REPLICASETS, PODS if pods is None else pods,
                        namespace='ns', expected_pods=list(expected))
    return purge_preconditions(target, config_maps, namespace='ns', config_map='vllm-config',
                               config_key=options.get('key', 'vllm.yaml'),
                               edit_path='session_state_store.refresh_on_startup', edit_value=True)


def test_no_problem_when_everything_is_in_place():
    assert problems() == []


def test_an_immutable_configmap_that_needs_no_edit_is_no_problem():
    done = CONFIG.replace('refresh_on_startup: false', 'refresh_on_startup: true')
    assert problems(config_maps=[{'data': {'vllm.yaml': done}, 'immutable': True}]) == []


@pytest.mark.parametrize('kwargs, expected', [
    ({'config_maps': []}, r'^ConfigMap vllm-config not found in namespace ns; set vllm_dr_k8s_config_map'),
    ({'config_maps': [{'data': {'other': 'x'}}]},
     r'^ConfigMap vllm-config in namespace ns has no key vllm\.yaml \(keys: other\); set vllm_dr_k8s_config_key'),
    ({'config_maps': [{'data': {'vllm.yaml': 'a: [1\n'}}]},
     r'^vllm\.yaml in ConfigMap vllm-config in namespace ns: the document is not valid YAML'),
    ({'config_maps': [{'data': {'vllm.yaml': CONFIG}, 'immutable': True}]},
     r'^ConfigMap vllm-config in namespace ns is immutable'),
    ({'dep': deployment(paused=True)}, r'^Deployment vllm in namespace ns is paused.*rollout resume deployment/vllm'),
    ({'pods': [pod('canary-a', 'rs-canary')]}, r'^Deployment vllm in namespace ns has no running pod'),
    ({'expected': ('vllm-a', 'vllm-gone')}, r'^pod vllm-gone of Deployment vllm is no longer running'),
    ({'dep': {}}, r'^the Deployment is gone from namespace ns'),
])
def test_each_precondition_is_one_line_naming_the_problem_and_the_fix(kwargs, expected):
    found = problems(**kwargs)
    assert len(found) == 1, found
    assert '\n' not in found[0]
    assert re.search(expected, found[0]), found[0]


def test_every_problem_is_reported_at_once_and_no_secret_is_quoted():
    found = problems(dep=deployment(paused=True), config_maps=[{'data': {'vllm.yaml': CONFIG}, 'immutable': True}],
                     expected=('vllm-a', 'vllm-gone'))
    assert len(found) == 3, found
    assert not any('s3cr3t' in line for line in found)


def test_deployment_pods_come_in_name_order_whatever_the_api_order():
    listed = [pod('vllm-c', 'rs-main'), pod('vllm-a', 'rs-main'), pod('vllm-b', 'rs-main')]
    assert [p['metadata']['name'] for p in deployment_pods(listed, REPLICASETS, deployment())] == [
        'vllm-a', 'vllm-b', 'vllm-c']
