"""The Kubernetes target model over raw API reads: the workload's own running pods by the owner chain, the rollout
state, the cache reach against workingDir and subPath, and the preconditions, one table row each."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target


def deployment(uid='d1', name='vllm', revision='2', updated=2, paused=False, working_dir=None, mounts=None,
               volumes=None):
    default_mounts = [{'name': 'cache', 'mountPath': '/var/lib/vllm'}]
    container = {'name': 'vllm', 'volumeMounts': default_mounts if mounts is None else mounts}
    if working_dir:
        container['workingDir'] = working_dir
    default_volumes = [{'name': 'cache', 'persistentVolumeClaim': {'claimName': 'c'}}]
    spec = {'replicas': 2,
            'template': {'spec': {'containers': [container],
                                  'volumes': default_volumes if volumes is None else volumes}}}
    if paused:
        spec['paused'] = True
    return {'metadata': {'name': name, 'uid': uid, 'generation': 1,
                         'annotations': {'deployment.kubernetes.io/revision': revision}},
            'spec': spec,
            'status': {'observedGeneration': 1, 'replicas': 2, 'updatedReplicas': updated, 'availableReplicas': updated}}


def replicaset(uid, revision, template_hash, owner='d1'):
    return {'metadata': {'name': f'vllm-{template_hash}', 'uid': uid,
                         'annotations': {'deployment.kubernetes.io/revision': revision},
                         'labels': {'pod-template-hash': template_hash},
                         'ownerReferences': [{'kind': 'Deployment', 'uid': owner, 'name': 'vllm' if owner == 'd1'
                                              else 'canary'}]}}


def pod(name, rs_uid='rs2', template_hash='new', phase='Running', deleting=False, ready=True):
    meta = {'name': name, 'uid': f'uid-{name}', 'labels': {'pod-template-hash': template_hash},
            'ownerReferences': [{'kind': 'ReplicaSet', 'uid': rs_uid, 'name': f'vllm-{template_hash}'}]}
    if deleting:
        meta['deletionTimestamp'] = '2026-12-01T00:00:00Z'
    return {'metadata': meta, 'spec': {'nodeName': 'n1'},
            'status': {'phase': phase, 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}}


SETS = [replicaset('rs1', '1', 'old'), replicaset('rs2', '2', 'new'), replicaset('rsc', '1', 'cnry', owner='d2')]
CASES = {
    'own running pods, name order': dict(
        pods=[pod('vllm-b'), pod('vllm-a')],
        want_pods=['vllm-a', 'vllm-b'], finished=True, unfinished=False, problems=[]),
    'a pod of another ReplicaSet (a canary on the same selector) is not the target': dict(
        pods=[pod('vllm-a'), pod('canary-a', 'rsc', 'cnry')],
        want_pods=['vllm-a'], finished=True, unfinished=False, problems=[], workloads=['vllm', 'canary']),
    'a terminating pod is not running, yet an old one keeps the rollout unfinished for a wait': dict(
        pods=[pod('vllm-a'), pod('vllm-old', 'rs1', 'old', deleting=True)],
        want_pods=['vllm-a'], finished=False, unfinished=False, old=['vllm-old'], problems=[]),
    'a running pod of an older ReplicaSet is a rollout to wait for': dict(
        pods=[pod('vllm-a'), pod('vllm-old', 'rs1', 'old')],
        want_pods=['vllm-a', 'vllm-old'], finished=False, unfinished=True, old=['vllm-old'], problems=[]),
    'a not-ready pod still runs (its cache is reached), a pending one does not': dict(
        pods=[pod('vllm-a', ready=False), pod('vllm-b', phase='Pending')],
        want_pods=['vllm-a'], finished=True, unfinished=False, problems=[]),
    'a rollout still running': dict(
        workload=deployment(updated=1), pods=[pod('vllm-a')],
        want_pods=['vllm-a'], finished=False, unfinished=True, problems=[]),
    'paused: not waited for, refused before a change': dict(
        workload=deployment(updated=1, paused=True), pods=[pod('vllm-a')],
        want_pods=['vllm-a'], finished=False, unfinished=False,
        problems=['Deployment vllm in namespace ns is paused, so its restart would never roll out; resume it '
                  '(kubectl -n ns rollout resume deployment/vllm), then re-run']),
    'no running pod': dict(
        pods=[pod('vllm-a', phase='Pending')], want_pods=[], finished=True, unfinished=False,
        problems=['Deployment vllm in namespace ns has no running pod; the cache cannot be reached, start the '
                  'workload, then re-run']),
    'a pod the diagnosis reached was replaced since': dict(
        pods=[pod('vllm-a')], expected=['vllm-a', 'vllm-gone'], want_pods=['vllm-a'], finished=True,
        unfinished=False,
        problems=['pod vllm-gone of Deployment vllm is no longer running (replaced since the diagnosis); re-run to '
                  'reach the pods running now']),
}


@pytest.mark.parametrize('case', CASES.values(), ids=list(CASES))
def test_the_target_from_raw_reads(case):
    target = k8s_target({'resources': [case.get('workload') or deployment()]}, SETS, case['pods'], namespace='ns',
                        expected_pods=case.get('expected'))
    assert target['found'] == 'found' and target['name'] == 'vllm' and target['kind'] == 'Deployment'
    assert target['pods'] == case['want_pods']
    assert target['pod_uids'] == {name: f'uid-{name}' for name in case['want_pods']}
    assert target['rollout']['finished'] is case['finished']
    assert target['rollout']['unfinished'] is case['unfinished']
    assert target['rollout']['old_pods'] == case.get('old', [])
    assert target['preconditions'] == case['problems']
    if 'workloads' in case:
        assert target['workloads'] == case['workloads']


@pytest.mark.parametrize('working_dir, mounts, cache_path, location, in_volume', [
    # a relative cache path is the container's workingDir's
    ('/srv/vllm', [{'name': 'cache', 'mountPath': '/srv/vllm'}], 'cache/tokens.db', '/srv/vllm/cache/tokens.db',
     'cache/tokens.db'),
    # the mount's subPath is the directory inside the volume
    (None, [{'name': 'cache', 'mountPath': '/var/lib/vllm', 'subPath': 'replica'}], '/var/lib/vllm/tokens.db',
     '/var/lib/vllm/tokens.db', 'replica/tokens.db'),
    # both: a workingDir under a subPath mount
    ('/data/run', [{'name': 'cache', 'mountPath': '/data', 'subPath': 'vllm'}], 'tokens.db', '/data/run/tokens.db',
     'vllm/run/tokens.db'),
])
def test_the_cache_reach_is_resolved_against_working_dir_and_sub_path(
        working_dir, mounts, cache_path, location, in_volume):
    target = k8s_target(deployment(working_dir=working_dir, mounts=mounts), SETS, [pod('vllm-b'), pod('vllm-a')],
                        namespace='ns', cache_path=cache_path, container='vllm')
    reach = target['cache_reach']
    assert (reach['location'], reach['path_in_volume'], reach['problem']) == (location, in_volume, None)
    # a shared volume (a PersistentVolumeClaim) holds one copy: read and purged in the first of the target's pods
    assert (reach['strategy'], reach['inspect'], reach['purge']) == ('shared', ['vllm-a'], ['vllm-a'])
    every = k8s_target(deployment(working_dir=working_dir, mounts=mounts), SETS, [pod('vllm-b'), pod('vllm-a')],
                       namespace='ns', cache_path=cache_path, cache_reach_mode='every_pod')['cache_reach']
    both = ['vllm-a', 'vllm-b']
    assert (every['strategy'], every['inspect'], every['purge']) == ('every_pod', both, both)


@pytest.mark.parametrize('read, found, wait', [
    ({'failed': True, 'msg': 'connection refused'}, 'error', 'error'),
    (None, 'error', 'error'),
    ({'resources': []}, 'gone', 'gone'),
    ({'resources': [deployment(updated=1)]}, 'found', 'progressing'),
    ({'resources': [deployment()]}, 'found', 'complete'),
])
def test_one_read_of_the_workload_during_a_wait(read, found, wait):
    target = k8s_target(read, SETS, [pod('vllm-a')], namespace='ns')
    assert (target['found'], target['rollout']['wait']) == (found, wait)


def test_the_owner_chain_names_the_workloads_before_one_is_read():
    target = k8s_target(None, SETS, [pod('vllm-a'), pod('canary-a', 'rsc', 'cnry'), pod('x', phase='Failed')],
                        namespace='ns')
    assert target['workloads'] == ['vllm', 'canary']
    assert target['selected'] == {'count': 3, 'running': ['vllm-a', 'canary-a']}


def test_an_unsupported_kind_is_refused_in_one_line_naming_the_supported():
    target = k8s_target({'resources': [deployment()]}, [], [], namespace='ns', kind='DaemonSet')
    assert target['preconditions'] == [
        'workload kind DaemonSet is not supported; supported: Deployment, LeaderWorkerSet, StatefulSet']
