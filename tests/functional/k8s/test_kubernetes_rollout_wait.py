"""The rollout wait survives the API server going away for a while and completes once the cluster is back."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from harness.k8s import KubeError
from harness.k8s_runbook import report, run

RESTARTED = 'kubectl.kubernetes.io/restartedAt'


def restarted(workload) -> bool:
    try:
        annotations = workload.deployment()['spec']['template']['metadata'].get('annotations') or {}
    except (KubeError, subprocess.TimeoutExpired):
        return False
    return RESTARTED in annotations


def test_rollout_wait_outlasts_an_api_server_restart_and_completes(workload):
    kube = workload.kube
    if not kube.owned:
        pytest.skip('stops the API server: only on the suite\'s own cluster')
    outcome = {}

    def runbook():
        outcome['rc'], outcome['output'] = run(workload)

    # the new pods cannot be scheduled: the rollout is still in progress when the API server goes away
    kube.kubectl('cordon', 'kwok-node-0')
    thread = threading.Thread(target=runbook)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not restarted(workload):
            assert time.monotonic() < deadline and thread.is_alive(), outcome.get('output', '')[-4000:]
            time.sleep(0.5)
        time.sleep(2)  # the wait has begun reading the Deployment
        with kube.api_server_down(6):
            assert thread.is_alive(), outcome['output'][-4000:]  # the run did not give up on the first failed read
        # the pods' stand-in kubelet could not read the API server meanwhile either: that was the point
        workload.runtime.errors.clear()
    finally:
        kube.kubectl('uncordon', 'kwok-node-0', check=False)
        thread.join(timeout=400)
    assert outcome['rc'] == 0, outcome['output'][-6000:]
    assert "has no attribute 'resources'" not in outcome['output']
    assert report(workload)['validation']['failed'] == []
