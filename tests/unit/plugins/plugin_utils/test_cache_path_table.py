"""Where the token cache really is, for every way vLLM charts and users mount it: file subPath, directory subPath,
subPathExpr, a relative path with and without workingDir, emptyDir, PVC, hostPath, a read-only root file system;
and how each purge method reaches it (exec, the init container on the same subPath, the restart), with its backups
on the cache's own volume. A case that cannot be resolved or reached is one line, never a guess."""

from __future__ import annotations

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._cache_path import (
    CachePathError, holding_mount, resolve)
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach

PVC = {'persistentVolumeClaim': {'claimName': 'vllm-pvc'}}
EMPTY_DIR = {'emptyDir': {}}
HOST_PATH = {'hostPath': {'path': '/srv/vllm'}}
PODS = [{'metadata': {'name': 'vllm-a'}, 'spec': {'nodeName': 'n1'}},
        {'metadata': {'name': 'vllm-b'}, 'spec': {'nodeName': 'n1'}}]


def deployment(mounts, volume=None, working_dir=None, read_only_root=False, env=None):
    volume = PVC if volume is None else volume
    container = {'name': 'vllm', 'volumeMounts': [{'name': 'config', 'mountPath': '/etc/vllm'}] + mounts}
    if working_dir:
        container['workingDir'] = working_dir
    if read_only_root:
        container['securityContext'] = {'readOnlyRootFilesystem': True}
    if env:
        container['env'] = env
    volumes = [{'name': 'config', 'configMap': {'name': 'vllm-config'}}, dict({'name': 'data'}, **volume)]
    return {'metadata': {'name': 'vllm'},
            'spec': {'template': {'spec': {'containers': [{'name': 'sidecar'}, container], 'volumes': volumes}}}}


def decide(spec, cache_path, method='exec', backups=''):
    return cache_reach(spec, PODS, cache_path, 'vllm', method=method, pod_backup_dir=backups)


# (case, mounts, volume, workingDir, cache path, location, path in the volume, strategy,
#  exec: the backup dir (.../.vllm_dr_backups) or the refusal's start, init_container: the init container's mount or the refusal's start)
TABLE = [
    ('directory mount, PVC', [{'name': 'data', 'mountPath': '/var/lib/vllm'}], PVC, None,
     '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', 'token_cache.db', 'shared',
     '/var/lib/vllm/.vllm_dr_backups', {'name': 'data', 'mountPath': '/var/lib/vllm'}),
    ('file subPath, PVC', [{'name': 'data', 'mountPath': '/var/cache/vllm/token_cache.db', 'subPath': 'token_cache.db'}],
     PVC, None, '/var/cache/vllm/token_cache.db', '/var/cache/vllm/token_cache.db', 'token_cache.db', 'shared',
     '/var/cache/vllm/token_cache.db is itself the mount point of volume data (subPath token_cache.db)',
     {'name': 'data', 'mountPath': '/var/cache/vllm'}),
    ('file subPath in a directory of the volume', [{'name': 'data', 'mountPath': '/cache/t.db', 'subPath': 'a/b/t.db'}],
     PVC, None, '/cache/t.db', '/cache/t.db', 'a/b/t.db', 'shared',
     '/cache/t.db is itself the mount point', {'name': 'data', 'mountPath': '/cache', 'subPath': 'a/b'}),
    ('directory subPath with workingDir', [{'name': 'data', 'mountPath': '/srv/vllm', 'subPath': 'cache'}], PVC,
     '/srv/vllm', 'token_cache.db', '/srv/vllm/token_cache.db', 'cache/token_cache.db', 'shared',
     '/srv/vllm/.vllm_dr_backups', {'name': 'data', 'mountPath': '/srv/vllm', 'subPath': 'cache'}),
    ('relative path under workingDir, read-only root', [{'name': 'data', 'mountPath': '/work'}], PVC, '/work',
     'cache/../token_cache.db', '/work/token_cache.db', 'token_cache.db', 'shared',
     '/work/.vllm_dr_backups', {'name': 'data', 'mountPath': '/work'}),
    ('subPathExpr', [{'name': 'data', 'mountPath': '/var/lib/vllm', 'subPathExpr': '$(POD_NAME)'}], PVC, None,
     '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', '$(POD_NAME)/token_cache.db', 'per_pod',
     '/var/lib/vllm/.vllm_dr_backups', {'name': 'data', 'mountPath': '/var/lib/vllm', 'subPathExpr': '$(POD_NAME)'}),
    # the restart purges it: nothing is deleted inside the pods by exec, so no backup directory there
    ('emptyDir', [{'name': 'data', 'mountPath': '/var/lib/vllm'}], EMPTY_DIR, None,
     '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', 'token_cache.db', 'restart',
     None, {'name': 'data', 'mountPath': '/var/lib/vllm'}),
    ('hostPath, file subPath', [{'name': 'data', 'mountPath': '/var/lib/vllm/token_cache.db', 'subPath': 'x.db'}],
     HOST_PATH, None, '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', 'x.db', 'per_node',
     '/var/lib/vllm/token_cache.db is itself the mount point', {'name': 'data', 'mountPath': '/var/lib/vllm'}),
    ('read-only mount', [{'name': 'data', 'mountPath': '/var/lib/vllm', 'readOnly': True}], PVC, None,
     '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', 'token_cache.db', 'shared',
     'volume data is mounted read-only at /var/lib/vllm in container vllm', {'name': 'data', 'mountPath': '/var/lib/vllm'}),
    ('a prefix is not a directory above', [{'name': 'data', 'mountPath': '/var/lib/vl'}], PVC, None,
     '/var/lib/vllm/token_cache.db', '/var/lib/vllm/token_cache.db', None, 'restart',
     None, 'container vllm mounts no volume that holds /var/lib/vllm/token_cache.db'),
]


@pytest.mark.parametrize('case', TABLE, ids=[row[0] for row in TABLE])
@pytest.mark.parametrize('read_only_root', [False, True])
def test_the_cache_is_found_where_the_container_sees_it_and_reached_by_each_method(case, read_only_root):
    mounts, volume, working_dir, cache_path, location, inside, strategy, by_exec, by_init = case[1:]
    env = [{'name': 'POD_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.name'}}}]
    spec = deployment(mounts, volume, working_dir, read_only_root, env)

    decided = decide(spec, cache_path)
    assert (decided['location'], decided['path_in_volume'], decided['strategy']) == (location, inside, strategy)
    if by_exec is None or by_exec.endswith('/.vllm_dr_backups'):
        assert decided['problem'] is None and decided['backup_dir'] == by_exec
    else:
        assert decided['problem'].startswith(by_exec) and '\n' not in decided['problem']
        assert decided['backup_dir'] is None

    decided = decide(spec, cache_path, method='init_container')
    if isinstance(by_init, dict):
        assert decided['problem'] is None, decided['problem']
        assert decided['init']['mount'] == by_init
        # the backups go beside the cache, on the volume as the init container mounts it
        assert decided['backup_dir'].startswith(by_init['mountPath'] + '/')
    else:
        assert decided['problem'].startswith(by_init) and decided['init'] is None


def test_the_init_container_carries_the_variables_its_sub_path_expr_reads():
    env = [{'name': 'OTHER', 'value': 'x'}, {'name': 'POD_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.name'}}}]
    spec = deployment([{'name': 'data', 'mountPath': '/c', 'subPathExpr': 'pods/$(POD_NAME)'}], env=env)
    assert decide(spec, '/c/t.db', method='init_container')['init']['env'] == [env[1]]
    undeclared = decide(deployment([{'name': 'data', 'mountPath': '/c', 'subPathExpr': '$(NODE)'}]), '/c/t.db',
                        method='init_container')
    assert undeclared['problem'].startswith('subPathExpr $(NODE) of volume data reads $(NODE), which container vllm '
                                            'does not declare in env')


def test_a_relative_path_without_a_working_dir_is_refused_by_every_method():
    spec = deployment([{'name': 'data', 'mountPath': '/var/lib/vllm'}])
    for method in ('exec', 'init_container', 'velero_hook'):
        decided = decide(spec, 'token_cache.db', method=method)
        assert decided['strategy'] == 'unresolved' and decided['purge'] == []
        assert decided['problem'] == (
            'vllm_dr_cache_path token_cache.db is relative and container vllm of Deployment vllm names no workingDir, '
            'so where the image starts it decides and the API server does not say; set vllm_dr_cache_path to the '
            'absolute path')


@pytest.mark.parametrize('backups, problem', [
    ('/var/lib/vllm/keep', None),
    ('/var/lib/vllm', None),
    ('/.vllm_dr_backups', 'vllm_dr_k8s_pod_backup_dir /.vllm_dr_backups is not on volume data that holds the token '
                          'cache (mounted at /var/lib/vllm)'),
    ('/etc/vllm/b', 'vllm_dr_k8s_pod_backup_dir /etc/vllm/b is not on volume data'),
    ('keep', 'vllm_dr_k8s_pod_backup_dir keep is not an absolute path'),
])
def test_backups_stay_on_the_cache_volume_never_on_the_container_root(backups, problem):
    spec = deployment([{'name': 'data', 'mountPath': '/var/lib/vllm'}])
    for method in ('exec', 'init_container'):
        decided = decide(spec, '/var/lib/vllm/token_cache.db', method=method, backups=backups)
        if problem is None:
            assert decided['problem'] is None and decided['backup_dir'] == backups
        else:
            assert decided['problem'].startswith(problem), decided['problem']


def test_a_volume_read_only_at_its_source_is_refused_for_the_init_container_too():
    spec = deployment([{'name': 'data', 'mountPath': '/c'}], volume={'persistentVolumeClaim': {'claimName': 'p',
                                                                                               'readOnly': True}})
    assert decide(spec, '/c/t.db', method='init_container')['problem'].startswith(
        'persistentVolumeClaim volume data that holds /c/t.db is read-only')
    assert decide(spec, '/c/t.db')['problem'].startswith('volume data is mounted read-only at /c')


def test_the_longest_mount_by_path_components_holds_the_cache_not_the_longest_string():
    mounts = [{'name': 'a', 'mountPath': '/var/lib/vllm-data-and-more'}, {'name': 'b', 'mountPath': '/var/lib/vllm/'},
              {'name': 'c', 'mountPath': '/'}]
    assert holding_mount(mounts, '/var/lib/vllm/t.db')['name'] == 'b'
    assert holding_mount(mounts, '/var/lib/vllm')['name'] == 'b'
    assert holding_mount(mounts, '/opt/t.db')['name'] == 'c'


def test_a_mount_of_a_volume_the_pod_does_not_declare_is_refused():
    spec = deployment([{'name': 'gone', 'mountPath': '/c'}])['spec']['template']['spec']
    with pytest.raises(CachePathError, match='mounts volume gone at /c, but the pod template has no volume of that'):
        resolve(spec, 'vllm', '/c/t.db')
