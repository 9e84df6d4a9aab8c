"""A pod deleted while the purge loop runs: one clear line, nothing half-done beyond what it names, and the re-run
completes. The test is about the purge loop over every pod, so it asks for it (vllm_dr_k8s_cache_reach=every_pod): on
the suite's shared volume the default reach would purge once. A pod of its own per cache directory cannot be had here
for the pod that replaces the deleted one (kwok's per-pod Exec directories are made when the workload is built)."""

from __future__ import annotations

import os
import re

from harness.k8s_runbook import report, run, store, when
from harness.sessions import dump_redis


def delete_when_backed_up(workload, pod):
    """Delete `pod` at once as soon as the purge wrote its first backup on the volume: mid-loop, before its turn.

    The purge visits the pods in name order, so the first backup is the first pod's and `pod`, the second, is next.
    """
    backups = os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups')
    return when(lambda: any(files for _root, _dirs, files in os.walk(backups)),
                lambda: workload.kube.kubectl('-n', workload.namespace, 'delete', 'pod', pod, '--grace-period=0',
                                              '--force'))


def test_a_pod_deleted_during_the_purge_ends_in_one_clear_line_and_the_rerun_completes(workload):
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == 2
    store_before = dump_redis(store(workload))
    config_before = workload.config_map()['data']
    generation = workload.deployment()['metadata']['generation']

    inventory = workload.write_inventory(vllm_dr_k8s_cache_reach='every_pod')
    watcher = delete_when_backed_up(workload, pods[1])
    rc, output = run(workload, inventory=inventory)
    watcher.join()
    assert rc != 0
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

    # the re-run diagnoses the pods running now and completes the recovery
    workload.kube.rollout_status(workload.namespace)
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert workload.runtime.restarts
    assert workload.lab.refresh('svc')[0] == 200
