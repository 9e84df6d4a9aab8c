"""The runbook on a vLLM StatefulSet, on a real API server with real controllers (kwok runs the pods): the kind read
from the pods' owner chain, the cache on a volumeClaimTemplates claim (a PersistentVolumeClaim per pod: every pod's
own copy, backed up and purged in each), the restart by the update strategy (RollingUpdate, with a partition, OnDelete)
and the validation."""

from __future__ import annotations

import glob
import os
import re
import shlex
import sqlite3
import subprocess
import time
import uuid

import pytest

from conftest import Workload
from harness.k8s import GatewayRuntime, KubeError, delete_workload, pod_volume_python, statefulset_workload
from harness.k8s_runbook import leaks, report, run, run_through_api_outage
from harness.playbooks import playbook
from lab.labctl import Lab
from test_kubernetes_rbac_per_playbook import grant, kubeconfig_of, shipped_roles

CACHE = 'token_cache.db'
REVISION = 'controller-revision-hash'


def mark(directory: str, pod: str) -> None:
    """A row of the pod's own in its copy of the cache: which backup came from which pod is read back from it."""
    conn = sqlite3.connect(os.path.join(directory, CACHE))
    conn.execute('CREATE TABLE IF NOT EXISTS vllm_dr_test_pod (pod TEXT)')
    conn.execute('INSERT INTO vllm_dr_test_pod VALUES (?)', (pod,))
    conn.commit()
    conn.close()


def marked(path: str) -> str:
    conn = sqlite3.connect(f'file:{path}?mode=ro', uri=True)
    try:
        return conn.execute('SELECT pod FROM vllm_dr_test_pod').fetchone()[0]
    finally:
        conn.close()


def wait_ready(kube, namespace: str, replicas: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sts = kube.get('statefulset', 'vllm', namespace)
        status = sts.get('status') or {}
        if status.get('readyReplicas', 0) == replicas and len(kube.running_pods(namespace)) == replicas:
            return
        time.sleep(0.5)
    raise AssertionError(f'StatefulSet vllm in {namespace} not ready: {kube.get("statefulset", "vllm", namespace)}')


@pytest.fixture
def statefulset(kwok, tmp_path):
    """make(replicas, strategy, partition, incident): the lab after the incident (or before it) behind a `vllm` StatefulSet, rolled out, each
    pod's copy of the cache marked with its name; the Workload gets `directories` (pod -> its cache directory)."""
    made = []

    def make(replicas: int = 2, strategy: str = 'RollingUpdate', partition: int | None = None,
             incident: bool = True) -> Workload:
        lab = Lab(str(tmp_path / 'lab'))
        lab.up(sessions=3)
        namespace = f'vllm-{uuid.uuid4().hex[:8]}'
        made.append((lab, namespace))
        if incident:
            lab.snapshot()
            lab.rotate()
            lab.restore()
        documents, directories = statefulset_workload(namespace, lab, str(tmp_path), replicas, strategy, partition)
        for pod, directory in directories.items():
            mark(directory, pod)
        kwok.apply(*documents)
        wait_ready(kwok, namespace, replicas)
        runtime = GatewayRuntime(kwok, namespace, lab).__enter__()
        made[-1] = (lab, namespace, runtime)
        work = Workload(kwok, lab, namespace, tmp_path)
        work.runtime, work.directories = runtime, directories
        work.host.update({'vllm_dr_cache_path': CACHE,
                          'vllm_dr_k8s_pod_backup_dir': os.path.join(str(tmp_path), 'pod-backups'),
                          'vllm_dr_k8s_python': pod_volume_python(str(tmp_path), os.path.dirname(lab.cache_path))})
        work.write_inventory()
        return work

    yield make
    for entry in made:
        lab, namespace = entry[0], entry[1]
        if len(entry) > 2:
            entry[2].__exit__(None, None, None)
            assert not entry[2].errors, entry[2].errors
        delete_workload(kwok, namespace)
        lab.down()


def pods_by_name(workload) -> dict:
    pods = workload.kube.get('pods', namespace=workload.namespace, selector='app=vllm')['items']
    return {pod['metadata']['name']: pod for pod in pods}


def update_revision(workload) -> str:
    return workload.kube.get('statefulset', 'vllm', workload.namespace)['status']['updateRevision']


def fetched_backups(result) -> dict:
    """pod -> the pod named in the backup the run fetched from it (<run>/<namespace>_<pod>/token_cache.db.*.bak)."""
    found = {}
    for path in glob.glob(os.path.join(result['purge']['backup_dir'], '*', f'{CACHE}.*.bak')):
        found[os.path.basename(os.path.dirname(path)).split('_', 1)[1]] = marked(path)
    return found


def test_rolling_update_statefulset_every_pods_own_cache_is_backed_up_purged_and_the_pods_restarted(
        statefulset, tmp_path):
    workload = statefulset(replicas=3)
    before = pods_by_name(workload)
    assert sorted(before) == ['vllm-0', 'vllm-1', 'vllm-2']
    old_revision = update_revision(workload)
    # at -vvv with --diff, logged: the StatefulSet, its revisions and pods carry a secret in their env (POD_ENV)
    env = dict(workload.kube.env, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))

    rc, restored = playbook(workload.inventory_path, 'dr_restore.yml', '-vvv', '--diff', env=env)
    assert rc == 0, restored[-6000:]

    result = report(workload)
    k8s = result['diagnosis']['kubernetes']
    assert (k8s['kind'], k8s['workload']) == ('StatefulSet', 'vllm')
    assert 'deployment' not in k8s
    assert k8s['pods'] == ['vllm-0', 'vllm-1', 'vllm-2']
    reach = k8s['cache_reach']
    assert (reach['strategy'], reach['inspect'], reach['purge']) == ('per_pod', k8s['pods'], k8s['pods']), reach
    assert 'volumeClaimTemplates' in reach['reason'], reach
    # every pod's own copy was backed up from that pod, then purged in it
    assert fetched_backups(result) == {pod: pod for pod in before}
    for pod in ('vllm-1', 'vllm-2'):
        assert not os.path.exists(os.path.join(workload.directories[pod], CACHE)), pod
    # the restart rolled every pod to a new revision, each replaced (a new uid, the same name)
    after = pods_by_name(workload)
    assert sorted(after) == sorted(before)
    new_revision = update_revision(workload)
    assert new_revision != old_revision
    for name, pod in after.items():
        assert pod['metadata']['labels'][REVISION] == new_revision, name
        assert pod['metadata']['uid'] != before[name]['metadata']['uid'], name
    assert result['validation']['failed'] == [], result['validation']
    assert workload.lab.refresh('svc')[0] == 200

    # the rollback puts each ordinal's own backup back into the pod of that name, though every pod was replaced
    rc, output = playbook(workload.inventory_path, 'dr_rollback.yml', '-vvv', '--diff', '-e',
                          f"vllm_dr_rollback_dir={result['purge']['backup_dir']}", '-e',
                          'vllm_dr_rollback_replace_cache=true', env=env)
    assert rc == 0, output[-6000:]
    for pod, directory in workload.directories.items():
        assert f'{workload.namespace}/{pod}: {workload.namespace}_{pod}/' in output, output[-4000:]
        assert marked(os.path.join(directory, CACHE)) == pod
    assert 'ESTABLISH kubectl CONNECTION' in restored + output
    assert leaks(workload, {'dr_restore -vvv --diff': restored, 'dr_rollback -vvv --diff': output},
                 tmp_path / 'ansible.log') == []


def most_at_once(log: str) -> int:
    """The most module runs at the same time, from the `start|end <time>` lines the pods' interpreter wrote."""
    with open(log, encoding='utf-8') as handle:
        marks = sorted((float(stamp), 1 if what == 'start' else -1) for what, stamp in
                       (line.split() for line in handle if line.strip()))
    running = most = 0
    for step in (mark[1] for mark in marks):  # at one time, an end before a start
        running += step
        most = max(most, running)
    return most


def test_the_pods_each_with_a_claim_of_its_own_are_purged_side_by_side_no_more_than_the_setting(statefulset, tmp_path):
    workload = statefulset(replicas=4)
    # the pods' interpreter takes a second more and writes when each module run starts and ends
    log, script = str(tmp_path / 'runs.log'), str(tmp_path / 'python-timed')
    with open(script, 'w', encoding='utf-8') as handle:
        handle.write(f'''#!/bin/sh
echo "start $(date +%s.%N)" >> {shlex.quote(log)}
sleep 1
{shlex.quote(workload.host['vllm_dr_k8s_python'])} "$@"
rc=$?
echo "end $(date +%s.%N)" >> {shlex.quote(log)}
exit $rc
''')
    os.chmod(script, 0o755)
    inventory = workload.write_inventory(vllm_dr_k8s_python=script, vllm_dr_k8s_parallel_pods=2)
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    result = report(workload)
    assert result['diagnosis']['kubernetes']['cache_reach']['own_copies'] is True
    assert sorted(result['purge']['cache_pods']) == ['vllm-0', 'vllm-1', 'vllm-2', 'vllm-3']
    # two at a time (the diagnosis reads the pods one after the other): never more than the setting
    assert most_at_once(log) == 2
    assert fetched_backups(result) == {pod: pod for pod in workload.directories}
    assert result['validation']['failed'] == [], result['validation']


def test_partition_rolls_only_the_ordinals_above_it_and_the_run_names_the_pods_left(statefulset):
    workload = statefulset(replicas=3, partition=2)
    before = pods_by_name(workload)

    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    sts = workload.kube.get('statefulset', 'vllm', workload.namespace)
    assert sts['spec']['updateStrategy']['rollingUpdate']['partition'] == 2  # never changed
    after = pods_by_name(workload)
    assert after['vllm-2']['metadata']['uid'] != before['vllm-2']['metadata']['uid']
    assert after['vllm-2']['metadata']['labels'][REVISION] == sts['status']['updateRevision']
    for name in ('vllm-0', 'vllm-1'):
        assert after[name]['metadata']['uid'] == before[name]['metadata']['uid'], name
    assert 'has partition 2 (left unchanged)' in output and 'vllm-0, vllm-1 stay at their revision' in output
    markdown = open(glob.glob(os.path.join(str(workload.reports), '**', 'lab.md'), recursive=True)[0],
                    encoding='utf-8').read()
    assert '- Left at their revision by the partition (2, unchanged): vllm-0, vllm-1' in markdown, markdown


def test_on_delete_statefulset_pods_are_replaced_one_by_one_in_ordinal_order(statefulset):
    workload = statefulset(replicas=3, strategy='OnDelete')
    before = pods_by_name(workload)

    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    after = pods_by_name(workload)
    revision = update_revision(workload)
    for name in before:
        assert after[name]['metadata']['uid'] != before[name]['metadata']['uid'], name
        assert after[name]['metadata']['labels'][REVISION] == revision, name
    # in ordinal order, each replacement ready before the next pod was deleted
    created = [after[name]['metadata']['creationTimestamp'] for name in ('vllm-0', 'vllm-1', 'vllm-2')]
    assert created == sorted(created), created
    deleted = [line for line in output.splitlines() if 'Delete the pod to replace it: ' in line]
    assert [line.rsplit(': ', 1)[1].split(']')[0] for line in deleted] == ['vllm-0', 'vllm-1', 'vllm-2'], deleted
    assert fetched_backups(report(workload)) == {pod: pod for pod in before}
    assert report(workload)['validation']['failed'] == []


def test_check_mode_on_a_statefulset_changes_no_object_and_no_file(statefulset):
    workload = statefulset(replicas=2)
    kube, namespace = workload.kube, workload.namespace

    def state():
        objects = {}
        for kind in ('statefulsets', 'pods', 'configmaps', 'persistentvolumeclaims'):
            for item in kube.get(kind, namespace=namespace)['items']:
                objects[f"{kind}/{item['metadata']['name']}"] = item['metadata']['resourceVersion']
        files = {}
        for directory in workload.directories.values():
            for path in glob.glob(os.path.join(directory, CACHE + '*')):
                with open(path, 'rb') as handle:
                    files[path] = handle.read()
        return objects, files

    before = state()
    rc, output = run(workload, '--check')
    assert rc == 0, output[-6000:]
    assert state() == before


def test_a_daemonset_pod_is_refused_in_one_line_before_any_change(kwok, tmp_path):
    namespace = f'vllm-{uuid.uuid4().hex[:8]}'
    kwok.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': namespace}},
               {'apiVersion': 'apps/v1', 'kind': 'DaemonSet', 'metadata': {'name': 'agent', 'namespace': namespace},
                'spec': {'selector': {'matchLabels': {'app': 'vllm'}},
                         'template': {'metadata': {'labels': {'app': 'vllm'}},
                                      'spec': {'containers': [{'name': 'vllm', 'image': 'vllm'}]}}}})
    try:
        deadline = time.monotonic() + 120
        while not kwok.running_pods(namespace):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        lab = Lab(str(tmp_path / 'lab'))
        lab.up(sessions=1)
        try:
            work = Workload(kwok, lab, namespace, tmp_path)
            before = {item['metadata']['name']: item['metadata']['resourceVersion']
                      for item in kwok.get('pods', namespace=namespace)['items']}
            rc, output = run(work)
            assert rc != 0
            assert 'is run by DaemonSet agent in namespace %s, not a workload the runbook restarts; supported ' \
                   'kinds: Deployment, LeaderWorkerSet, StatefulSet' % namespace in output, output[-4000:]
            assert {item['metadata']['name']: item['metadata']['resourceVersion']
                    for item in kwok.get('pods', namespace=namespace)['items']} == before
        finally:
            lab.down()
    finally:
        delete_workload(kwok, namespace)


# playbook -> the Roles of rbac.yml it runs with on a StatefulSet (its own, and the StatefulSet's of it)
STATEFULSET_ROLES = {
    'dr_restore.yml': ['vllm-dr-restore', 'vllm-dr-restore-statefulset'],
    'dr_detect.yml': ['vllm-dr-detect', 'vllm-dr-detect-statefulset'],
}


@pytest.mark.parametrize('name', list(STATEFULSET_ROLES))
def test_statefulset_runs_with_its_shipped_roles_and_each_statefulset_rule_taken_away_is_named(
        statefulset, tmp_path, name):
    # OnDelete: the restart deletes the pods, the one rule only such a StatefulSet needs; before the incident, as the
    # Deployment's test runs (dr_detect.yml fails on the incident it finds, by design)
    workload = statefulset(replicas=2, strategy='OnDelete', incident=False)
    kube, namespace = workload.kube, workload.namespace
    velero_ns = f'velero-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', velero_ns)
    roles = shipped_roles(STATEFULSET_ROLES[name], ['vllm-dr-restores'])
    assert len(roles) == 3, roles
    # no rule of a Deployment's in them
    assert not [rule for role in roles for rule in role['rules']
                if {'deployments', 'replicasets'} & set(rule['resources'])], roles
    extra = ('-e', 'vllm_dr_force=true') if name == 'dr_restore.yml' else ()
    try:
        grant(kube, namespace, velero_ns, 'vllm-dr-sts', roles)
        inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path,
                                                                                           'vllm-dr-sts')},
                                             vllm_dr_k8s_velero_namespace=velero_ns)
        rc, output = playbook(inventory, name, *extra, env=kube.env)
        assert rc == 0, output[-6000:]
        own = roles[1]
        for index, rule in enumerate(own['rules']):
            account = f'vllm-dr-sts-{index}'
            narrowed = [roles[0], {**own, 'rules': [r for i, r in enumerate(own['rules']) if i != index]}, roles[2]]
            grant(kube, namespace, velero_ns, account, narrowed)
            inventory = workload.write_inventory(
                vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                vllm_dr_k8s_velero_namespace=velero_ns)
            rc, output = playbook(inventory, name, *extra, env=kube.env)
            refusal = re.search(r'missing Kubernetes permissions?: (.*?); grant (?:it|them) to this identity', output)
            assert rc != 0 and refusal, (rule, output[-4000:])
            for permission in refusal.group(1).split('; '):
                verb, resource = permission.split()[:2]
                assert verb in rule['verbs'] and resource.split('.')[0] in rule['resources'], (rule, permission)
    finally:
        kube.kubectl('delete', 'namespace', velero_ns, '--wait=false', check=False)


def test_a_pod_deleted_mid_purge_stops_the_run_before_the_restart_in_one_line_nothing_lost(statefulset, tmp_path):
    workload = statefulset(replicas=2)
    kube, namespace = workload.kube, workload.namespace
    generation = kube.get('statefulset', 'vllm', namespace)['metadata']['generation']
    config_before = workload.config_map()['data']
    # the pods' interpreter deletes vllm-1 once the purge in vllm-0 wrote its backup, before the loop reaches vllm-1;
    # the StatefulSet brings back a pod of the same name
    deleted, script = str(tmp_path / 'deleted'), str(tmp_path / 'python-deleting')
    command = (kube.kubectl_path, '--kubeconfig', kube.kubeconfig, '-n', namespace, 'delete', 'pod', 'vllm-1',
               '--wait=true')
    kubectl = ' '.join(shlex.quote(part) for part in command)
    with open(script, 'w', encoding='utf-8') as handle:
        handle.write(f'''#!/bin/sh
{shlex.quote(workload.host['vllm_dr_k8s_python'])} "$@"
rc=$?
if [ ! -e {shlex.quote(deleted)} ] && [ -n "$(find {shlex.quote(str(tmp_path / 'pod-backups'))} -type f | head -n 1)" ]; then
  {kubectl} >/dev/null 2>&1 && touch {shlex.quote(deleted)}
fi
exit $rc
''')
    os.chmod(script, 0o755)
    # one pod after the other, in ordinal order (vllm_dr_k8s_parallel_pods: 1), so that vllm-1 is still to come
    inventory = workload.write_inventory(vllm_dr_k8s_python=script, vllm_dr_k8s_parallel_pods=1)
    rc, output = run(workload, inventory=inventory)
    assert os.path.exists(deleted), output[-6000:]
    assert rc != 0, output[-6000:]
    match = re.search(rf'pod vllm-1 of StatefulSet vllm in namespace {namespace} (went away during the purge|was '
                      r'replaced during the purge)[^\n]*\nthe cache was purged in 1 other pod \(backups in (\S+)\); '
                      r'sessions, the configuration and the StatefulSet were left as they were: re-run', output)
    assert match, output[-6000:]
    # nothing lost: vllm-0's own copy is on the controller; the StatefulSet and the configuration were not touched
    fetched = glob.glob(os.path.join(match.group(2), f'{namespace}_vllm-0', f'{CACHE}.*.bak'))
    assert fetched and marked(fetched[0]) == 'vllm-0', output[-3000:]
    assert kube.get('statefulset', 'vllm', namespace)['metadata']['generation'] == generation
    assert workload.config_map()['data'] == config_before


def test_the_statefulset_rollout_wait_outlasts_an_api_server_restart(statefulset):
    workload = statefulset(replicas=2)
    kube = workload.kube
    if not kube.owned:
        pytest.skip('stops the API server: only on the suite\'s own cluster')

    def restarted() -> bool:
        try:
            template = kube.get('statefulset', 'vllm', workload.namespace)['spec']['template']
        except (KubeError, subprocess.TimeoutExpired):
            return False
        return 'kubectl.kubernetes.io/restartedAt' in (template['metadata'].get('annotations') or {})

    # the replaced pod cannot be scheduled: the rollout is still in progress when the API server goes away
    rc, output = run_through_api_outage(workload, restarted)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    revision = update_revision(workload)
    assert all(pod['metadata']['labels'][REVISION] == revision for pod in pods_by_name(workload).values())
