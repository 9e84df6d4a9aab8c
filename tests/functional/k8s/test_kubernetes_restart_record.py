"""The restart a run owes the workload, recorded on it (the vllm-dr.inferops.io/restart-pending annotation) before
the first change and removed by the patch that restarts it: a record a stopped run left behind makes the next run
restart the workload even when nothing else is left to purge."""

from __future__ import annotations

import json
import re

from harness.k8s_runbook import current_hash, run

ANNOTATION = 'vllm-dr.inferops.io/restart-pending'


def annotations(workload) -> dict:
    return workload.deployment()['metadata'].get('annotations') or {}


def test_a_record_a_stopped_run_left_restarts_the_workload_and_goes_with_the_restart(workload):
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert ANNOTATION not in annotations(workload), 'the restart removes the record'
    recovered = current_hash(workload)

    # a run stopped after its changes and before its restart (killed): the record it wrote is still there
    record = json.dumps({'run': '20261206T010000Z-lab-0123abcd', 'since': '2026-12-06T01:00:02Z'})
    workload.kube.kubectl('-n', workload.namespace, 'annotate', 'deployment/vllm', f'{ANNOTATION}={record}')
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert re.search(r'"msg": "run 20261206T010000Z-lab-0123abcd changed the service at 2026-12-06T01:00:02Z and '
                     r'did not restart it: it still runs with what it loaded before the purge"', output), output[-6000:]
    restarted = current_hash(workload)
    assert restarted != recovered, 'the workload restarted'
    assert ANNOTATION not in annotations(workload)

    # nothing is owed any more: the next run restarts nothing
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert current_hash(workload) == restarted and ANNOTATION not in annotations(workload)
    assert 'did not restart it' not in output
