"""The run lock on Kubernetes: the Lease vllm-dr-<Deployment> in the workload's namespace, on the real API server."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import uuid

import pytest

from harness.k8s import KubeError
from harness.k8s_runbook import cluster_state, report, run, when
from harness.playbooks import BIN, playbook

LEASE = 'vllm-dr-vllm'
OTHER = 'bob@other-controller run 0123456789ab'


def micro_time(moment: datetime.datetime) -> str:
    return moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def hold(workload, acquired: datetime.datetime, seconds: int, renewed: datetime.datetime | None = None) -> None:
    """Another run's Lease, as vllm_run_lock writes it, last renewed at `renewed` (default: when it was taken)."""
    workload.kube.apply({
        'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
        'metadata': {'name': LEASE, 'namespace': workload.namespace},
        'spec': {'holderIdentity': OTHER, 'acquireTime': micro_time(acquired),
                 'renewTime': micro_time(renewed or acquired), 'leaseDurationSeconds': seconds}})


def lease(workload):
    try:
        return json.loads(workload.kube.kubectl('-n', workload.namespace, 'get', 'lease', LEASE, '-o', 'json',
                                                '--ignore-not-found') or 'null')
    except (KubeError, subprocess.TimeoutExpired):
        return None


def test_a_second_run_refuses_with_one_line_and_force_unlock_takes_over_only_a_holder_named_or_dead(workload):
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

    # the holder renewed its Lease 30 s ago: still working, forced only when named
    rc, output = run(workload, '-e', 'vllm_dr_force_unlock=true')
    assert rc != 0
    line = re.search(r'"msg": ("the run lock Lease (?:[^"\\]|\\.)*")', output)
    assert line and re.fullmatch(
        rf'the run lock Lease {LEASE} in namespace {workload.namespace} is held by {re.escape(OTHER)}, which renewed '
        rf'it \d+ s ago \(taken {acquired:%Y-%m-%dT%H:%M:%SZ}\): that run is still working, so '
        r'vllm_dr_force_unlock=true does not take its lock \(a holder counts as dead once it has not renewed for '
        r'600 s\); wait for it to end, or, to stop it before its next change, re-run with vllm_dr_force_unlock=true '
        rf'and vllm_dr_force_unlock_holder="{re.escape(OTHER)}"', json.loads(line.group(1))), output[-4000:]
    assert cluster_state(workload) == before
    assert lease(workload)['spec']['holderIdentity'] == OTHER

    # the holder's name has spaces: given as JSON
    rc, output = run(workload, '-e', 'vllm_dr_force_unlock=true', '-e', json.dumps({'vllm_dr_force_unlock_holder': OTHER}))
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


@pytest.mark.parametrize('report_writable', [True, False], ids=['report-written', 'report-write-failed'])
def test_detection_with_auto_repair_gives_the_lease_back_also_in_check_mode_and_when_its_report_fails(
        workload, tmp_path, report_writable):
    detect = ('-e', 'vllm_dr_auto_repair=true')
    rc, output = playbook(workload.inventory_path, 'dr_detect.yml', '--check', *detect, env=workload.kube.env)
    taken = re.search(r'Hold the run lock of the target: acquired\] \*+\n(\w+): \[lab\]', output)
    assert taken is None or taken.group(1) == 'skipping', output[-4000:]
    assert lease(workload) is None

    if not report_writable:
        (tmp_path / 'not-a-directory').write_text('')
        detect += ('-e', f'vllm_dr_report_dir={tmp_path}/not-a-directory/reports')
    seen = {}
    watcher = when(lambda: lease(workload) is not None, lambda: seen.update(lease(workload) or {}), every=0.5)
    rc, output = playbook(workload.inventory_path, 'dr_detect.yml', *detect, env=workload.kube.env)
    watcher.join(timeout=5)
    # the repair ran and took the Lease...
    assert re.search(r'Hold the run lock of the target: acquired\] \*+\n(\w+): \[lab\]', output).group(1) == 'changed', \
        output[-6000:]
    assert re.fullmatch(r'\S+@\S+ run [0-9a-f]{12}', seen.get('spec', {}).get('holderIdentity', '')), seen
    if report_writable:
        assert rc == 0, output[-6000:]
        assert report(workload)['validation']['failed'] == []
    # ...and gave it back, whether the run passed or its report could not be written
    assert re.search(r'Hold the run lock of the target: released\] \*+\n(\w+): \[lab\]', output).group(1) == 'changed', \
        output[-6000:]
    assert lease(workload) is None


def test_the_lease_lock_connects_as_the_kubernetes_core_modules_do_from_the_k8s_auth_environment(kube, tmp_path):
    """kubernetes.core's client makes the Lease lock's connection: with k8s_auth empty, the K8S_AUTH_* variables the
    kubernetes.core modules of the run read name the cluster (no KUBECONFIG, no ~/.kube/config)."""
    namespace = f'lock-env-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', namespace)
    env = {key: value for key, value in os.environ.items() if key != 'KUBECONFIG'}
    env.update(HOME=str(tmp_path), K8S_AUTH_KUBECONFIG=kube.kubeconfig, ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCALHOST_WARNING='0')
    try:
        def lock(state):
            args = json.dumps({'lock': 'lease', 'namespace': namespace, 'name': 'vllm-dr-env', 'state': state,
                               'owner': 'alice@controller run 0a1b2c3d4e5f'})
            out = subprocess.run([os.path.join(BIN, 'ansible'), 'localhost', '-m', 'inferops.vllm_dr.vllm_run_lock',
                                  '-a', args], capture_output=True, text=True, env=env, timeout=300, check=False)
            return out.returncode, out.stdout + out.stderr
        code, output = lock('acquired')
        assert code == 0, output[-3000:]
        holder = json.loads(kube.kubectl('-n', namespace, 'get', 'lease', 'vllm-dr-env', '-o', 'json'))
        assert holder['spec']['holderIdentity'] == 'alice@controller run 0a1b2c3d4e5f'
        code, output = lock('released')
        assert code == 0, output[-3000:]
        assert not kube.kubectl('-n', namespace, 'get', 'lease', 'vllm-dr-env', '--ignore-not-found').strip()
    finally:
        kube.kubectl('delete', 'namespace', namespace, '--wait=false', check=False)
