"""A pod deleted while the purge loop runs: one clear line, nothing half-done beyond what it names, and the re-run
completes. The test is about the purge loop over every pod, so it asks for it (vllm_dr_k8s_cache_reach=every_pod): on
the suite's shared volume the default reach would purge once. A pod of its own per cache directory cannot be had here
for the pod that replaces the deleted one (kwok's per-pod Exec directories are made when the workload is built)."""

from __future__ import annotations

import os
import re
import shlex
import sys

from harness.k8s_runbook import report, run, store
from harness.sessions import dump_redis


def delete_after_first_backup(workload, pod, work) -> tuple:
    """An interpreter for the pods that deletes `pod` right after the purge wrote its first backup, before the purge
    loop reaches `pod`: (the interpreter's path, the file it creates once `pod` is deleted).

    kwok runs each `kubectl exec` on this machine, so the pods' interpreter can be a script that runs this Python and,
    once the module in the first pod has returned with its backup on the volume, deletes `pod` before the loop goes on.
    The purge visits the pods in name order, so the first backup is the first pod's, and any later `pod` is still to
    come.
    Done in the loop's own step, not by a watcher racing it: under load the loop would otherwise win now and then.
    """
    backups = os.path.join(os.path.dirname(workload.lab.cache_path), '.vllm_dr_backups')
    deleted, script = os.path.join(work, 'deleted'), os.path.join(work, 'python')
    kubectl = ' '.join(shlex.quote(part) for part in (
        workload.kube.kubectl_path, '--kubeconfig', workload.kube.kubeconfig, '-n', workload.namespace, 'delete',
        'pod', pod, '--grace-period=0', '--force'))
    with open(script, 'w', encoding='utf-8') as handle:
        handle.write(f'''#!/bin/sh
{shlex.quote(sys.executable)} "$@"
rc=$?
if [ ! -e {shlex.quote(deleted)} ] && [ -n "$(find {shlex.quote(backups)} -type f 2>/dev/null | head -n 1)" ]; then
  {kubectl} >/dev/null 2>&1 && touch {shlex.quote(deleted)}
fi
exit $rc
''')
    os.chmod(script, 0o755)
    return script, deleted


def test_a_pod_deleted_during_the_purge_ends_in_one_clear_line_and_the_rerun_completes(workload, tmp_path):
    pods = sorted(pod['metadata']['name'] for pod in workload.pods())
    assert len(pods) == 2
    store_before = dump_redis(store(workload))
    config_before = workload.config_map()['data']
    spec = workload.deployment()['spec']

    python, deleted = delete_after_first_backup(workload, pods[1], str(tmp_path))
    # one pod after the other, in name order (vllm_dr_k8s_parallel_pods: 1), so that the deleted pod is still to come
    inventory = workload.write_inventory(vllm_dr_k8s_cache_reach='every_pod', vllm_dr_k8s_python=python,
                                         vllm_dr_k8s_parallel_pods=1)
    rc, output = run(workload, inventory=inventory)
    assert os.path.exists(deleted), output[-6000:]
    assert rc != 0, output[-6000:]
    match = re.search(rf'pod {pods[1]} of Deployment vllm in namespace {workload.namespace} went away during the purge '
                      r'\(deleted or replaced\), so its cache was not purged\n'
                      r'the cache was purged in 1 other pod \(backups in (\S+)\); sessions, the configuration and the '
                      r'Deployment were left as they were: re-run to purge the pods running now', output)
    assert match, output[-6000:]
    assert 'deserialization' not in output and 'Traceback' not in output
    # what it did is what it says: the first pod's backup is on the controller, private; nothing else changed
    files = [os.path.join(walked[0], name) for walked in os.walk(match.group(1)) for name in walked[2]]
    fetched = [path for path in files if os.path.basename(path) != 'target.json']
    assert [os.path.basename(path).split('.')[0] for path in fetched] == ['token_cache'], files
    # beside it, the record of the target the run directory belongs to (a rollback checks it)
    assert os.path.join(match.group(1), 'target.json') in files, files
    assert oct(os.stat(fetched[0]).st_mode & 0o777) == '0o600'
    assert dump_redis(store(workload)) == store_before
    assert workload.config_map()['data'] == config_before
    # the Deployment's spec is as it was; its metadata records the restart the stopped run owes, for the re-run
    assert workload.deployment()['spec'] == spec
    assert 'restart-pending' in ''.join(workload.deployment()['metadata'].get('annotations', {}))
    assert not workload.runtime.restarts

    # the re-run diagnoses the pods running now and completes the recovery
    workload.kube.rollout_status(workload.namespace)
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert workload.runtime.restarts
    assert workload.lab.refresh('svc')[0] == 200
    assert 'restart-pending' not in ''.join(workload.deployment()['metadata'].get('annotations', {}))
