"""The runbook on the Kubernetes suite's workload: run it, and read what it changed in the cluster and the lab."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import threading
import time

import redis
import yaml

from harness.k8s import POD_ENV_SECRET
from harness.playbooks import ROOT, playbook
from harness.reports import report_path
from harness.secret_scan import files_under, find_leaks, idp_tokens
from lab.labctl import LAB_CLIENT

RBAC = os.path.join(ROOT, 'roles', 'restore', 'files', 'rbac.yml')


def run(workload, *extra, inventory=None):
    return playbook(inventory or workload.inventory_path, 'dr_restore.yml', *extra, env=workload.kube.env)


def when(condition, action, timeout: float = 300, every: float = 0.05) -> threading.Thread:
    """Call action() once, as soon as condition() holds (polled every `every` s): a fault injected at a given step."""
    def watch():
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                action()
                return
            time.sleep(every)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def when_logged(log_path: str, pattern: str, action, timeout: float = 300) -> threading.Thread:
    """Call action() once the ansible log at log_path (ANSIBLE_LOG_PATH) matches pattern."""
    def logged():
        if not os.path.exists(log_path):
            return False
        with open(log_path, encoding='utf-8', errors='replace') as handle:
            return re.search(pattern, handle.read()) is not None
    return when(logged, action, timeout)


def digest(path):
    if not os.path.exists(path):
        return None
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def store(workload):
    return redis.Redis(host='127.0.0.1', port=workload.lab.state['ports']['redis'], socket_timeout=5)


def report(workload) -> dict:
    with open(report_path(workload.reports, 'lab.json'), encoding='utf-8') as handle:
        return json.load(handle)


def pod_hashes(workload) -> set:
    return {pod['metadata']['labels']['pod-template-hash']
            for pod in workload.kube.get('pods', namespace=workload.namespace, selector='app=vllm')['items']}


def current_hash(workload) -> str:
    deployment = workload.deployment()
    revision = deployment['metadata']['annotations']['deployment.kubernetes.io/revision']
    for replicaset in workload.kube.get('replicasets', namespace=workload.namespace)['items']:
        if replicaset['metadata']['annotations'].get('deployment.kubernetes.io/revision') == revision:
            return replicaset['metadata']['labels']['pod-template-hash']
    raise AssertionError('no ReplicaSet at the Deployment revision')


def cluster_state(workload, quiet: float = 1.0, timeout: float = 30.0) -> dict:
    """Everything in the namespace the runbook could change, by resourceVersion, once the controllers are done with
    what the test itself changed: every Deployment's status observed its generation, and two reads `quiet` seconds
    apart agree (a Deployment just paused or resumed gets its status written a moment later; taken before that, the
    controller's write would count as the run's)."""
    kube, namespace = workload.kube, workload.namespace

    def read() -> tuple:
        items, settled = {}, True
        for kind in ('deployments', 'replicasets', 'pods', 'configmaps'):
            for item in kube.get(kind, namespace=namespace)['items']:
                items[f"{kind}/{item['metadata']['name']}"] = item['metadata']['resourceVersion']
                if kind == 'deployments':
                    settled &= item.get('status', {}).get('observedGeneration') == item['metadata'].get('generation')
        return items, settled

    deadline = time.monotonic() + timeout
    items, settled = read()
    while time.monotonic() < deadline:
        time.sleep(quiet)
        again, settled_again = read()
        if settled and settled_again and again == items:
            break
        items, settled = again, settled_again
    return items


def rbac_documents(namespace: str, drop_verb: tuple | None = None) -> list:
    """The shipped RBAC for a workload in `namespace`, optionally with one verb taken away."""
    with open(RBAC, encoding='utf-8') as handle:
        documents = yaml.safe_load(handle)['items']
    for doc in documents:
        if doc['metadata']['namespace'] == 'vllm':
            doc['metadata']['namespace'] = namespace
        for subject in doc.get('subjects', []):
            subject['namespace'] = namespace
        for rule in doc.get('rules', []) if drop_verb else []:
            if drop_verb[1] in rule['resources']:
                rule['verbs'] = [verb for verb in rule['verbs'] if verb != drop_verb[0]]
        if 'rules' in doc:
            doc['rules'] = [rule for rule in doc['rules'] if rule['verbs']]
    return documents


def service_account_kubeconfig(workload, tmp_path) -> str:
    kube = workload.kube
    token = kube.kubectl('-n', workload.namespace, 'create', 'token', 'vllm-dr', '--duration=1h').strip()
    config = yaml.safe_load(kube.kubectl('config', 'view', '--raw', '--minify', '-o', 'yaml'))
    config = copy.deepcopy(config)
    config['users'] = [{'name': 'vllm-dr', 'user': {'token': token}}]
    config['contexts'][0]['context']['user'] = 'vllm-dr'
    path = tmp_path / 'vllm-dr.kubeconfig'
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


def run_cordoned(workload, started, fault, rollout_timeout: int, *extra, env: dict | None = None) -> tuple:
    """dr_restore.yml (with `extra` arguments, in `env`) run with the node cordoned, so that the rollout of its restart
    cannot finish; once `started()` holds, `fault(running)` acts on the cluster while the run goes on (`running()`
    fails the test unless the run is still going). The node is uncordoned after, and the run waited for: (rc, output),
    with the run's deadline vllm_dr_k8s_rollout_timeout `rollout_timeout` s. A failed run's output ends with the state
    of the workload's namespace."""
    kube, outcome = workload.kube, {}
    workload.write_inventory(vllm_dr_k8s_rollout_timeout=rollout_timeout)

    def runbook():
        outcome['rc'], outcome['output'] = playbook(workload.inventory_path, 'dr_restore.yml', *extra,
                                                    env=env or kube.env)

    def running():
        assert thread.is_alive(), outcome['output'][-4000:]

    kube.kubectl('cordon', 'kwok-node-0')
    thread = threading.Thread(target=runbook)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while not started():
            assert time.monotonic() < deadline and thread.is_alive(), outcome.get('output', '')[-4000:]
            time.sleep(0.5)
        fault(running)
    finally:
        kube.kubectl('uncordon', 'kwok-node-0', check=False)
        thread.join(timeout=500)
    assert not thread.is_alive(), 'the run did not end in 500 s after the node was uncordoned'
    if outcome['rc'] != 0:
        outcome['output'] += '\n' + kube.state_of(workload.namespace)
    return outcome['rc'], outcome['output']


def run_through_api_outage(workload, restarted, seconds: float = 6) -> tuple:
    """run_cordoned: once `restarted()` says the restart began, and its wait has begun reading the workload, the API
    server is stopped for `seconds`, and the run must still be going then. The run's deadline (300 s) covers the API
    server's restart and the control plane catching up, which take a while on a loaded machine."""
    def outage(running):
        time.sleep(2)  # the wait has begun reading the workload
        with workload.kube.api_server_down(seconds):
            running()  # the run did not give up on the first failed read
        # the pods' stand-in kubelet could not read the API server meanwhile either: that was the point
        workload.runtime.errors.clear()

    return run_cordoned(workload, restarted, outage, 300)


def workload_secrets(workload) -> set:
    """Every secret a run on `workload` reads and must never show: the env secret of its pod templates, the lab
    client's and the introspection client's secrets, and every token the lab's provider issued."""
    found = {POD_ENV_SECRET, LAB_CLIENT[1], workload.host['vllm_dr_introspection']['client_secret']}
    return found | idp_tokens(workload.lab.path('idp', 'idp.db'))


def leaks(workload, outputs: dict, log_path, also: set = frozenset()) -> list:
    """The secrets of `workload` (and `also`) found in `outputs` (name -> a run's output), the ansible log at
    `log_path` and the reports (workload_secrets, harness.secret_scan.find_leaks): [] when none."""
    secrets = workload_secrets(workload) | set(also)
    assert len(secrets) > 10
    assert os.path.getsize(log_path) > 0
    return find_leaks(secrets, texts=outputs, paths=[str(log_path)] + list(files_under(str(workload.reports))))
