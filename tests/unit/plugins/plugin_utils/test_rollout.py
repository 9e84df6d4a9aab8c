"""A rollout is complete exactly when kubectl rollout status would say so."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    new_replicaset_hash,
    old_pods,
    rollout_complete,
    rollout_status,
)
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target


def rollout_unfinished(deployment_read, pods, replicasets):
    return k8s_target(deployment_read, replicasets, pods, namespace='vllm')['rollout']['unfinished']


def deployment(generation=3, observed=3, wanted=2, replicas=2, updated=2, available=2, conditions=None):
    return {'metadata': {'generation': generation, 'uid': 'u1',
                         'annotations': {'deployment.kubernetes.io/revision': '4'}},
            'spec': {'replicas': wanted},
            'status': {'observedGeneration': observed, 'replicas': replicas, 'updatedReplicas': updated,
                       'availableReplicas': available, 'conditions': conditions or []}}


def test_rollout_complete_when_every_count_caught_up():
    assert rollout_complete(deployment())


@pytest.mark.parametrize('change', [
    {'observed': 2},                 # the controller has not seen the restart yet
    {'updated': 1},                  # one replica still on the old template
    {'replicas': 3},                 # an old pod still counted (surge)
    {'available': 1},                # a new pod not available yet
])
def test_rollout_not_complete_while_any_count_lags(change):
    assert not rollout_complete(deployment(**change))


def test_rollout_status_names_counts_and_conditions():
    message = rollout_status(deployment(observed=2, updated=1, replicas=3, available=2, conditions=[
        {'type': 'Progressing', 'status': 'False', 'reason': 'ProgressDeadlineExceeded',
         'message': 'ReplicaSet "vllm-7c9" has timed out progressing.'}]))
    assert message == ('updated 1/2, available 2/2, replicas 3 (old ones included), generation 3 not yet observed '
                       '(controller at 2); conditions: Progressing=False (ProgressDeadlineExceeded: '
                       'ReplicaSet "vllm-7c9" has timed out progressing.)')


def test_new_replicaset_hash_is_the_one_at_the_deployment_revision_and_owned_by_it():
    def replicaset(revision, template_hash, owner='u1'):
        return {'metadata': {'annotations': {'deployment.kubernetes.io/revision': revision},
                             'labels': {'pod-template-hash': template_hash},
                             'ownerReferences': [{'kind': 'Deployment', 'uid': owner}]}}
    sets = [replicaset('3', 'old'), replicaset('4', 'other', owner='u2'), replicaset('4', 'new')]
    assert new_replicaset_hash(sets, deployment()) == 'new'
    assert new_replicaset_hash(sets[:2], deployment()) is None


def replicaset_of(uid, revision, template_hash, owner='u1'):
    return {'metadata': {'uid': uid, 'annotations': {'deployment.kubernetes.io/revision': revision},
                         'labels': {'pod-template-hash': template_hash},
                         'ownerReferences': [{'kind': 'Deployment', 'uid': owner}]}}


def pod_of(name, replicaset_uid, template_hash):
    return {'metadata': {'name': name, 'labels': {'pod-template-hash': template_hash},
                         'ownerReferences': [{'kind': 'ReplicaSet', 'uid': replicaset_uid}]},
            'status': {'phase': 'Running'}}


SETS = [replicaset_of('rs3', '3', 'old'), replicaset_of('rs4', '4', 'new'), replicaset_of('rsc', '1', 'cnry', 'u2')]
NEW_PODS = [pod_of('vllm-new-b', 'rs4', 'new'), pod_of('vllm-new-a', 'rs4', 'new'), pod_of('canary-a', 'rsc', 'cnry')]
OLD_POD = pod_of('vllm-old-a', 'rs3', 'old')


def test_old_pods_are_the_deployments_own_not_of_its_current_replicaset():
    assert old_pods(NEW_PODS, SETS, deployment()) == []                      # the canary's pod is not "old"
    assert old_pods(NEW_PODS + [OLD_POD], SETS, deployment()) == ['vllm-old-a']
    # no ReplicaSet at the Deployment's revision yet: every pod of the Deployment is still to be replaced
    assert old_pods(NEW_PODS, SETS[:1], deployment()) == []                  # rs4 unknown: its pods are not owned
    assert old_pods([OLD_POD], SETS[:1], deployment()) == ['vllm-old-a']


def test_a_rollout_is_unfinished_while_it_runs_or_when_it_ran_since_the_pods_were_read():
    assert not rollout_unfinished(deployment(), NEW_PODS, SETS)
    assert rollout_unfinished(deployment(updated=1), NEW_PODS, SETS)          # still running
    assert rollout_unfinished(deployment(), NEW_PODS + [OLD_POD], SETS)       # complete, but the pods read are stale


def test_a_paused_deployment_is_not_waited_for():
    paused = deployment(updated=1)
    paused['spec']['paused'] = True
    assert not rollout_unfinished(paused, NEW_PODS + [OLD_POD], SETS)
