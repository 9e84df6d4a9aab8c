"""The restart is checked before the first change: a ResourceQuota with no room for the rollout's surge pod is named,
with how to make room, before the purge, the config edit and the sweep (they used to run, and the rollout then
failed after its wait with `exceeded quota: pods`)."""

from __future__ import annotations

import time

from test_kubernetes_preconditions import fails_before_any_change


def test_a_quota_with_no_room_for_the_surge_pod_is_refused_before_any_change(workload):
    kube, namespace = workload.kube, workload.namespace
    kube.apply({'apiVersion': 'v1', 'kind': 'ResourceQuota', 'metadata': {'name': 'pods', 'namespace': namespace},
                'spec': {'hard': {'pods': '2'}}})
    deadline = time.monotonic() + 60
    while (kube.get('resourcequota', 'pods', namespace).get('status') or {}).get('used', {}).get('pods') != '2':
        assert time.monotonic() < deadline, 'the quota controller did not count the pods'
        time.sleep(0.5)

    fails_before_any_change(
        workload,
        rf"^.*ResourceQuota pods in namespace {namespace} has no room for the 1 new pod the restart of Deployment "
        r"vllm starts before it stops old ones \(maxSurge 1\): pods: used 2 of 2, the surge needs 1 more; raise the "
        r"quota by that much, or set the Deployment's rollingUpdate to maxSurge: 0 and maxUnavailable: 1, then re-run")
