"""The LeaderWorkerSet kind of the target model (plugins/plugin_utils/_k8s_lws.py) against the objects the real lws
controller makes on the suite's control plane: the groups it finds through the owner chain, the pods that hold the
cache, the rollout its restart starts judged as the controller judges it (a group as a whole), and finished once every
group is back at the new revision."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils import _k8s_lws as model
from harness.lws import delete_lws_workload, lws_pod_names, lws_ready, lws_vllm_workload
from lab.labctl import Lab
from test_kubernetes_lws_controller import wait_for

GROUPS, SIZE = 2, 3
CACHE = 'token_cache.db'


def reads(kube, namespace: str) -> tuple:
    """(the LeaderWorkerSet, the namespace's StatefulSets, its pods), as the API server lists them."""
    return (kube.get('leaderworkerset', 'vllm', namespace), kube.get('statefulsets', namespace=namespace)['items'],
            kube.get('pods', namespace=namespace)['items'])


def judged(kube, namespace: str) -> dict:
    workload, sets, pods = reads(kube, namespace)
    return model.leaderworkerset(workload, sets, pods, namespace=namespace)


def a_group_down(kube, namespace: str) -> dict | None:
    facts = judged(kube, namespace)
    return facts if not all(group['ready'] for group in facts['groups']) else None


def rolled(kube, namespace: str) -> dict | None:
    facts = judged(kube, namespace)
    return facts if facts['complete'] and not facts['old_pods'] else None


@pytest.fixture
def lws_lab(kwok, lws_controller, tmp_path):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=1)
    yield lab
    lab.down()


@pytest.mark.parametrize('cache_in', ['all', 'leader'])
def test_the_model_finds_the_real_groups_and_the_pods_that_hold_the_cache(kwok, lws_lab, cache_in):
    namespace = f'lws-{uuid.uuid4().hex[:8]}'
    try:
        kwok.apply(*lws_vllm_workload(namespace, lws_lab, GROUPS, SIZE, cache_in=cache_in))
        lws_ready(kwok, namespace, GROUPS)
        workload, sets, pods = reads(kwok, namespace)
        facts = model.leaderworkerset(workload, sets, pods, namespace=namespace)
        assert [pod['metadata']['name'] for pod in facts['pods']] == lws_pod_names(GROUPS, SIZE)
        assert [(group['index'], group['leader'], group['workers'], group['ready'], group['updated'])
                for group in facts['groups']] == [
            (group, f'vllm-{group}', [f'vllm-{group}-{worker}' for worker in range(1, SIZE)], True, True)
            for group in range(GROUPS)]
        assert (facts['complete'], facts['old_pods'], facts['restart_problems']) == (True, [], [])
        assert model.lws_owners(sets, pods) == ['vllm']
        reach = model.lws_cache_reach(workload, facts['pods'], CACHE, 'vllm')
        assert reach['problem'] is None, reach
        assert reach['holders'] == cache_in
        leaders = [f'vllm-{group}' for group in range(GROUPS)]
        expected = leaders + [pod for pod in lws_pod_names(GROUPS, SIZE) if pod not in leaders]
        assert reach['purge'] == (expected if cache_in == 'all' else leaders)
        assert reach['location'] == os.path.join(os.path.dirname(lws_lab.cache_path), CACHE)
    finally:
        delete_lws_workload(kwok, namespace, GROUPS, SIZE)


def test_the_restart_rolls_every_group_and_the_model_waits_for_each_as_a_whole(kwok, lws_lab):
    namespace = f'lws-{uuid.uuid4().hex[:8]}'
    try:
        kwok.apply(*lws_vllm_workload(namespace, lws_lab, GROUPS, SIZE, cache_in='leader', max_unavailable=1))
        before = lws_ready(kwok, namespace, GROUPS)
        uids = {pod['metadata']['name']: pod['metadata']['uid'] for pod in kwok.running_pods(namespace)}
        # no node takes a new pod: the first group the rollout recreates stays down, the rollout stays unfinished
        kwok.kubectl('cordon', 'kwok-node-0')
        try:
            patch = model.restart_patch(before, '2026-12-06T00:00:00Z')
            kwok.kubectl('-n', namespace, 'patch', 'leaderworkerset', 'vllm', '--type=merge', '-p', json.dumps(patch))
            rolling = wait_for('a group to be taken down', lambda: a_group_down(kwok, namespace))
            assert rolling['complete'] is False
            down = [group for group in rolling['groups'] if not group['ready']]
            # maxUnavailable 1: one group at a time, judged as a whole (its leader pending, its workers not there)
            assert len(down) == 1, rolling['groups']
            assert 'UpdateInProgress=True' in rolling['status'] and f"group {down[0]['index']} (" in rolling['status']
            assert rolling['old_pods'], rolling
        finally:
            kwok.kubectl('uncordon', 'kwok-node-0', check=False)
        done = wait_for('every group at the new revision', lambda: rolled(kwok, namespace), timeout=300)
        assert all(group['ready'] and group['updated'] for group in done['groups'])
        after = {pod['metadata']['name']: pod['metadata']['uid'] for pod in kwok.running_pods(namespace)}
        # the same names (stable per group and worker), every pod a new one
        assert sorted(after) == sorted(uids) and not set(after.values()) & set(uids.values())
        templates = kwok.get('leaderworkerset', 'vllm', namespace)['spec']['leaderWorkerTemplate']
        for role in ('leaderTemplate', 'workerTemplate'):
            assert templates[role]['metadata']['annotations'][model.RESTARTED] == '2026-12-06T00:00:00Z'
    finally:
        kwok.kubectl('uncordon', 'kwok-node-0', check=False)
        delete_lws_workload(kwok, namespace, GROUPS, SIZE)
