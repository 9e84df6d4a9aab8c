"""The restart is checked before the first change: the surge pods of the rollout must fit in what the namespace's
ResourceQuotas leave, with the LimitRanges' defaults for containers that set no request."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    quantity, restart_room, rollout_surge)


def deployment(replicas=2, surge=1, unavailable=0, resources=None, strategy='RollingUpdate'):
    container = {'name': 'vllm'}
    if resources:
        container['resources'] = resources
    return {'metadata': {'name': 'vllm'},
            'spec': {'replicas': replicas,
                     'strategy': {'type': strategy, 'rollingUpdate': {'maxSurge': surge, 'maxUnavailable': unavailable}},
                     'template': {'spec': {'containers': [container]}}}}


def quota(hard, used, name='compute', scopes=None):
    spec = {'hard': hard}
    if scopes:
        spec['scopes'] = scopes
    return {'metadata': {'name': name}, 'spec': spec, 'status': {'hard': hard, 'used': used}}


def test_a_pod_quota_with_no_room_for_the_surge_pod_is_named_with_the_way_to_make_room():
    (problem,) = restart_room(deployment(), [quota({'pods': '2'}, {'pods': '2'})], [], namespace='ns')
    assert problem == ("ResourceQuota compute in namespace ns has no room for the 1 new pod the restart of Deployment "
                       "vllm starts before it stops old ones (maxSurge 1): pods: used 2 of 2, the surge needs 1 more; "
                       "raise the quota by that much, or set the Deployment's rollingUpdate to maxSurge: 0 and "
                       "maxUnavailable: 1, then re-run")


def test_room_enough_or_no_surge_is_no_problem():
    assert restart_room(deployment(), [quota({'pods': '3'}, {'pods': '2'})], [], namespace='ns') == []
    assert restart_room(deployment(surge=0, unavailable=1), [quota({'pods': '2'}, {'pods': '2'})], [],
                        namespace='ns') == []
    assert restart_room(deployment(strategy='Recreate'), [quota({'pods': '2'}, {'pods': '2'})], [],
                        namespace='ns') == []
    # a scoped quota counts only some pods: not judged
    assert restart_room(deployment(), [quota({'pods': '2'}, {'pods': '2'}, scopes=['BestEffort'])], [],
                        namespace='ns') == []


def test_cpu_and_memory_count_requests_and_the_limit_range_defaults():
    resources = {'requests': {'cpu': '500m'}}
    limit_range = {'spec': {'limits': [{'type': 'Container', 'defaultRequest': {'memory': '1Gi'}}]}}
    quotas = [quota({'requests.cpu': '2', 'requests.memory': '3Gi'}, {'requests.cpu': '1800m', 'requests.memory': '2Gi'})]
    (problem,) = restart_room(deployment(resources=resources), quotas, [limit_range], namespace='ns')
    assert 'requests.cpu: used 1800m of 2, the surge needs 500m more' in problem
    assert 'requests.memory' not in problem  # 2Gi used + 1Gi (the LimitRange's default) fits in 3Gi
    quotas = [quota({'requests.memory': '3Gi'}, {'requests.memory': '2560Mi'})]
    (problem,) = restart_room(deployment(resources=resources), quotas, [limit_range], namespace='ns')
    assert 'requests.memory: used 2560Mi of 3Gi, the surge needs 1024Mi more' in problem


@pytest.mark.parametrize('value, expected', [('100m', 0.1), ('1Gi', 2 ** 30), ('2', 2), ('1.5', 1.5), ('1k', 1000)])
def test_quantities(value, expected):
    assert quantity(value) == pytest.approx(expected)


@pytest.mark.parametrize('replicas, surge, unavailable, expected', [
    (4, '25%', '25%', (1, 1)), (10, '25%', '25%', (3, 2)), (2, 1, 0, (1, 0)), (1, '25%', '25%', (1, 0))])
def test_the_surge_rounds_up_and_unavailable_down(replicas, surge, unavailable, expected):
    assert rollout_surge(deployment(replicas, surge, unavailable)) == expected
