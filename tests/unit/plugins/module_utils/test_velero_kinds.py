"""The readiness audit and the Velero exclusion on a StatefulSet and a LeaderWorkerSet: the pod templates judged and
patched (a LeaderWorkerSet's worker and leader templates), the PVCs of a volumeClaimTemplates claim (one per pod,
<claim>-<pod>) labelled and judged, and a claim whose PVCs are not found named, never passed."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.module_utils._dr_audit import verdict
from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import (
    CACHE_LABEL, EXCLUDES, OURS, VeleroError, claim_pvcs, exclusion_plan, skip_rule)

from harness.k8s_objects import CACHE, config_map

CLAIM = {'metadata': {'name': 'data'}, 'spec': {'accessModes': ['ReadWriteOnce']}}


def template(mounts_cache=True, annotations=None):
    mounts = [{'name': 'data', 'mountPath': '/var/lib/vllm'}] if mounts_cache else []
    return {'metadata': {'labels': {'app': 'vllm'}, 'annotations': dict(annotations or {})},
            'spec': {'containers': [{'name': 'vllm', 'volumeMounts': mounts}], 'volumes': []}}


def statefulset(annotations=None):
    return {'metadata': {'name': 'vllm'},
            'spec': {'template': template(annotations=annotations), 'volumeClaimTemplates': [CLAIM]}}


def lws(leader=True, worker_mounts=True, annotations=None):
    spec = {'workerTemplate': template(worker_mounts, annotations), 'volumeClaimTemplates': [CLAIM]}
    if leader:
        spec['leaderTemplate'] = template(True, annotations)
    return {'metadata': {'name': 'vllm'}, 'spec': {'replicas': 2, 'leaderWorkerTemplate': spec}}


def pvc(name, labels=None):
    return {'metadata': {'name': name, 'labels': labels or {}}, 'spec': {}, 'status': {'phase': 'Bound'}}


def test_a_statefulsets_claim_is_labelled_on_every_pods_pvc_and_its_template_annotated():
    pvcs = [pvc('data-vllm-0'), pvc('data-vllm-1'), pvc('data-other-0'), pvc('data-vllm-canary-0')]
    plan = exclusion_plan([statefulset({EXCLUDES: 'scratch'})], pvcs, [], cache_path=CACHE, kind='StatefulSet')
    assert plan['volume']['type'] == 'volumeClaimTemplate' and plan['volume']['claim'] == 'data'
    assert [claim['name'] for claim in plan['claims']] == ['data-vllm-0', 'data-vllm-1']
    assert all(claim['patch'] == {CACHE_LABEL: 'true'} for claim in plan['claims'])
    assert plan['workload_patch'] == {'spec': {'template': {'metadata': {'annotations': {
        EXCLUDES: 'scratch,data', OURS: 'data'}}}}}
    assert plan['policy']['action'] == 'create'
    assert 'StatefulSet vllm pod template, %s: scratch -> scratch,data' % EXCLUDES in plan['diff'][0]


def test_a_leaderworkersets_templates_that_mount_the_cache_are_patched_in_one_merge_patch():
    pvcs = [pvc(name) for name in ('data-vllm-0', 'data-vllm-0-1', 'data-vllm-1', 'data-vllm-1-1')]
    plan = exclusion_plan([lws()], pvcs, [], cache_path=CACHE, kind='LeaderWorkerSet')
    templates = plan['workload_patch']['spec']['leaderWorkerTemplate']
    assert set(templates) == {'workerTemplate', 'leaderTemplate'}
    assert [claim['name'] for claim in plan['claims']] == [item['metadata']['name'] for item in pvcs]
    # a worker template that does not mount the cache is left alone
    plan = exclusion_plan([lws(worker_mounts=False)], pvcs, [], cache_path=CACHE, kind='LeaderWorkerSet')
    assert set(plan['workload_patch']['spec']['leaderWorkerTemplate']) == {'leaderTemplate'}


def test_absent_takes_out_only_what_was_added_from_every_template_and_pvc():
    pvcs = [pvc('data-vllm-0'), pvc('data-vllm-0-1')]
    added = exclusion_plan([lws()], pvcs, [], cache_path=CACHE, kind='LeaderWorkerSet')
    hardened = copy.deepcopy(lws())
    for key in ('workerTemplate', 'leaderTemplate'):
        hardened['spec']['leaderWorkerTemplate'][key]['metadata']['annotations'].update(
            added['workload_patch']['spec']['leaderWorkerTemplate'][key]['metadata']['annotations'])
    labelled = [pvc(item['metadata']['name'], {CACHE_LABEL: 'true', 'keep': 'me'}) for item in pvcs]
    plan = exclusion_plan([hardened], labelled, [config_map([skip_rule()], name='vllm-dr-token-cache')],
                          cache_path=CACHE, present=False, kind='LeaderWorkerSet')
    for key in ('workerTemplate', 'leaderTemplate'):
        assert plan['workload_patch']['spec']['leaderWorkerTemplate'][key]['metadata']['annotations'] == {
            EXCLUDES: None, OURS: None}
    assert [claim['patch'] for claim in plan['claims']] == [{CACHE_LABEL: None}] * 2


def test_claim_pvcs_are_the_pods_own_by_name():
    names = ['data-vllm-0', 'data-vllm-10', 'data-vllm-1-2', 'data-vllmx-0', 'data-vllm-a', 'other-vllm-0']
    found = [item['metadata']['name'] for item in claim_pvcs([pvc(n) for n in names], 'data', 'vllm', 'StatefulSet')]
    assert found == ['data-vllm-0', 'data-vllm-10']
    objects = [pvc(n) for n in names]
    found = [item['metadata']['name'] for item in claim_pvcs(objects, 'data', 'vllm', 'LeaderWorkerSet')]
    assert found == ['data-vllm-0', 'data-vllm-1-2', 'data-vllm-10']


def test_an_unsupported_kind_is_named():
    with pytest.raises(VeleroError, match='workload kind DaemonSet is not supported'):
        exclusion_plan([statefulset()], [], [], cache_path=CACHE, kind='DaemonSet')


def audit_facts(workload, kind, pvcs, policies=()):
    vllm_yaml = yaml.safe_dump({'session_state_store': {'refresh_on_startup': True}})
    return {'platform': 'kubernetes', 'kind': kind, 'workloads': [workload], 'pvcs': pvcs,
            'config_maps': [{'metadata': {'name': 'vllm-config'}, 'data': {'vllm.yaml': vllm_yaml}}],
            'velero_config_maps': list(policies), 'selector': 'app=vllm', 'workload': '', 'container': 'vllm',
            'cache': {'path': CACHE}, 'rules': None, 'store': {'backend': ''},
            'probe': {'refresh_url': 'http://x', 'session': 'svc', 'found': True}}


def p3(result):
    return next(item for item in result['items'] if item['id'] == 'cache_outside_snapshots')


def test_the_audit_judges_every_pods_pvc_of_the_claim_and_names_a_claim_without_pvcs():
    pvcs = [pvc('data-vllm-0', {CACHE_LABEL: 'true'}), pvc('data-vllm-1')]
    workload = statefulset({EXCLUDES: 'data'})
    item = p3(verdict(audit_facts(workload, 'StatefulSet', pvcs, [config_map([skip_rule()])])))
    assert item['status'] == 'fail'
    assert 'snapshot backups include PVC data-vllm-1;' in item['detail']
    item = p3(verdict(audit_facts(workload, 'StatefulSet', [])))
    assert item['status'] == 'fail' and 'no PersistentVolumeClaim of volumeClaimTemplates claim data' in item['detail']
    labelled = [pvc(name, {CACHE_LABEL: 'true'}) for name in ('data-vllm-0', 'data-vllm-1')]
    assert p3(verdict(audit_facts(workload, 'StatefulSet', labelled, [config_map([skip_rule()])])))['status'] == 'pass'


def test_the_audit_judges_each_leaderworkerset_template_on_its_own():
    labelled = [pvc('data-vllm-0', {CACHE_LABEL: 'true'})]
    workload = lws()
    workload['spec']['leaderWorkerTemplate']['workerTemplate']['metadata']['annotations'] = {EXCLUDES: 'data'}
    result = verdict(audit_facts(workload, 'LeaderWorkerSet', labelled, [config_map([skip_rule()])]))
    assert p3(result)['status'] == 'fail'
    assert ('file-system backups include volume data (volumeClaimTemplate) (LeaderWorkerSet vllm '
            'spec.leaderWorkerTemplate.leaderTemplate)') in p3(result)['detail']
    hook = next(item for item in result['items'] if item['id'] == 'restore_hook')
    assert hook['status'] == 'fail' and 'spec.leaderWorkerTemplate.workerTemplate has no init container' in hook['detail']
