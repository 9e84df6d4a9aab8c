"""The run lock on Kubernetes: the Lease vllm-dr-<Deployment> in the workload's namespace, on the real API server."""

from __future__ import annotations

import datetime
import json
import re
import subprocess

from harness.k8s import KubeError
from harness.k8s_runbook import cluster_state, report, run, when

LEASE = 'vllm-dr-vllm'
OTHER = 'bob@other-controller run 0123456789ab'


def micro_time(moment: datetime.datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def hold(workload, acquired: datetime.datetime, seconds: int) -> None:
    """Another run's Lease, as vllm_run_lock writes it."""
    workload.kube.apply({
        'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
        'metadata': {'name': LEASE, 'namespace': workload.namespace},
        'spec': {'holderIdentity': OTHER, 'acquireTime': micro_time(acquired), 'renewTime': micro_time(acquired),
                 'leaseDurationSeconds': seconds}})


def lease(workload):
    try:
        return json.loads(workload.kube.kubectl('-n', workload.namespace, 'get', 'lease', LEASE, '-o', 'json',
                                                '--ignore-not-found') or 'null')
    except (KubeError, subprocess.TimeoutExpired):
        return None


def test_a_second_run_refuses_with_one_line_and_force_unlock_takes_over(workload):
    acquired = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - datetime.timedelta(seconds=30)
    hold(workload, acquired, 600)
    before = cluster_state(workload)
    rc, output = run(workload)
    assert rc != 0
    line = re.search(r'"msg": "(the run lock Lease [^"]*)"', output)
    assert line, output[-4000:]
    until = (acquired + datetime.timedelta(seconds=600)).strftime('%Y-%m-%dT%H:%M:%SZ')
    assert re.fullmatch(
        rf'the run lock Lease {LEASE} in namespace {workload.namespace} is held by {re.escape(OTHER)} since '
        rf'{acquired:%Y-%m-%dT%H:%M:%SZ}, until {until} \(expires in \d+ s\): another recovery run is working on '
        r'this target; wait for it to end, or, if that run is dead, wait until the lock expires or re-run with '
        r'vllm_dr_force_unlock=true', line.group(1))
    # refused before the first change: nothing in the namespace moved but the reads
    assert cluster_state(workload) == before
    assert lease(workload)['spec']['holderIdentity'] == OTHER

    rc, output = run(workload, '-e', 'vllm_dr_force_unlock=true')
    assert rc == 0, output[-6000:]
    assert re.search(rf'\[WARNING\]: the run lock Lease {LEASE} in namespace {workload.namespace}: removed the lock of '
                     + re.escape(OTHER), output), output[-4000:]
    assert report(workload)['validation']['failed'] == []
    # the owner gave it back at the end
    assert lease(workload) is None


def test_check_mode_takes_no_lease_and_an_expired_one_is_taken_over_then_released(workload):
    acquired = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    hold(workload, acquired, 60)
    version = lease(workload)['metadata']['resourceVersion']
    rc, output = run(workload, '--check')
    assert rc == 0, output[-4000:]
    assert lease(workload)['metadata']['resourceVersion'] == version

    seen = {}
    watcher = when(lambda: (lease(workload) or {}).get('spec', {}).get('holderIdentity') not in (None, OTHER),
                   lambda: seen.update(lease(workload) or {}), every=1)
    rc, output = run(workload)
    watcher.join(timeout=5)
    assert rc == 0, output[-6000:]
    # held by this run while it worked: a holder, the moment it took it, a duration covering the run
    spec = seen.get('spec', {})
    assert re.fullmatch(r'\S+@\S+ run [0-9a-f]{12}', spec.get('holderIdentity', '')), seen
    assert spec['leaseDurationSeconds'] == 1800 and spec['leaseTransitions'] == 1
    assert lease(workload) is None
