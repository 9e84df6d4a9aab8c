"""One copy of the token cache per volume, not per pod: which pods the runbook reads and purges it in."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach

PODS = [{'metadata': {'name': f'vllm-{index}'}, 'spec': {'nodeName': f'node-{index % 2}'}} for index in range(6)]
NAMES = [pod['metadata']['name'] for pod in PODS]


def deployment(volume: dict | None, mount_path='/var/lib/vllm', working_dir=None, **mount):
    container = {'name': 'vllm', 'volumeMounts': [{'name': 'config', 'mountPath': '/etc/vllm'}]}
    if volume is not None:
        container['volumeMounts'].append(dict({'name': 'data', 'mountPath': mount_path}, **mount))
    if working_dir:
        container['workingDir'] = working_dir
    volumes = [{'name': 'config', 'configMap': {'name': 'vllm-config'}}]
    volumes += [dict({'name': 'data'}, **volume)] if volume is not None else []
    return {'spec': {'template': {'spec': {'containers': [{'name': 'sidecar'}, container], 'volumes': volumes}}}}


def reach(volume, cache_path='/var/lib/vllm/token_cache.db', **kwargs):
    return cache_reach(deployment(volume, **kwargs), PODS, cache_path, 'vllm')


@pytest.mark.parametrize('volume', [{'persistentVolumeClaim': {'claimName': 'vllm-pvc'}}, {'nfs': {'path': '/x'}}])
def test_a_volume_every_replica_shares_is_read_and_purged_once(volume):
    decided = reach(volume)
    assert decided['strategy'] == 'shared'
    assert decided['inspect'] == decided['purge'] == ['vllm-0']
    assert decided['volume'] == 'data'


@pytest.mark.parametrize('volume', [{'emptyDir': {}}, {'ephemeral': {'volumeClaimTemplate': {}}}])
def test_a_cache_that_dies_with_its_pod_is_purged_by_the_restart_alone(volume):
    decided = reach(volume)
    assert decided['strategy'] == 'restart'
    assert decided['purge'] == []
    assert decided['inspect'] == ['vllm-0']  # evidence of what the restart discards


def test_a_cache_on_the_container_file_system_is_purged_by_the_restart():
    decided = reach({'persistentVolumeClaim': {'claimName': 'x'}}, cache_path='/opt/cache/token_cache.db')
    assert decided['strategy'] == 'restart' and decided['volume'] is None and decided['purge'] == []


def test_a_host_path_is_purged_once_per_node():
    decided = reach({'hostPath': {'path': '/srv/vllm'}})
    assert decided['strategy'] == 'per_node'
    assert decided['purge'] == ['vllm-0', 'vllm-1']


@pytest.mark.parametrize('kwargs', [
    {'volume': {'csi': {'driver': 'x'}}},                                        # a kind the decision does not know
    {'volume': {'persistentVolumeClaim': {'claimName': 'x'}}, 'subPathExpr': '$(POD_NAME)'},  # a directory per pod
])
def test_anything_else_is_read_and_purged_in_every_pod(kwargs):
    decided = reach(**kwargs)
    assert decided['strategy'] == 'per_pod'
    assert decided['inspect'] == decided['purge'] == NAMES


def test_a_relative_cache_path_without_a_working_dir_is_refused_not_guessed():
    decided = reach({'persistentVolumeClaim': {'claimName': 'x'}}, cache_path='token_cache.db')
    assert decided['strategy'] == 'unresolved' and decided['inspect'] == decided['purge'] == []
    assert decided['problem'].startswith('vllm_dr_cache_path token_cache.db is relative and container vllm of '
                                         'Deployment ? names no workingDir')
    assert '\n' not in decided['problem']


def test_a_relative_cache_path_is_resolved_against_the_working_dir():
    decided = reach({'emptyDir': {}}, cache_path='token_cache.db', working_dir='/var/lib/vllm')
    assert decided['strategy'] == 'restart' and decided['volume'] == 'data'


def test_the_deepest_mount_above_the_cache_decides():
    spec = deployment({'persistentVolumeClaim': {'claimName': 'x'}}, mount_path='/var/lib')
    spec['spec']['template']['spec']['containers'][1]['volumeMounts'].append({'name': 'scratch', 'mountPath': '/var/lib/vllm'})
    spec['spec']['template']['spec']['volumes'].append({'name': 'scratch', 'emptyDir': {}})
    decided = cache_reach(spec, PODS, '/var/lib/vllm/token_cache.db', 'vllm')
    assert decided['strategy'] == 'restart' and decided['volume'] == 'scratch'


def test_a_mount_path_that_only_shares_a_prefix_does_not_hold_the_cache():
    decided = reach({'persistentVolumeClaim': {'claimName': 'x'}}, mount_path='/var/lib/vl')
    assert decided['strategy'] == 'restart' and decided['volume'] is None


def test_a_cache_the_restart_purges_needs_no_backup_directory_on_its_volume():
    """Nothing is deleted inside the pods (the restart replaces the emptyDir): a backup directory set for the runs on a
    persistent volume, elsewhere in the pod, is no reason to refuse."""
    decided = cache_reach(deployment({'emptyDir': {}}), PODS, '/var/lib/vllm/token_cache.db', 'vllm',
                          pod_backup_dir='/srv/backups')
    assert decided['strategy'] == 'restart' and decided['problem'] is None and decided['backup_dir'] is None
    # read and purged in every pod when asked: then the backups must be on the cache's volume
    decided = cache_reach(deployment({'emptyDir': {}}), PODS, '/var/lib/vllm/token_cache.db', 'vllm',
                          pod_backup_dir='/srv/backups', mode='every_pod')
    assert decided['problem'].startswith('vllm_dr_k8s_pod_backup_dir /srv/backups is not on volume data')


@pytest.mark.parametrize(('volume', 'mode', 'own'), [
    ({'emptyDir': {}}, 'every_pod', True),                                        # each pod's own, gone with it
    ({'hostPath': {'path': '/srv/vllm'}}, 'auto', True),                          # one pod per node
    ({'hostPath': {'path': '/srv/vllm'}}, 'every_pod', False),                    # two pods of a node: one file
    ({'persistentVolumeClaim': {'claimName': 'vllm-pvc'}}, 'every_pod', False),   # one claim for every pod
    ({'nfs': {'path': '/x'}}, 'auto', False),
    ({'csi': {'driver': 'x'}}, 'auto', False),                                    # not known to be per pod
])
def test_pods_are_purged_at_the_same_time_only_where_each_holds_a_copy_of_its_own(volume, mode, own):
    decided = cache_reach(deployment(volume), PODS, '/var/lib/vllm/token_cache.db', 'vllm', mode=mode)
    assert decided['own_copies'] is own, decided


def test_a_claim_per_pod_is_a_copy_of_its_own():
    statefulset = deployment({'persistentVolumeClaim': {'claimName': 'unused'}})
    statefulset['spec']['volumeClaimTemplates'] = [{'metadata': {'name': 'data'}}]
    decided = cache_reach(statefulset, PODS, '/var/lib/vllm/token_cache.db', 'vllm', kind='StatefulSet')
    assert decided['strategy'] == 'per_pod' and decided['purge'] == NAMES and decided['own_copies'] is True
