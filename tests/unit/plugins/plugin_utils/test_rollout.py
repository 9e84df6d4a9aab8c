"""A rollout is complete exactly when kubectl rollout status would say so."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    new_replicaset_hash,
    rollout_complete,
    rollout_status,
)


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
