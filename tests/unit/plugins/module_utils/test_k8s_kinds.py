"""Where each workload kind keeps its pod templates and claims (module_utils/_k8s_kinds.py)."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_kinds import (
    POD_TEMPLATES, claims_of, pod_template, present_templates)

WORKER = {'metadata': {'labels': {'role': 'worker'}}}
LEADER = {'metadata': {'labels': {'role': 'leader'}}}
CLAIM = {'metadata': {'name': 'data'}}


def lws(leader=None):
    template = {'size': 2, 'workerTemplate': WORKER, 'volumeClaimTemplates': [CLAIM, 'not a claim']}
    if leader:
        template['leaderTemplate'] = leader
    return {'spec': {'leaderWorkerTemplate': template}}


def test_a_leaderworkerset_s_leaders_use_the_worker_template_unless_it_has_a_leader_template():
    assert pod_template(lws(), 'LeaderWorkerSet', 'leader') is WORKER
    assert pod_template(lws(LEADER), 'LeaderWorkerSet', 'leader') is LEADER
    assert pod_template(lws(LEADER), 'LeaderWorkerSet') is WORKER
    assert [keys[-1] for keys, _template in present_templates(lws(), 'LeaderWorkerSet')] == ['workerTemplate']
    assert [keys[-1] for keys, _template in present_templates(lws(LEADER), 'LeaderWorkerSet')] == [
        'workerTemplate', 'leaderTemplate']


def test_claims_are_a_statefulset_s_and_a_leaderworkerset_s_never_a_deployment_s():
    assert claims_of(lws(), 'LeaderWorkerSet') == [CLAIM]
    assert claims_of({'spec': {'volumeClaimTemplates': [CLAIM]}}, 'StatefulSet') == [CLAIM]
    assert claims_of({'spec': {'volumeClaimTemplates': [CLAIM]}}, 'Deployment') == []


def test_a_workload_without_a_spec_has_an_empty_first_template():
    for kind in POD_TEMPLATES:
        assert pod_template(None, kind) == {} and pod_template({'spec': 'x'}, kind) == {}
        assert claims_of({}, kind) == []
