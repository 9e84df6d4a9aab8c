"""The Kubernetes suite: one control plane for the session, one namespace and one incident lab per test."""

from __future__ import annotations

import os
import sys
import uuid
import warnings

import pytest
import yaml

from harness.k8s import GatewayRuntime, KubeCluster, delete_workload, vllm_workload
from harness.lws import LwsController
from lab.labctl import Lab


def pytest_collection_modifyitems(items):
    for item in items:
        if 'functional/k8s' in str(item.fspath).replace(os.sep, '/'):
            item.add_marker(pytest.mark.k8s)


@pytest.fixture(scope='session')
def kube(tmp_path_factory):
    with KubeCluster(str(tmp_path_factory.mktemp('k8s'))) as cluster:
        yield cluster


BROKEN = {}  # why the suite's control plane no longer runs pods, once a set-up failure found it so


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    """After a test's set-up failed, check that the control plane still runs a new pod. When it does not, every later
    test of the suite fails at once naming why, instead of each waiting out its own time limit (a whole CI run)."""
    outcome = yield
    report = outcome.get_result()
    kube = getattr(item, 'funcargs', {}).get('kube')
    if report.when == 'setup' and report.failed and not BROKEN and kube is not None and kube.owned:
        why = kube.runs_pods()
        if why:
            BROKEN.update(test=item.nodeid, why=why)


@pytest.fixture(autouse=True)
def control_plane_restarts(request):
    """Names, after a test, a control-plane process that exited by itself during it and was started again."""
    if BROKEN:
        pytest.fail(f"the suite's control plane stopped running pods after the set-up of {BROKEN['test']} failed: "
                    f"{BROKEN['why']}", pytrace=False)
    kube = request.getfixturevalue('kube') if 'kube' in request.fixturenames else None
    before = len(kube.component_restarts) if kube else 0
    yield
    for name, _when, log_tail in kube.component_restarts[before:] if kube else []:
        warnings.warn(f'{name} exited during this test and was started again; its last log lines:\n{log_tail}')


@pytest.fixture
def kwok(kube):
    """The suite's own cluster: pods run by kwok, their logs and exec served from this machine."""
    if not kube.has_kwok():
        pytest.skip('needs kwok (ClusterLogs/ClusterExec) to run the lab gateway behind the pods; '
                    'unset KUBECONFIG to use the suite\'s own control plane')
    return kube


@pytest.fixture(scope='session')
def lws_controller(kube, tmp_path_factory):
    """The LeaderWorkerSet controller (tools/lws/build.sh) on the suite's own control plane, one for the session."""
    if not kube.owned:
        pytest.skip('installs the LeaderWorkerSet CRDs and admission webhooks: needs the suite\'s own control plane; '
                    'unset KUBECONFIG')
    with LwsController(kube, str(tmp_path_factory.mktemp('lws'))) as controller:
        yield controller


class Workload:
    """The incident lab behind a `vllm` Deployment in its own namespace, and the runbook inventory for it."""

    def __init__(self, kube, lab, namespace, tmp_path):
        self.kube, self.lab, self.namespace = kube, lab, namespace
        self.reports = tmp_path / 'reports'
        self.inventory_path = str(tmp_path / 'inventory.yml')
        self.host = self.lab.inventory(str(self.reports))['all']['children']['vllm']['hosts']['lab']
        for key in ('vllm_dr_restart_command', 'vllm_dr_config_path', 'vllm_dr_log_path'):
            self.host.pop(key)
        self.host.update({
            'vllm_dr_platform': 'kubernetes',
            'vllm_dr_k8s_auth': {'kubeconfig': kube.kubeconfig},
            'vllm_dr_k8s_namespace': namespace,
            # kwok runs `kubectl exec` on this machine: the pod's interpreter is this one
            'vllm_dr_k8s_python': sys.executable,
            'vllm_dr_k8s_rollout_timeout': 120,
        })
        self.write_inventory()

    def write_inventory(self, **overrides) -> str:
        host = dict(self.host, **overrides)
        with open(self.inventory_path, 'w', encoding='utf-8') as handle:
            yaml.safe_dump({'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}, handle)
        return self.inventory_path

    def deployment(self) -> dict:
        return self.kube.get('deployment', 'vllm', self.namespace)

    def config_map(self) -> dict:
        return self.kube.get('configmap', 'vllm-config', self.namespace)

    def pods(self) -> list:
        return self.kube.running_pods(self.namespace)


def lab_workload(kwok, tmp_path, incident: bool, replicas: int = 2, cache_volume: str = 'pvc',
                 runtime=GatewayRuntime, rollout_timeout: str = '120s'):
    """A lab (after the incident: snapshot, rotation at the provider, restore) behind a `vllm` Deployment of
    `replicas` pods in a namespace of its own, rolled out; yields the Workload and removes both after."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=3)
    namespace = f'vllm-{uuid.uuid4().hex[:8]}'
    try:
        if incident:
            lab.snapshot()
            lab.rotate()
            lab.restore()
        kwok.apply(*vllm_workload(namespace, lab, replicas, cache_volume=cache_volume))
        kwok.rollout_status(namespace, timeout=rollout_timeout)
        with runtime(kwok, namespace, lab) as running:
            work = Workload(kwok, lab, namespace, tmp_path)
            work.runtime = running
            yield work
            assert not running.errors, running.errors
    finally:
        delete_workload(kwok, namespace)
        lab.down()


@pytest.fixture
def workload(kwok, tmp_path):
    """After the incident: snapshot, rotation at the provider, restore; the Deployment rolled out with 2 pods."""
    yield from lab_workload(kwok, tmp_path, incident=True)


@pytest.fixture
def healthy_workload(kwok, tmp_path):
    """Before the incident: the Deployment rolled out with 2 pods, every session current (for the drill)."""
    yield from lab_workload(kwok, tmp_path, incident=False)


@pytest.fixture
def other_workload(kwok, tmp_path):
    """A second workload after the incident, in a namespace and with a lab of its own (runs over several targets)."""
    (tmp_path / 'other').mkdir()
    yield from lab_workload(kwok, tmp_path / 'other', incident=True)
