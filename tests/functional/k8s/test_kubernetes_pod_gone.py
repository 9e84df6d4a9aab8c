"""A pod deleted while the purge loop runs: one clear line, nothing half-done beyond what it names, and the re-run
completes. Each pod keeps its cache in a directory of its own (subPathExpr), so the default reach purges every pod."""

from __future__ import annotations

import os
import re

import pytest

from harness.k8s_runbook import report, run, store, when
from harness.sessions import dump_redis


@pytest.fixture
def own_cache_workload(kwok, tmp_path):
    """After the incident, 2 pods, each with its own copy of the restored cache."""
    from conftest import lab_workload  # pylint: disable=import-outside-toplevel,import-error
    yield from lab_workload(kwok, tmp_path, incident=True, cache_volume='per_pod')


def delete_when_backed_up(workload, pod):
    """Delete `pod` at once as soon as the purge wrote its first backup on the volume: mid-loop, before its turn.

    The purge visits the pods in name order, so the first backup is the first pod's and `pod`, the second, is next;
    the first pod's cache directory is the lab's data directory.
    """
    backups = os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups')
    return when(lambda: any(files for _root, _dirs, files in os.walk(backups)),
                lambda: workload.kube.kubectl('-n', workload.namespace, 'delete', 'pod', pod, '--grace-period=0',
                                              '--force'))


def test_a_pod_deleted_during_the_purge_ends_in_one_clear_line_and_the_rerun_completes(own_cache_workload):
    workload = own_cache_workload
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == 2
    second_cache = os.path.join(workload.pod_directories[pods[1]], os.path.basename(workload.lab.cache_path))
    second_before = open(second_cache, 'rb').read()
    store_before = dump_redis(store(workload))
    config_before = workload.config_map()['data']
    generation = workload.deployment()['metadata']['generation']

    watcher = delete_when_backed_up(workload, pods[1])
    rc, output = run(workload)
    watcher.join()
    assert rc != 0
    # the default reach purges each pod's own copy
    assert report(workload)['diagnosis']['kubernetes']['cache_reach']['strategy'] == 'per_pod'
    match = re.search(rf'pod {pods[1]} of Deployment vllm in namespace {workload.namespace} went away during the purge '
                      r'\(deleted or replaced\), so its cache was not purged\n'
                      r'the cache was purged in 1 other pod \(backups in (\S+)\); sessions, the configuration and the '
                      r'Deployment were left as they were: re-run to purge the pods running now', output)
    assert match, output[-6000:]
    assert 'deserialization' not in output and 'Traceback' not in output
    # what it did is what it says: the first pod's backup is on the controller, private; nothing else changed
    fetched = [os.path.join(walked[0], name) for walked in os.walk(match.group(1)) for name in walked[2]]
    assert [os.path.basename(path).split('.')[0] for path in fetched] == ['token_cache'], fetched
    assert oct(os.stat(fetched[0]).st_mode & 0o777) == '0o600'
    assert dump_redis(store(workload)) == store_before
    assert workload.config_map()['data'] == config_before
    assert workload.deployment()['metadata']['generation'] == generation
    assert not workload.runtime.restarts
    # the pod gone was not purged: its own copy is as the restore left it
    assert open(second_cache, 'rb').read() == second_before

    # the re-run diagnoses the pods running now and completes the recovery
    workload.kube.rollout_status(workload.namespace)
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert workload.runtime.restarts
    assert workload.lab.refresh('svc')[0] == 200
