"""The workload's kind, read from the running pods' owner chain when the run does not name it, and the one line that
refuses a kind the runbook does not restart or a workload another resource controls; one table row each."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import KINDS, k8s_target, kind_access, target_reads


def pod(name, owner_kind=None, owner_name='vllm-x', labels=None, phase='Running'):
    meta = {'name': name, 'uid': f'uid-{name}', 'labels': labels or {}}
    if owner_kind:
        meta['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': owner_kind, 'name': owner_name, 'uid': 'o1',
                                    'controller': True}]
    return {'metadata': meta, 'spec': {}, 'status': {'phase': phase}}


SUPPORTED = ', '.join(sorted(KINDS))
KIND_CASES = {
    'a ReplicaSet\'s pods are a Deployment\'s': ([pod('a', 'ReplicaSet'), pod('b', 'ReplicaSet')], 'Deployment', None),
    'a DaemonSet\'s pod is refused, naming what is supported': (
        [pod('a', 'DaemonSet', 'node-agent')], None,
        f'pod a is run by DaemonSet node-agent in namespace ns, not a workload the runbook restarts; '
        f'supported kinds: {SUPPORTED}'),
    'a Job\'s pod is refused': (
        [pod('a', 'Job', 'warmup')], None,
        f'pod a is run by Job warmup in namespace ns, not a workload the runbook restarts; supported kinds: {SUPPORTED}'),
    'a bare pod is refused': (
        [pod('a')], None,
        f'pod a is run by no controller (a bare pod) in namespace ns, not a workload the runbook restarts; '
        f'supported kinds: {SUPPORTED}'),
    'a pod not running does not count': ([pod('a', 'ReplicaSet'), pod('b', 'DaemonSet', phase='Pending')],
                                         'Deployment', None),
    'no running pod names no kind': ([pod('b', 'DaemonSet', phase='Pending')], None, None),
}


@pytest.mark.parametrize('pods, kind, refused', KIND_CASES.values(), ids=KIND_CASES.keys())
def test_auto_reads_the_kind_from_the_running_pods_owner_chain(pods, kind, refused):
    target = k8s_target(None, [], pods, namespace='ns', kind='auto')
    assert (target['kind'], target['refused']) == (kind, refused)
    if refused:
        assert target['preconditions'] == [refused]


def test_pods_of_two_kinds_are_refused_naming_each():
    pods = [pod('a', 'ReplicaSet'), pod('b', 'ReplicaSet')]
    for kind in KINDS:
        if kind != 'Deployment' and KINDS[kind].pod_label is None:
            pods.append(pod('c', KINDS[kind].pod_controller))
    if len(pods) == 2:
        pytest.skip('one kind only')
    target = k8s_target(None, [], pods, namespace='ns', kind='auto')
    assert target['kind'] is None
    assert target['refused'].startswith('the running pods in namespace ns belong to workloads of several kinds')


def test_a_kind_named_that_is_not_supported_is_refused_in_one_line():
    target = k8s_target(None, [], [pod('a', 'DaemonSet')], namespace='ns', kind='DaemonSet')
    assert target['refused'] == f'workload kind DaemonSet is not supported; supported: {SUPPORTED}'
    assert target['api_version'] is None


def test_a_deployment_an_operator_controls_is_refused_before_any_change():
    workload = {'metadata': {'name': 'llama-predictor', 'uid': 'd1', 'generation': 1,
                             'ownerReferences': [{'apiVersion': 'serving.kserve.io/v1beta1',
                                                  'kind': 'InferenceService', 'name': 'llama', 'uid': 'i1',
                                                  'controller': True}]},
                'spec': {'replicas': 1, 'template': {'spec': {'containers': [{'name': 'vllm'}]}}},
                'status': {'observedGeneration': 1, 'replicas': 1, 'updatedReplicas': 1, 'availableReplicas': 1}}
    target = k8s_target(workload, [], [], namespace='ns', kind='Deployment')
    refusal = ('Deployment llama-predictor in namespace ns is controlled by InferenceService llama '
               '(serving.kserve.io/v1beta1), which would undo a change of it; the runbook restarts workloads no '
               f'other resource controls, of kinds: {SUPPORTED}')
    assert target['refused'] == refusal
    assert target['preconditions'][0] == refusal


def test_the_kind_names_its_api_for_the_reads_and_the_permissions():
    target = k8s_target(None, [], [pod('a', 'ReplicaSet')], namespace='ns', kind='auto')
    assert (target['api_version'], target['resource'], target['group']) == ('apps/v1', 'deployments', 'apps')


@pytest.mark.parametrize('kind, reads', [
    ('Deployment', [{'key': 'owners', 'kind': 'ReplicaSet', 'api_version': 'apps/v1'}]),
    ('LeaderWorkerSet', [{'key': 'owners', 'kind': 'StatefulSet', 'api_version': 'apps/v1'}]),
    # a StatefulSet controls its pods itself: nothing lies between, nothing is read
    ('StatefulSet', []),
    ('DaemonSet', []),
])
def test_the_kind_names_what_the_roles_read_between_the_workload_and_its_pods(kind, reads):
    assert target_reads(kind) == reads


def test_the_owners_the_target_reads_return_are_the_ones_the_model_matches():
    # what the roles read under the key owners is what the model takes as owners: a ReplicaSet owned by the Deployment
    # makes its pod the Deployment's
    workload = {'kind': 'Deployment', 'metadata': {'name': 'vllm', 'uid': 'd1', 'generation': 1},
                'spec': {'replicas': 1}, 'status': {}}
    owner = {'kind': 'Deployment', 'name': 'vllm', 'uid': 'd1', 'controller': True}
    replicaset = {'kind': 'ReplicaSet', 'metadata': {'name': 'vllm-abc', 'uid': 'r1', 'ownerReferences': [owner]}}
    running = pod('vllm-abc-1', 'ReplicaSet')
    running['metadata']['ownerReferences'][0].update(name='vllm-abc', uid='r1')
    target = k8s_target({'resources': [workload]}, [replicaset], [running], namespace='ns', kind='Deployment')
    assert target_reads('Deployment')[0]['kind'] == replicaset['kind']
    assert target['workloads'] == ['vllm'] and target['pods'] == ['vllm-abc-1']


PODS = {'key': 'pods', 'kind': 'Pod', 'label_selectors': ['app=vllm']}


@pytest.mark.parametrize('kind, name, reads', [
    # the owners first, then the pods, then the workload by name: read after its pods, its status is never behind
    # them because of the read
    ('Deployment', 'vllm', [{'key': 'owners', 'kind': 'ReplicaSet', 'api_version': 'apps/v1'}, PODS,
                            {'key': 'workload', 'kind': 'Deployment', 'api_version': 'apps/v1', 'name': 'vllm'}]),
    ('StatefulSet', 'vllm', [PODS, {'key': 'workload', 'kind': 'StatefulSet', 'api_version': 'apps/v1',
                                    'name': 'vllm'}]),
    ('LeaderWorkerSet', '', [{'key': 'owners', 'kind': 'StatefulSet', 'api_version': 'apps/v1'}, PODS]),
    # the kind not known yet (or not supported): the pods alone
    ('auto', 'vllm', [PODS]),
    ('DaemonSet', 'agent', [PODS]),
])
def test_one_read_of_the_target_takes_the_owners_the_pods_then_the_workload(kind, name, reads):
    assert target_reads(kind, selector='app=vllm', name=name) == reads


@pytest.mark.parametrize('kind, strategy, read, change', [
    ('Deployment', 'RollingUpdate',
     [{'verb': 'list', 'resource': 'replicasets', 'group': 'apps'},
      {'verb': 'get', 'resource': 'deployments', 'group': 'apps'}],
     [{'verb': 'list', 'resource': 'replicasets', 'group': 'apps'}]),
    ('LeaderWorkerSet', 'RollingUpdate',
     [{'verb': 'list', 'resource': 'statefulsets', 'group': 'apps'},
      {'verb': 'get', 'resource': 'leaderworkersets', 'group': 'leaderworkerset.x-k8s.io'}],
     [{'verb': 'list', 'resource': 'statefulsets', 'group': 'apps'}]),
    # nothing lies between a StatefulSet and its pods; an OnDelete restart deletes them one by one
    ('StatefulSet', 'RollingUpdate', [{'verb': 'get', 'resource': 'statefulsets', 'group': 'apps'}], []),
    ('StatefulSet', 'OnDelete', [{'verb': 'get', 'resource': 'statefulsets', 'group': 'apps'}],
     [{'verb': 'delete', 'resource': 'pods'}]),
    ('DaemonSet', 'OnDelete', [], []),
])
def test_the_kind_asks_for_the_permissions_of_its_reads_and_its_restart_only(kind, strategy, read, change):
    assert kind_access(kind, {'strategy': strategy}) == {'read': read, 'change': change}


def test_one_read_of_the_target_is_taken_whole_from_vllm_k8s_read():
    workload = {'kind': 'StatefulSet', 'metadata': {'name': 'vllm', 'uid': 's1', 'generation': 1},
                'spec': {'replicas': 1}, 'status': {}}
    running = pod('vllm-0', 'StatefulSet', 'vllm')
    running['metadata']['ownerReferences'][0]['uid'] = 's1'
    apart = k8s_target({'resources': [workload]}, [], [running], namespace='ns', kind='StatefulSet')
    whole = k8s_target({'resources': {'pods': [running], 'workload': [workload]}}, namespace='ns', kind='StatefulSet')
    assert whole == apart and whole['pods'] == ['vllm-0']
    assert k8s_target({'resources': {'pods': [running], 'workload': []}}, namespace='ns',
                      kind='StatefulSet')['rollout']['wait'] == 'gone'
    # a failed read returns its error alone: never an answer, the wait goes on
    failed = k8s_target({'error': 'could not read the Pod objects in namespace ns: 503 Service Unavailable'},
                        namespace='ns', kind='StatefulSet')
    assert (failed['found'], failed['rollout']['wait'], failed['rollout']['finished']) == ('error', 'error', False)
