"""dr_rollback.yml on Kubernetes: each pod still running gets its own backup back, sidecars included; pods that
replaced the run's pods get the backup of the pods gone only when they left one cache content, else a refusal per
pod and a choice (vllm_dr_rollback_pod_dir)."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3

import pytest

from harness.k8s_runbook import digest, rbac_documents, service_account_kubeconfig
from harness.playbooks import playbook

STAMP = '20260101T000000.000001Z'


def backup_set(run_dir, namespace, pod, token, wal=False) -> dict:
    """A pod's backup set as the run keeps it on the controller: <run>/<namespace>_<pod>/token_cache.db.<stamp>.bak*.

    With wal, the database is in WAL mode and its last write is still in the -wal file, as a live vLLM leaves it.
    """
    directory = run_dir / f'{namespace}_{pod}'
    directory.mkdir(parents=True, mode=0o700)
    source = directory / 'source.db'
    conn = sqlite3.connect(source)
    if wal:
        conn.execute('PRAGMA journal_mode=WAL')
        conn.execute('PRAGMA wal_autocheckpoint=0')
    conn.execute('CREATE TABLE tokens (token TEXT, expires_at INTEGER)')
    conn.execute('INSERT INTO tokens VALUES (?, 4102444800)', (token,))
    conn.commit()
    files = {}
    for suffix in ('', '-wal') if wal else ('',):
        target = directory / f'token_cache.db.{STAMP}.bak{suffix}'
        shutil.copyfile(f'{source}{suffix}', target)
        target.chmod(0o600)
        files[suffix] = target.read_bytes()
    conn.close()
    for leftover in directory.glob('source.db*'):
        leftover.unlink()
    return files


def cache_files(workload) -> dict:
    path = workload.lab.cache_path
    return {suffix: open(path + suffix, 'rb').read() for suffix in ('', '-wal', '-shm', '-journal')
            if os.path.exists(path + suffix)}


def rollback(workload, run_dir, *extra):
    # which backup set goes into which pod is judged by the files the pod then holds: each set replaces the cache
    # (vllm_dr_rollback_replace_cache) rather than being merged into it
    return playbook(workload.inventory_path, 'dr_rollback.yml', '-e', f'vllm_dr_rollback_dir={run_dir}',
                    '-e', 'vllm_dr_rollback_replace_cache=true', *extra, env=workload.kube.env)


def test_each_pod_still_running_gets_its_own_backup_back_with_its_sidecars(healthy_workload, tmp_path):
    workload = healthy_workload
    first, second = sorted(pod['metadata']['name'] for pod in workload.pods())
    run_dir = tmp_path / 'run-own'
    own = {first: backup_set(run_dir, workload.namespace, first, 'first', wal=True),
           second: backup_set(run_dir, workload.namespace, second, 'second')}

    rc, output = rollback(workload, run_dir)
    assert rc == 0, output[-6000:]
    for pod in (first, second):
        assert f'{workload.namespace}/{pod}: {workload.namespace}_{pod}/token_cache.db.{STAMP}.bak (its own backup)' \
            in output, output[-6000:]
        # what went into the pod is its own set, the -wal with the first pod's
        staged = os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups', 'run-own-rollback', pod)
        assert {name[len(f'token_cache.db.{STAMP}.bak'):]: open(os.path.join(staged, name), 'rb').read()
                for name in os.listdir(staged) if name.startswith('token_cache.db')} == own[pod]
    # the pods share the lab's volume: the second pod's restore came last, its set is what the cache holds now (the
    # first pod's -wal went with it)
    assert cache_files(workload) == own[second]


def test_rollback_runs_without_reading_logs_or_velero_restores(healthy_workload, tmp_path):
    # the shipped Role without get on pods/log and without the Velero Role: what the rollback needs is pods list/get,
    # pods/exec create, ReplicaSets list and the Deployment get, nothing of the diagnosis's evidence
    workload = healthy_workload
    kube = workload.kube
    kube.apply(*[doc for doc in rbac_documents(workload.namespace, drop_verb=('get', 'pods/log'))
                 if doc['metadata']['namespace'] == workload.namespace])
    kubeconfig = service_account_kubeconfig(workload, tmp_path)
    assert kube.kubectl('auth', 'can-i', 'get', 'pods', '--subresource=log', '-n', workload.namespace,
                        kubeconfig=kubeconfig, check=False).strip() == 'no'
    assert kube.kubectl('auth', 'can-i', 'list', 'restores.velero.io', '-n', 'velero',
                        kubeconfig=kubeconfig, check=False).strip() == 'no'
    first, second = sorted(pod['metadata']['name'] for pod in workload.pods())
    run_dir = tmp_path / 'run-least'
    own = {first: backup_set(run_dir, workload.namespace, first, 'first'),
           second: backup_set(run_dir, workload.namespace, second, 'second')}
    workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig}, vllm_dr_restored_at='')

    rc, output = rollback(workload, run_dir)
    assert rc == 0, output[-6000:]
    assert 'Read the logs of every replica' not in output
    assert 'Velero' not in output
    for pod in (first, second):
        assert f'{workload.namespace}/{pod}: {workload.namespace}_{pod}/token_cache.db.{STAMP}.bak (its own backup)' \
            in output, output[-6000:]
    assert cache_files(workload) == own[second]


def test_replaced_pods_are_refused_when_the_pods_gone_left_different_caches_and_served_by_choice(healthy_workload,
                                                                                                 tmp_path):
    workload = healthy_workload
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    run_dir = tmp_path / 'run-replaced'
    backup_set(run_dir, workload.namespace, 'vllm-gone-1', 'one')
    chosen = backup_set(run_dir, workload.namespace, 'vllm-gone-2', 'two', wal=True)
    before = digest(workload.lab.cache_path)

    rc, output = rollback(workload, run_dir)
    assert rc != 0
    for pod in pods:
        assert re.search(
            rf'pod {pod} in namespace {workload.namespace} has no backup of its own in {run_dir} \(it replaced a pod '
            rf'of the run\) and the pods gone left different caches \({workload.namespace}_vllm-gone-1, '
            rf'{workload.namespace}_vllm-gone-2\): nothing was put back; choose the one for the pods without their '
            r'own with -e vllm_dr_rollback_pod_dir=<one of them>', output), output[-6000:]
    assert 'Traceback' not in output
    assert digest(workload.lab.cache_path) == before
    assert not os.path.exists(os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups',
                                           'run-replaced-rollback'))

    rc, output = rollback(workload, run_dir, '-e', f'vllm_dr_rollback_pod_dir={workload.namespace}_vllm-gone-2')
    assert rc == 0, output[-6000:]
    for pod in pods:
        assert f'{workload.namespace}/{pod}: {workload.namespace}_vllm-gone-2/token_cache.db.{STAMP}.bak' in output
    assert cache_files(workload) == chosen


@pytest.mark.parametrize('backups, refusal', [
    ('backups', r'vllm_dr_k8s_pod_backup_dir backups is not an absolute path; '),
    ('/etc/vllm-dr', r'vllm_dr_k8s_pod_backup_dir /etc/vllm-dr is not on volume \S+ that holds the token cache'),
])
def test_a_pod_backup_directory_the_pods_cannot_keep_is_refused_before_anything_is_put_back(
        healthy_workload, tmp_path, backups, refusal):
    # the rollback takes the cache's place from the target model (discover's cache_reach): a backup directory that is
    # relative, or off the cache's volume, stops it in one line before any pod is touched
    workload = healthy_workload
    first, second = sorted(pod['metadata']['name'] for pod in workload.pods())
    run_dir = tmp_path / 'run-hostile'
    backup_set(run_dir, workload.namespace, first, 'first')
    backup_set(run_dir, workload.namespace, second, 'second')
    before = cache_files(workload)
    pods_before = {pod['metadata']['name']: pod['metadata']['uid'] for pod in workload.pods()}

    rc, output = rollback(workload, run_dir, '-e', f'vllm_dr_k8s_pod_backup_dir={backups}')
    assert rc != 0
    assert re.search(refusal, output), output[-4000:]
    assert 'Traceback' not in output
    assert cache_files(workload) == before
    assert not os.path.exists(os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups',
                                           'run-hostile-rollback'))
    assert {pod['metadata']['name']: pod['metadata']['uid'] for pod in workload.pods()} == pods_before
