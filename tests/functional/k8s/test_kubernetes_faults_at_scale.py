"""Faults while the runbook works on more replicas: a pod deleted while the cache is purged, the session store killed
mid-sweep, the API server stopped during the rollout wait. Each run ends with one clear failure or completes, gives
the run lock back, and the backups of the runs together restore everything.

One workload, three runs in a row (each fault leaves what the next run starts from), to keep the file fast.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import time

import pytest

from harness.k8s import KubeError
from harness.k8s_runbook import digest, report, run, store, when
from harness.modules import run_module
from harness.sessions import dump_redis
from test_kubernetes_pod_gone import delete_after_first_backup
from test_kubernetes_rollout_wait import RESTARTED

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_session_sweep, vllm_token_cache

REPLICAS = 4
SERVICE = b'vllm:session:svc'


def lease_gone(workload) -> bool:
    return not workload.kube.kubectl('-n', workload.namespace, 'get', 'lease', 'vllm-dr-vllm', '--ignore-not-found',
                                     '-o', 'name').strip()


def kill_store(lab) -> None:
    """A crash of the session store: SIGKILL, then the same server started again (it loads what it last saved)."""
    os.kill(lab.state['pids']['redis'], signal.SIGKILL)
    time.sleep(1)
    lab._start_redis()  # pylint: disable=protected-access
    lab._wait_redis()  # pylint: disable=protected-access


def restart_stamp(workload):
    try:
        return (workload.deployment()['spec']['template']['metadata'].get('annotations') or {}).get(RESTARTED)
    except KubeError:
        return None


def test_faults_at_scale_end_clearly_release_the_lock_and_the_backups_restore_everything(workload, capsys, tmp_path):
    kube, lab, namespace = workload.kube, workload.lab, workload.namespace
    if not kube.owned:
        pytest.skip('stops the API server: only on the suite\'s own cluster')
    # the first fault is a pod gone while the pods are purged one after the other: every pod, on the shared volume too
    kube.kubectl('-n', namespace, 'scale', 'deployment/vllm', f'--replicas={REPLICAS}')
    kube.rollout_status(namespace)
    port = lab.state['ports']['redis']
    store(workload).save()  # what the store holds on disk: a crashed server comes back with it
    before = {'store': dump_redis(store(workload)), 'cache': digest(lab.cache_path)}
    backup_root = workload.host['vllm_dr_backup_dir']

    # 1. a pod deleted while the cache is purged (the purge visits the pods in name order: the last is still to come
    # when the first backup is written): one line naming it, nothing else changed, the lock given back
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == REPLICAS
    # (the pods' interpreter deletes the last pod once the first pod's purge returned; later runs find it done)
    python, deleted = delete_after_first_backup(workload, pods[-1], str(tmp_path))
    workload.write_inventory(vllm_dr_k8s_cache_reach='every_pod', vllm_dr_k8s_python=python, vllm_dr_k8s_parallel_pods=1)
    held = {}
    lock_watcher = when(lambda: not lease_gone(workload), lambda: held.update(lease=True), every=0.5)
    rc, output = run(workload)
    assert os.path.exists(deleted), output[-6000:]
    assert rc != 0, output[-4000:]
    # the run held the target's lock while it purged, and gave it back when it failed
    assert held.get('lease'), 'the run never took its lock'
    lock_watcher.join(timeout=1)
    assert re.search(rf'pod {pods[-1]} of Deployment vllm in namespace {namespace} went away during the purge '
                     r'\(deleted or replaced\), so its cache was not purged', output), output[-6000:]
    assert 'Traceback' not in output
    assert dump_redis(store(workload)) == before['store']
    assert not workload.runtime.restarts
    assert lease_gone(workload)

    # 2. the session store killed mid-sweep: a clear failure (or a completed sweep the next steps judge), never a
    # traceback; the lock is given back
    kube.rollout_status(namespace)
    runs_before = set(os.listdir(backup_root))
    watcher = when(lambda: any(os.path.getsize(path) for path in glob.glob(os.path.join(backup_root, '*', 'sessions.jsonl'))
                               if os.path.basename(os.path.dirname(path)) not in runs_before),
                   lambda: kill_store(lab), every=0.02)
    rc, output = run(workload)
    watcher.join()
    assert 'Traceback' not in output and 'MODULE FAILURE' not in output
    if rc != 0:
        assert re.search(rf'(Redis at 127\.0\.0\.1:{port}|127\.0\.0\.1:{port}|validation failed)', output), \
            output[-6000:]
    assert lease_gone(workload)
    workload.runtime.errors.clear()  # the gateway lost its store too, as it would

    # 3. the API server stopped for a few seconds during the rollout wait: the re-run completes
    kube.rollout_status(namespace)
    outcome = {}

    def stop_api_server():
        time.sleep(1)
        try:
            with kube.api_server_down(4):
                pass
            outcome['stopped'] = True
        except AssertionError as exc:  # the API server did not come back: that, not the run's output, is the failure
            outcome['error'] = str(exc)

    stamp = restart_stamp(workload)
    watcher = when(lambda: restart_stamp(workload) not in (None, stamp), stop_api_server, every=0.5)
    rc, output = run(workload)
    watcher.join(timeout=120)
    kube.wait_ready()
    assert outcome.get('stopped'), outcome.get('error') or output[-6000:]
    workload.runtime.errors.clear()  # the stand-in kubelet could not read the API server meanwhile either
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert lease_gone(workload)

    # the backups of every run together put back what the runs removed
    sessions = glob.glob(os.path.join(backup_root, '*', 'sessions.jsonl'))
    caches = glob.glob(os.path.join(backup_root, '*', '*', 'token_cache.db.*.bak'))
    assert sessions and len(caches) >= 1, os.listdir(backup_root)
    for path in sessions:
        result = run_module(vllm_session_sweep, {'state': 'restored', 'backup_path': path,
                                                 'login_host': '127.0.0.1', 'login_port': port}, capsys)
        assert result['_rc'] == 0, result
    first = sorted(caches, key=os.path.getmtime)[0]
    # the file as it was, byte for byte: the backup replaces the cache (merge=false) instead of merging into it
    result = run_module(vllm_token_cache, {'path': lab.cache_path, 'state': 'restored', 'restore_from': first,
                                           'merge': False, 'backup_dir': str(workload.reports)}, capsys)
    assert result['_rc'] == 0, result
    assert digest(lab.cache_path) == before['cache']
    after = dump_redis(store(workload))
    # the restarted service signed its own session in again; every other session is back as it was
    assert {k: v for k, v in after.items() if k != SERVICE} == {k: v for k, v in before['store'].items() if k != SERVICE}
