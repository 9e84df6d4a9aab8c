"""The collection's own filters for Kubernetes objects decide what the roles asked of JMESPath queries before: which pods
run, who owns them, which permissions were refused, where the cache's volume is, when Velero restored."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import restored_at
from ansible_collections.inferops.vllm_dr.plugins.module_utils._cache_path import CachePathError, resolve
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import (
    owner_names,
    pod_hosts,
)
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import running_pods


def owned(name, *owners):
    return {'metadata': {'name': name, 'ownerReferences': [{'kind': kind, 'name': owner} for kind, owner in owners]}}


def test_running_pods_leaves_out_pods_starting_finished_or_being_deleted():
    pods = [{'metadata': {'name': 'a'}, 'status': {'phase': 'Running'}},
            {'metadata': {'name': 'b'}, 'status': {'phase': 'Pending'}},
            {'metadata': {'name': 'c', 'deletionTimestamp': '2026-01-01T00:00:00Z'}, 'status': {'phase': 'Running'}},
            {'metadata': {'name': 'd'}, 'status': {'phase': 'Succeeded'}},
            {'metadata': {'name': 'e'}}]
    assert [pod['metadata']['name'] for pod in running_pods(pods)] == ['a']


def test_owner_names_are_those_of_the_kind_asked_each_once_in_the_order_met():
    objects = [owned('p1', ('ReplicaSet', 'rs-2'), ('Node', 'n')), owned('p2', ('ReplicaSet', 'rs-1')),
               owned('p3', ('ReplicaSet', 'rs-2')), {'metadata': {'name': 'p4'}}, {}]
    assert owner_names(objects, 'ReplicaSet') == ['rs-2', 'rs-1']
    assert owner_names(objects, 'Deployment') == []
    assert owner_names(None, 'ReplicaSet') == []


def test_pod_hosts_name_each_pod_after_its_target_and_share_the_common_options():
    hosts = pod_hosts(['vllm-0', 'vllm-1'], 'cluster-a/ns/', {'namespace': 'ns', 'name': 'not this'})
    assert hosts == [{'namespace': 'ns', 'name': 'cluster-a/ns/vllm-0', 'pod': 'vllm-0'},
                     {'namespace': 'ns', 'name': 'cluster-a/ns/vllm-1', 'pod': 'vllm-1'}]
    assert pod_hosts([], 'x/') == []


def container_cache_mount(containers, container_name, cache_path):
    volumes = [{'name': mount['name'], 'emptyDir': {}} for container in containers for mount in container['volumeMounts']]
    try:
        return resolve({'containers': containers, 'volumes': volumes}, container_name, cache_path)['mount']
    except CachePathError:
        return None


def test_the_cache_mount_is_the_deepest_volume_above_the_cache_of_the_named_container():
    containers = [{'name': 'sidecar', 'volumeMounts': [{'name': 'other', 'mountPath': '/data/cache'}]},
                  {'name': 'vllm', 'workingDir': '/srv',
                   'volumeMounts': [{'name': 'data', 'mountPath': '/data/'}, {'name': 'cache', 'mountPath': '/data/cache'},
                                    {'name': 'near', 'mountPath': '/data/cach'}, {'name': 'work', 'mountPath': '/srv'}]}]
    assert container_cache_mount(containers, 'vllm', '/data/cache/tokens.db')['name'] == 'cache'
    assert container_cache_mount(containers, 'vllm', '/data/tokens.db')['name'] == 'data'
    # a relative cache path is the container's working directory's
    assert container_cache_mount(containers, 'vllm', 'tokens.db')['name'] == 'work'
    # a mount is not a prefix of a path it does not hold
    assert container_cache_mount(containers, 'vllm', '/var/tokens.db') is None
    assert container_cache_mount(containers, 'absent', '/data/cache/tokens.db') is None


def test_the_restore_time_is_the_latest_finished_restore_only():
    def restore(phase, completed=None):
        return {'status': {'phase': phase, **({'completionTimestamp': completed} if completed else {})}}
    restores = [restore('Completed', '2026-03-01T10:00:00Z'), restore('PartiallyFailed', '2026-03-02T10:00:00Z'),
                restore('InProgress', '2026-03-05T10:00:00Z'), restore('Failed'), {}]
    assert restored_at(restores) == '2026-03-02T10:00:00Z'
    assert restored_at([restore('New')]) == ''
    assert restored_at(None) == ''
