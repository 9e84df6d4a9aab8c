"""The token cache is found where the container really sees it, on users' own manifests: a file mounted by subPath,
a directory subPath or subPathExpr, a relative path under workingDir, a read-only root file system. Each purge method
reaches that very file, keeps its backups on the cache's own volume, or stops in one line before any change.

kwok runs `kubectl exec` on this machine, so the container's paths are this machine's: each manifest below mounts the
lab's data directory where the lab keeps the cache, by the subPath under test, and the init container's script is run
here against the directory its mount maps to (the volume's path joined to its subPath), as a kubelet would mount it."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import time

import pytest

from harness.k8s_runbook import cluster_state, digest, report, run


def remount(workload, mounts, volume=None, working_dir=None, env=None):
    """The vllm Deployment with the cache's volume mounted by `mounts` (and `volume` as its source), rolled out."""
    deployment = workload.deployment()
    document = {'apiVersion': 'apps/v1', 'kind': 'Deployment',
                'metadata': {'name': 'vllm', 'namespace': workload.namespace},
                'spec': copy.deepcopy(deployment['spec'])}
    spec = document['spec']['template']['spec']
    container = spec['containers'][0]
    container['volumeMounts'] = [m for m in container['volumeMounts'] if m['name'] != 'vllm-data'] + mounts
    container['securityContext'] = {'readOnlyRootFilesystem': True}
    if working_dir:
        container['workingDir'] = working_dir
    if env:
        container['env'] = env
    if volume:
        spec['volumes'] = [v for v in spec['volumes'] if v['name'] != 'vllm-data'] + [dict({'name': 'vllm-data'}, **volume)]
    restarts = len(workload.runtime.restarts)
    workload.kube.apply(document)
    workload.kube.rollout_status(workload.namespace)
    # the lab gateway behind the pods restarted with the new template (the test's own restart, not the runbook's)
    deadline = time.monotonic() + 60
    while len(workload.runtime.restarts) == restarts:
        assert time.monotonic() < deadline, 'the lab gateway did not follow the rollout'
        time.sleep(0.2)


def parent_claim(workload, request):
    """A claim whose volume is the parent of the lab's data directory, so that subPath <data dir's name> is it."""
    data_dir = os.path.dirname(workload.lab.cache_path)
    name = f'{workload.namespace}-parent'
    workload.kube.apply(
        {'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': name},
         'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteMany'], 'storageClassName': '',
                  'hostPath': {'path': os.path.dirname(data_dir)},
                  'claimRef': {'namespace': workload.namespace, 'name': 'vllm-parent'}}},
        {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
         'metadata': {'name': 'vllm-parent', 'namespace': workload.namespace},
         'spec': {'accessModes': ['ReadWriteMany'], 'storageClassName': '', 'volumeName': name,
                  'resources': {'requests': {'storage': '1Gi'}}}})
    request.addfinalizer(lambda: workload.kube.kubectl('delete', 'pv', name, '--wait=false', '--ignore-not-found',
                                                       check=False))
    return {'persistentVolumeClaim': {'claimName': 'vllm-parent'}}, os.path.dirname(data_dir)


def run_init_container(workload, volume_path: str, pod_name_env: dict | None = None):
    """Run the patched init container's script here, its mount mapped as the kubelet maps it: <volume><subPath>."""
    spec = workload.deployment()['spec']['template']['spec']
    init = next(c for c in spec['initContainers'] if c['name'] == 'purge-token-cache')
    (mount,) = init['volumeMounts']
    sub_path = mount.get('subPath') or mount.get('subPathExpr') or ''
    for name, value in (pod_name_env or {}).items():
        sub_path = sub_path.replace(f'$({name})', value)
    script = init['command'][2].replace(mount['mountPath'], os.path.join(volume_path, sub_path).rstrip('/'))
    subprocess.run(['sh', '-c', script], check=True, timeout=60)
    return init


def test_a_cache_file_mounted_by_sub_path_is_refused_by_exec_and_purged_by_the_init_container(workload):
    cache = workload.lab.cache_path
    data_dir = os.path.dirname(cache)
    remount(workload, [{'name': 'vllm-data', 'mountPath': cache, 'subPath': 'token_cache.db'}])
    restarts = len(workload.runtime.restarts)

    # exec cannot move aside a file that is itself a mount point: one line, before any change (never a green run
    # that leaves the stale cache on the claim)
    before, cached = cluster_state(workload), digest(cache)
    rc, output = run(workload)
    assert rc != 0, output[-4000:]
    assert re.search(rf'{re.escape(cache)} is itself the mount point of volume vllm-data \(subPath token_cache\.db\): '
                     r'a file that is a mount point cannot be moved aside from inside the container; set '
                     r'vllm_dr_k8s_purge_method=init_container', output), output[-4000:]
    assert cluster_state(workload) == before and digest(cache) == cached
    assert len(workload.runtime.restarts) == restarts

    # the init container mounts the directory that holds the file on the claim, and purges that very file
    rc, output = run(workload, '-e', 'vllm_dr_k8s_purge_method=init_container')
    assert rc == 0, output[-6000:]
    init = run_init_container(workload, data_dir)
    assert init['volumeMounts'] == [{'name': 'vllm-data', 'mountPath': data_dir}]
    assert not os.path.exists(cache)
    kept = os.listdir(os.path.join(data_dir, '.vllm_dr_backups'))
    assert len(kept) == 1 and kept[0].startswith('start-'), kept


@pytest.mark.parametrize('by', ['subPath', 'subPathExpr'])
def test_the_init_container_mounts_the_same_sub_path_as_vllm(workload, request, by):
    cache = workload.lab.cache_path
    data_dir = os.path.dirname(cache)
    source, volume_path = parent_claim(workload, request)
    sub = os.path.basename(data_dir)
    env = None
    if by == 'subPath':
        mount = {'name': 'vllm-data', 'mountPath': data_dir, 'subPath': sub}
    else:
        mount = {'name': 'vllm-data', 'mountPath': data_dir, 'subPathExpr': '$(CACHE_DIR)'}
        env = [{'name': 'CACHE_DIR', 'value': sub}]
    remount(workload, [mount], volume=source, working_dir=data_dir, env=env)
    # a decoy where an init container without the subPath would look: the volume's own top
    decoy = os.path.join(volume_path, 'token_cache.db')
    with open(decoy, 'wb') as handle:
        handle.write(b'not the cache vLLM reads')
    request.addfinalizer(lambda: os.path.exists(decoy) and os.remove(decoy))

    rc, output = run(workload, '-e', 'vllm_dr_k8s_purge_method=init_container', '-e', 'vllm_dr_cache_path=token_cache.db')
    assert rc == 0, output[-6000:]
    init = run_init_container(workload, volume_path, {'CACHE_DIR': sub})
    assert init['volumeMounts'] == [mount]
    assert init.get('env', []) == (env or [])
    # the file vLLM reads was moved aside on its volume; the top of the volume was left alone
    assert not os.path.exists(cache)
    assert os.listdir(os.path.join(data_dir, '.vllm_dr_backups'))
    with open(decoy, 'rb') as handle:
        assert handle.read() == b'not the cache vLLM reads'


def test_a_relative_cache_path_keeps_its_backup_on_the_volume_not_the_container_root(workload):
    cache = workload.lab.cache_path
    data_dir = os.path.dirname(cache)
    remount(workload, [{'name': 'vllm-data', 'mountPath': data_dir}], working_dir=data_dir)
    pods = {pod['metadata']['name'] for pod in workload.pods()}
    stale = digest(cache)

    rc, output = run(workload, '-e', 'vllm_dr_cache_path=token_cache.db')
    assert rc == 0, output[-6000:]
    purge = report(workload)['purge']
    run_id = os.path.basename(purge['backup_dir'])
    on_volume = os.path.join(data_dir, '.vllm_dr_backups', run_id)
    (backup,) = [name for name in os.listdir(on_volume) if name.endswith('.bak')]
    assert digest(os.path.join(on_volume, backup)) == stale  # the stale cache, kept on its volume
    assert all(path.startswith(on_volume + '/') for path in purge['cache_backups']), purge['cache_backups']
    # the run's directory records its target, for the rollback's check
    with open(os.path.join(purge['backup_dir'], 'target.json'), encoding='utf-8') as handle:
        target = json.load(handle)
    server = workload.kube.kubectl('config', 'view', '--minify', '-o', 'jsonpath={.clusters[0].cluster.server}')
    assert (target['cluster'], target['namespace'], target['deployment']) == (server, workload.namespace, 'vllm')
    assert set(target['pods']) <= pods and all(target['pods'].values()), target
