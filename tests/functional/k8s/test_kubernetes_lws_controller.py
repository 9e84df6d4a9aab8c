"""The LeaderWorkerSet controller of the lws release, run on the suite's control plane: its groups are real.

A LeaderWorkerSet of 2 groups of 3 pods (a leader and 2 workers, each a pod like the suite's vLLM pods) is made by
the controller into a leader StatefulSet and a worker StatefulSet per group; its admission webhooks label each pod with
its group and worker index and refuse what its validation refuses; kwok runs the pods, so the groups become ready; a
template change rolls the groups one at a time, as the rolloutStrategy (maxUnavailable 1, maxSurge 0) says: the leader
StatefulSet's partition lowered by one group at a time.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import pytest

from harness.k8s import KubeError

LWS = 'leaderworkerset.x-k8s.io/v1'
LABEL = 'leaderworkerset.sigs.k8s.io/'
GROUPS, SIZE = 2, 3


def leader_worker_set(namespace: str, max_unavailable: int = 1) -> dict:
    labels = {'app': 'vllm'}
    pod_spec = {
        'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai:latest',
                        'volumeMounts': [{'name': 'vllm-data', 'mountPath': '/var/lib/vllm'},
                                         {'name': 'config', 'mountPath': '/etc/vllm'}]}],
        'volumes': [{'name': 'vllm-data', 'emptyDir': {}},
                    {'name': 'config', 'configMap': {'name': 'vllm-config'}}],
    }
    return {
        'apiVersion': LWS, 'kind': 'LeaderWorkerSet', 'metadata': {'name': 'vllm', 'namespace': namespace},
        'spec': {
            'replicas': GROUPS,
            'leaderWorkerTemplate': {'size': SIZE, 'restartPolicy': 'RecreateGroupOnPodRestart',
                                     'workerTemplate': {'metadata': {'labels': labels}, 'spec': pod_spec}},
            'rolloutStrategy': {'type': 'RollingUpdate',
                                'rollingUpdateConfiguration': {'maxUnavailable': max_unavailable, 'maxSurge': 0}},
        },
    }


def lws_status(kube, namespace: str) -> dict:
    return kube.get('leaderworkerset', 'vllm', namespace).get('status', {})


def rolled_to(kube, namespace: str, generation: int) -> bool:
    """Whether every group runs the template of `generation` and is ready, by the LeaderWorkerSet's status."""
    status = lws_status(kube, namespace)
    return (status.get('observedGeneration'), status.get('updatedReplicas'), status.get('readyReplicas')) == (
        generation, GROUPS, GROUPS)


def wait_for(what: str, check, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(0.5)


class Watch:
    """Every stored version of one object, from a `kubectl get --watch` started before a change: the integer `fields`
    (JSONPath expressions) of each, in the order the API server had them (a field not set reads 0)."""

    def __init__(self, kube, namespace: str, kind: str, name: str, *fields: str):
        template = ','.join(f'{{{field}}}' for field in fields) + '{"\\n"}'
        self.process = subprocess.Popen(  # pylint: disable=consider-using-with
            [kube.kubectl_path, '--kubeconfig', kube.kubeconfig, '-n', namespace, 'get', kind, name,
             '--watch', '-o', f'jsonpath={template}'], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.seen = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        # the object as it is before the change: from there on, the watch sees every version
        wait_for(f'kubectl to watch {kind}/{name}', lambda: self.seen, timeout=60)

    def _read(self) -> None:
        for line in self.process.stdout:
            self.seen.append(tuple(int(field or 0) for field in line.strip().split(',')))

    def stop(self) -> list:
        self.process.terminate()
        self.process.wait(timeout=10)
        self.thread.join(timeout=10)
        return self.seen


@pytest.fixture
def lws_namespace(kwok, lws_controller):
    namespace = f'lws-{uuid.uuid4().hex[:8]}'
    kwok.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': namespace}},
               {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'vllm-config', 'namespace': namespace},
                'data': {'vllm.yaml': 'model: test\n'}})
    yield namespace
    kwok.kubectl('delete', 'namespace', namespace, '--wait=false', '--ignore-not-found', check=False)


def test_lws_controller_makes_groups_ready_and_rolls_them_one_at_a_time(kwok, lws_namespace):
    ns = lws_namespace
    # the validating webhook runs: a rollout that may take no group down and add none is refused
    with pytest.raises(KubeError, match='vleaderworkerset.kb.io.*must not be 0 when `maxSurge` is 0'):
        kwok.apply(leader_worker_set(ns, max_unavailable=0))

    kwok.apply(leader_worker_set(ns))
    wait_for('the groups to be ready', lambda: lws_status(kwok, ns).get('readyReplicas') == GROUPS)
    lws = kwok.get('leaderworkerset', 'vllm', ns)
    # the defaulting webhook ran: the network config the manifest left out is set (the CRD has no default for it)
    assert lws['spec']['networkConfig'] == {'subdomainPolicy': 'Shared'}

    sets = {item['metadata']['name']: item for item in kwok.get('statefulsets', namespace=ns)['items']}
    assert sorted(sets) == ['vllm', 'vllm-0', 'vllm-1']
    assert sets['vllm']['spec']['replicas'] == GROUPS
    for group in range(GROUPS):
        workers = sets[f'vllm-{group}']
        assert workers['spec']['replicas'] == SIZE - 1
        assert workers['metadata']['labels'][LABEL + 'group-index'] == str(group)
        assert workers['metadata']['ownerReferences'][0]['kind'] == 'Pod'  # owned by its group's leader pod

    pods = {pod['metadata']['name']: pod for pod in kwok.running_pods(ns)}
    expected = {f'vllm-{group}': (group, 0) for group in range(GROUPS)}
    expected.update({f'vllm-{group}-{worker}': (group, worker)
                     for group in range(GROUPS) for worker in range(1, SIZE)})
    assert sorted(pods) == sorted(expected)
    for name, (group, worker) in expected.items():
        labels = pods[name]['metadata']['labels']
        assert (labels[LABEL + 'group-index'], labels[LABEL + 'worker-index']) == (str(group), str(worker)), name
        env = {item['name']: item.get('value') for item in pods[name]['spec']['containers'][0].get('env', [])}
        # the pod webhook's work: every pod knows its leader
        assert env['LWS_LEADER_ADDRESS'] == f'vllm-{group}.vllm.{ns}', name
    revision = {pod['metadata']['labels'][LABEL + 'template-revision-hash'] for pod in pods.values()}
    assert len(revision) == 1

    status_watch = Watch(kwok, ns, 'leaderworkerset', 'vllm',
                         '.status.observedGeneration', '.status.readyReplicas', '.status.updatedReplicas')
    partition_watch = Watch(kwok, ns, 'statefulset', 'vllm', '.spec.updateStrategy.rollingUpdate.partition')
    try:
        kwok.kubectl('-n', ns, 'patch', 'leaderworkerset', 'vllm', '--type=merge', '-p',
                     '{"spec":{"leaderWorkerTemplate":{"workerTemplate":{"metadata":{"annotations":'
                     '{"vllm-dr.inferops/restartedAt":"now"}}}}}}')
        generation = kwok.get('leaderworkerset', 'vllm', ns)['metadata']['generation']
        wait_for('the groups to roll', lambda: rolled_to(kwok, ns, generation))
    finally:
        seen = status_watch.stop()
        partitions = [value for (value,) in partition_watch.stop()]

    # one group at a time (maxUnavailable 1, maxSurge 0): the leader StatefulSet's partition stepped down by one
    # group, the highest first (2: none updated, 1: group 1, 0: both), and a status counted one group only updated
    steps = [value for index, value in enumerate(partitions) if not index or value != partitions[index - 1]]
    assert steps[-3:] == [2, 1, 0], partitions
    updated = [count for observed, _ready, count in seen if observed == generation]
    assert 1 in updated and updated[-1] == GROUPS, str(seen)

    # The status can count a group ready while its pods are still being replaced (its controller judges the groups
    # when a StatefulSet changes, not when a pod does): the pods themselves are waited for, each a new one.
    old_uids = {pod['metadata']['uid'] for pod in pods.values()}

    def replaced():
        running = {pod['metadata']['name']: pod for pod in kwok.running_pods(ns)}
        uids = {pod['metadata']['uid'] for pod in running.values()}
        return running if sorted(running) == sorted(expected) and not uids & old_uids else None

    new_pods = wait_for('every pod of both groups to run again, replaced', replaced, timeout=120)
    assert sorted(new_pods) == sorted(expected)
    assert {pod['metadata']['labels'][LABEL + 'template-revision-hash'] for pod in new_pods.values()} - revision
    assert len({pod['metadata']['labels'][LABEL + 'template-revision-hash'] for pod in new_pods.values()}) == 1
    # every pod of both groups was recreated from the new template
    assert not {pod['metadata']['uid'] for pod in new_pods.values()} & {pod['metadata']['uid'] for pod in pods.values()}
