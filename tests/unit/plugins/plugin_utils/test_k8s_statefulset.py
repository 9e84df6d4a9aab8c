"""The StatefulSet kind of the target model: its pods by the owner chain in ordinal order, a pod's revision by its
controller-revision-hash against the update revision, and its rollout as `kubectl rollout status sts` judges it
(kubectl's StatefulSetStatusViewer), one table row each."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_statefulset import (
    replacement_ready, rollout_verdict, statefulset, statefulset_owners)
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target


def sts(replicas=3, generation=2, observed=2, ready=3, updated=3, current='vllm-a', update='vllm-b',
        strategy='RollingUpdate', partition=None, claims=('vllm-data',), owner=None):
    update_strategy = {'type': strategy}
    if strategy == 'RollingUpdate':
        update_strategy['rollingUpdate'] = {'partition': partition} if partition is not None else {}
    meta = {'name': 'vllm', 'uid': 's1', 'generation': generation}
    if owner:
        meta['ownerReferences'] = [owner]
    return {'metadata': meta,
            'spec': {'replicas': replicas, 'updateStrategy': update_strategy,
                     'template': {'spec': {'containers': [{'name': 'vllm', 'workingDir': '/data',
                                                           'volumeMounts': [{'name': 'vllm-data',
                                                                             'mountPath': '/data'}]}]}},
                     'volumeClaimTemplates': [{'metadata': {'name': name}} for name in claims]},
            'status': {'observedGeneration': observed, 'replicas': replicas, 'readyReplicas': ready,
                       'updatedReplicas': updated, 'currentRevision': current, 'updateRevision': update}}


def pod(name, revision='vllm-b', uid='s1', phase='Running', ready=True):
    return {'metadata': {'name': name, 'uid': f'uid-{name}', 'labels': {'controller-revision-hash': revision},
                         'ownerReferences': [{'kind': 'StatefulSet', 'name': 'vllm', 'uid': uid, 'controller': True}]},
            'status': {'phase': phase, 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}}


def _no_rolling(current, update):
    workload = sts(current=current, update=update)
    del workload['spec']['updateStrategy']['rollingUpdate']
    return workload


# (the StatefulSet, kubectl's verdict: done or not)
VERDICTS = {
    'generation not yet observed': (sts(generation=3), False),
    'observedGeneration 0 (never observed)': (sts(observed=0, generation=0), False),
    'a replica not ready': (sts(ready=2), False),
    'every replica ready and updated': (sts(), True),
    'partition 0 (defaulted) but not every pod updated': (sts(partition=0, updated=2), False),
    'partition 2 of 3: one updated is done': (sts(partition=2, updated=1), True),
    'partition 2 of 3: none updated yet': (sts(partition=2, updated=0), False),
    'a rollingUpdate without a partition is done once ready (kubectl)': (sts(updated=0), True),
    'no rollingUpdate at all: the revisions decide, differing': (_no_rolling('vllm-a', 'vllm-b'), False),
    'no rollingUpdate at all: the revisions decide, equal': (_no_rolling('vllm-b', 'vllm-b'), True),
    'OnDelete, every replica ready': (sts(strategy='OnDelete', updated=0), True),
    'OnDelete, a replica not ready': (sts(strategy='OnDelete', ready=2), False),
}


@pytest.mark.parametrize('workload, done', VERDICTS.values(), ids=VERDICTS.keys())
def test_the_rollout_is_finished_as_kubectl_judges_it(workload, done):
    assert rollout_verdict(workload)[0] is done


def test_the_pods_are_its_own_by_uid_in_ordinal_order():
    pods = [pod('vllm-10'), pod('vllm-2'), pod('vllm-0'), pod('other-0', uid='s2')]
    facts = statefulset(sts(), [], pods, namespace='ns')
    assert [p['metadata']['name'] for p in facts['pods']] == ['vllm-0', 'vllm-2', 'vllm-10']
    assert statefulset_owners([], pods + [pod('vllm-3')]) == ['vllm']


def test_a_pod_of_another_revision_above_the_partition_is_old_below_it_stays():
    pods = [pod('vllm-0', 'vllm-a'), pod('vllm-1', 'vllm-a'), pod('vllm-2', 'vllm-a')]
    facts = statefulset(sts(partition=1, updated=0), [], pods, namespace='ns')
    assert facts['old_pods'] == ['vllm-1', 'vllm-2']
    assert facts['restart'] == {'strategy': 'RollingUpdate', 'partition': 1, 'stay_old': ['vllm-0'],
                                'update_revision': 'vllm-b', 'updated': [], 'observed': True}


def test_on_delete_pods_of_an_older_revision_are_no_rollout_to_wait_for():
    pods = [pod('vllm-0', 'vllm-a'), pod('vllm-1', 'vllm-b'), pod('vllm-2', 'vllm-b', ready=False)]
    target = k8s_target(sts(strategy='OnDelete', ready=3), [], pods, namespace='ns', kind='StatefulSet')
    assert target['rollout']['unfinished'] is False
    assert target['restart']['strategy'] == 'OnDelete' and target['restart']['partition'] is None
    assert target['restart']['updated'] == ['vllm-1']


def test_the_cache_on_a_volume_claim_template_is_every_pods_own():
    pods = [pod('vllm-1'), pod('vllm-0')]
    target = k8s_target(sts(), [], pods, namespace='ns', kind='StatefulSet', cache_path='token_cache.db')
    reach = target['cache_reach']
    assert (reach['strategy'], reach['inspect'], reach['purge']) == ('per_pod', ['vllm-0', 'vllm-1'],
                                                                     ['vllm-0', 'vllm-1'])
    assert reach['problem'] is None and reach['location'] == '/data/token_cache.db'


def test_a_statefulset_an_operator_controls_is_refused():
    owner = {'apiVersion': 'leaderworkerset.x-k8s.io/v1', 'kind': 'LeaderWorkerSet', 'name': 'lws', 'uid': 'l1',
             'controller': True}
    target = k8s_target(sts(owner=owner), [], [pod('vllm-0')], namespace='ns', kind='StatefulSet')
    assert target['refused'].startswith('StatefulSet vllm in namespace ns is controlled by LeaderWorkerSet lws')


def test_a_statefulsets_pods_name_its_kind():
    target = k8s_target(None, [], [pod('vllm-0'), pod('vllm-1')], namespace='ns', kind='auto')
    assert (target['kind'], target['resource'], target['workloads']) == ('StatefulSet', 'statefulsets', ['vllm'])


@pytest.mark.parametrize('pods, ready', [
    ([pod('vllm-0', uid='s1')], True),  # a new pod (uid-vllm-0, not old-uid), ready at the update revision
    ([dict(pod('vllm-0'), metadata=dict(pod('vllm-0')['metadata'], uid='old-uid'))], False),  # the same pod still
    ([pod('vllm-0', revision='vllm-a')], False),  # back at the old revision
    ([pod('vllm-0', ready=False)], False),  # not ready yet
    ([pod('vllm-1')], False),  # not back at all
])
def test_a_replaced_pod_is_back_when_a_new_pod_of_its_name_is_ready_at_the_update_revision(pods, ready):
    target = k8s_target({'resources': [sts(strategy='OnDelete')]}, [], pods, namespace='ns', kind='StatefulSet')
    assert replacement_ready(target, 'vllm-0', 'old-uid') is ready
