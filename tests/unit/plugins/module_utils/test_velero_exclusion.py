"""The Velero exclusion's decisions: the cache's volume, the excludes annotation merged with the operator's, the
resource policy merged with theirs, and whether an existing policy skips the cache's PVC."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import (
    CACHE_LABEL, EXCLUDES, OURS, VeleroError, annotation_patch, cache_volume, deployment_for, exclusion_plan,
    policy_plan, policy_skips, restore_purge, skip_rule)

from harness.k8s_objects import CACHE, config_map, deployment, pvc


def rules_of(plan):
    return yaml.safe_load(next(iter(plan['definition']['data'].values())))['volumePolicies']


def test_the_cache_volume_is_the_deepest_mount_that_holds_the_cache():
    assert cache_volume(deployment(), 'vllm', CACHE) == {
        'name': 'vllm-data', 'type': 'persistentVolumeClaim', 'mount_path': '/var/lib/vllm/', 'claim': 'vllm-pvc',
        'sub_path': None, 'path_in_volume': 'token_cache.db', 'location': CACHE}
    assert cache_volume(deployment(), 'vllm', '/opt/cache.db') is None


def test_a_missing_container_is_named():
    with pytest.raises(VeleroError, match='no container sidecar; set vllm_dr_k8s_container'):
        cache_volume(deployment(), 'sidecar', CACHE)


def test_the_deployment_is_the_named_one_or_the_one_whose_pods_the_selector_selects():
    ours, other = deployment(), deployment(name='canary', labels={'app': 'canary'})
    assert deployment_for([other, ours], 'app=vllm')['metadata']['name'] == 'vllm'
    assert deployment_for([other, ours], 'app=vllm', 'canary')['metadata']['name'] == 'canary'
    with pytest.raises(VeleroError, match='2 Deployments run pods that match app=vllm'):
        deployment_for([ours, deployment(name='twin')], 'app=vllm')
    with pytest.raises(VeleroError, match='Deployment gone not found'):
        deployment_for([ours], 'app=vllm', 'gone')


def test_the_annotation_keeps_the_operators_entries_and_records_ours():
    change = annotation_patch({EXCLUDES: 'scratch, tmp'}, 'vllm-data', present=True)
    assert change['patch'] == {EXCLUDES: 'scratch,tmp,vllm-data', OURS: 'vllm-data'}
    assert (change['before'], change['after'], change['changed']) == ('scratch,tmp', 'scratch,tmp,vllm-data', True)


def test_the_annotation_is_idempotent_both_ways():
    applied = {EXCLUDES: 'scratch,vllm-data', OURS: 'vllm-data'}
    assert annotation_patch(applied, 'vllm-data', present=True)['changed'] is False
    assert annotation_patch({EXCLUDES: 'scratch'}, 'vllm-data', present=False)['changed'] is False
    assert annotation_patch({}, 'vllm-data', present=False)['changed'] is False


def test_removal_takes_out_only_what_this_collection_added():
    assert annotation_patch({EXCLUDES: 'scratch,vllm-data,logs', OURS: 'vllm-data'}, 'vllm-data',
                            present=False)['patch'] == {EXCLUDES: 'scratch,logs', OURS: None}
    # the operator listed the cache's volume before: it is theirs, and stays both ways
    assert annotation_patch({EXCLUDES: 'vllm-data'}, 'vllm-data', present=True)['patch'] == {}
    assert annotation_patch({EXCLUDES: 'vllm-data'}, 'vllm-data', present=False)['patch'] == {}
    # nothing else left: the annotation goes
    assert annotation_patch({EXCLUDES: 'vllm-data', OURS: 'vllm-data'}, 'vllm-data',
                            present=False)['patch'] == {EXCLUDES: None, OURS: None}


def test_a_new_policy_configmap_holds_the_skip_rule_and_is_marked_as_ours():
    plan = policy_plan(None, 'vllm-dr-token-cache', 'velero', present=True)
    assert plan['action'] == 'create'
    assert plan['definition']['metadata'] == {'name': 'vllm-dr-token-cache', 'namespace': 'velero',
                                              'labels': {'app.kubernetes.io/managed-by': 'inferops.vllm_dr'}}
    document = yaml.safe_load(plan['definition']['data']['policy.yaml'])
    assert document == {'version': 'v1', 'volumePolicies': [
        {'conditions': {'pvcLabels': {CACHE_LABEL: 'true'}}, 'action': {'type': 'skip'}}]}


def test_the_skip_rule_goes_first_in_the_operators_policy_and_leaves_with_theirs_kept():
    theirs = {'conditions': {'csi': {}}, 'action': {'type': 'snapshot'}}
    added = policy_plan(config_map([theirs]), 'policy', 'velero', present=True)
    assert added['action'] == 'replace' and rules_of(added) == [skip_rule(), theirs]
    applied = config_map([skip_rule(), theirs])
    assert policy_plan(applied, 'policy', 'velero', present=True)['changed'] is False
    removed = policy_plan(applied, 'policy', 'velero', present=False)
    assert removed['action'] == 'replace' and rules_of(removed) == [theirs]
    # the operator's ConfigMap is never deleted, even when nothing of theirs is left in it
    assert policy_plan(config_map([skip_rule()]), 'policy', 'velero', present=False)['action'] == 'replace'


def test_our_own_configmap_is_deleted_when_the_rule_goes_and_absent_twice_changes_nothing():
    ours = config_map([skip_rule()], labels={'app.kubernetes.io/managed-by': 'inferops.vllm_dr'})
    assert policy_plan(ours, 'policy', 'velero', present=False)['action'] == 'delete'
    assert policy_plan(None, 'policy', 'velero', present=False)['changed'] is False


def test_a_configmap_that_holds_no_policy_is_not_overwritten():
    other = {'metadata': {'name': 'policy'}, 'data': {'a': '1', 'b': '2'}}
    with pytest.raises(VeleroError, match='holds no Velero resource policy'):
        policy_plan(other, 'policy', 'velero', present=True)


def test_the_plan_decides_every_change_and_names_the_rollout():
    plan = exclusion_plan([deployment(annotations={EXCLUDES: 'scratch'})], [pvc()], [], cache_path=CACHE)
    assert plan['annotation']['patch'] == {EXCLUDES: 'scratch,vllm-data', OURS: 'vllm-data'}
    assert plan['label'] == {'patch': {CACHE_LABEL: 'true'}, 'changed': True}
    assert plan['policy']['action'] == 'create'
    assert any('this starts a rollout' in line for line in plan['diff'])
    assert plan['changed'] is True


def test_an_emptydir_cache_needs_the_annotation_only():
    plan = exclusion_plan([deployment(volume={'emptyDir': {}})], [], [], cache_path=CACHE)
    assert plan['policy'] is None and plan['label'] is None
    assert plan['notes'] == ['volume vllm-data is emptyDir, which volume snapshots never take: no resource policy needed']
    assert plan['annotation']['changed'] is True


@pytest.mark.parametrize('volume, path, message', [
    ({'hostPath': {'path': '/srv'}}, CACHE, 'Velero never backs up hostPath volumes'),
    (None, '/opt/token_cache.db', 'mounts no volume that holds /opt/token_cache.db'),
])
def test_a_cache_that_cannot_be_excluded_is_named_before_anything_changes(volume, path, message):
    with pytest.raises(VeleroError, match=message):
        exclusion_plan([deployment(volume=volume)], [], [], cache_path=path)


def test_an_unknown_exclusion_is_named():
    with pytest.raises(VeleroError, match='choose annotation, resource_policy or both'):
        exclusion_plan([deployment()], [], [], cache_path=CACHE, exclusions=['labels'])


def test_a_policy_skips_the_pvc_only_when_its_first_matching_rule_is_skip():
    labelled = pvc({CACHE_LABEL: 'true'})
    assert policy_skips([config_map([skip_rule()])], labelled) == ['velero/policy']
    assert policy_skips([config_map([skip_rule()])], pvc()) == []
    snapshot_fast = {'conditions': {'storageClass': ['fast']}, 'action': {'type': 'snapshot'}}
    assert policy_skips([config_map([snapshot_fast, skip_rule()])], labelled) == []
    # a condition the audit cannot evaluate without the PV is passed over
    csi_first = {'conditions': {'csi': {'driver': 'x'}}, 'action': {'type': 'snapshot'}}
    assert policy_skips([config_map([csi_first, skip_rule()])], labelled) == ['velero/policy']


def test_a_restore_purge_is_a_velero_restore_hook_or_an_init_container_that_purges_the_cache():
    assert restore_purge(deployment(), CACHE) == []
    hooked = deployment(annotations={'init.hook.restore.velero.io/container-name': 'purge-token-cache',
                                     EXCLUDES: 'vllm-data'})
    assert restore_purge(hooked, CACHE) == ['annotation init.hook.restore.velero.io/container-name']
    assert restore_purge(deployment(annotations={'post.hook.restore.velero.io/command': '["rm"]'}), CACHE)
    assert restore_purge(deployment(init=[{'name': 'purge-token-cache'}]), CACHE) == ['init container purge-token-cache']
    assert restore_purge(deployment(init=[{'name': 'wipe', 'command': ['rm', '-f', CACHE]}]), CACHE)
    assert restore_purge(deployment(init=[{'name': 'warm', 'command': ['true']}]), CACHE) == []


def test_the_plan_does_not_change_its_input():
    source = [deployment(annotations={EXCLUDES: 'scratch'})]
    kept = copy.deepcopy(source)
    exclusion_plan(source, [pvc()], [config_map([skip_rule()])], cache_path=CACHE, present=False)
    assert source == kept
