"""The rollout wait survives the API server going away for a while and completes once the cluster is back."""

from __future__ import annotations

import subprocess

import pytest

from harness.k8s import KubeError
from harness.k8s_runbook import report, run_through_api_outage

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
    # the new pods cannot be scheduled: the rollout is still in progress when the API server goes away
    rc, output = run_through_api_outage(workload, lambda: restarted(workload))
    assert rc == 0, output[-6000:]
    assert "has no attribute 'resources'" not in output
    assert report(workload)['validation']['failed'] == []
