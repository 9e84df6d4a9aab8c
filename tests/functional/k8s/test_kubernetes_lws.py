"""The runbook on a LeaderWorkerSet (sigs.k8s.io/lws), with the real lws controller on the suite's control plane.

The incident's workload runs as groups of a leader and workers, each pod with a claim of its own for the token cache
(volumeClaimTemplates): every pod that holds a copy has one directory of its own on this machine, where kwok runs its
`kubectl exec` (one Exec per pod, pod_directories()); the leader of group 0's is the lab's data directory, the one the
gateway reads. The gateway restarts when the pods of a new template revision come (LwsGatewayRuntime)."""

from __future__ import annotations

import copy
import glob
import os
import re
import shlex
import time
import uuid

import pytest

from harness.k8s import KubeError, pod_directories, pod_volume_python
from harness.k8s_runbook import leaks, report, run, run_cordoned, run_through_api_outage
from harness.lws import LwsGatewayRuntime, delete_lws_workload, lws_pod_names, lws_ready, lws_vllm_workload
from harness.playbooks import playbook
from lab.labctl import Lab
from conftest import Workload
from test_kubernetes_rbac_per_playbook import grant, kubeconfig_of, shipped_roles

GROUPS, SIZE = 2, 2
CACHE = 'token_cache.db'
RESTARTED = 'kubectl.kubernetes.io/restartedAt'
LEADERS = [f'vllm-{group}' for group in range(GROUPS)]


class LwsWorkload(Workload):
    def lws(self) -> dict:
        return self.kube.get('leaderworkerset', 'vllm', self.namespace)

    def uids(self) -> dict:
        return {pod['metadata']['name']: pod['metadata']['uid'] for pod in self.pods()}


def lws_workload(kwok, tmp_path, cache_in: str, groups: int = GROUPS, size: int = SIZE):
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=3)
    namespace = f'lws-{uuid.uuid4().hex[:8]}'
    try:
        lab.snapshot()
        lab.rotate()
        lab.restore()
        backups = str(tmp_path / 'pod-backups')
        os.makedirs(backups, mode=0o700)
        kwok.apply(*lws_vllm_workload(namespace, lab, groups, size, cache_in=cache_in, backups=backups))
        lws_ready(kwok, namespace, groups)
        directories = pod_directories(kwok, namespace, lab, str(tmp_path), 'per-pod')
        with LwsGatewayRuntime(kwok, namespace, lab) as running:
            work = LwsWorkload(kwok, lab, namespace, tmp_path)
            work.runtime, work.directories = running, directories
            # relative: each pod's own directory, the container's workingDir
            work.host.update({'vllm_dr_cache_path': CACHE, 'vllm_dr_k8s_pod_backup_dir': backups,
                              'vllm_dr_k8s_python': pod_volume_python(str(tmp_path), os.path.dirname(lab.cache_path))})
            work.write_inventory()
            yield work
            assert not running.errors, running.errors
    finally:
        delete_lws_workload(kwok, namespace, groups, size)
        lab.down()


@pytest.fixture
def lws_all(kwok, lws_controller, tmp_path):
    yield from lws_workload(kwok, tmp_path, 'all')


@pytest.fixture
def lws_leader(kwok, lws_controller, tmp_path):
    yield from lws_workload(kwok, tmp_path, 'leader')


def copies(workload) -> dict:
    """pod -> whether its directory still holds the token cache."""
    return {pod: os.path.exists(os.path.join(directory, CACHE)) for pod, directory in workload.directories.items()}


def run_dir_of(output: str) -> str:
    match = re.search(r'backups in (\S+?/runs?/[^\s,;)]+)', output) or re.search(r'"(/\S+/runs/[^"/]+)"', output)
    assert match, output[-4000:]
    return match.group(1)


def fetched_backups(workload) -> dict:
    """<namespace>_<pod> -> the .bak files the run copied to the controller."""
    found = {}
    for path in glob.glob(str(workload.reports.parent / '**' / f'{workload.namespace}_*' / '*.bak'), recursive=True):
        found.setdefault(os.path.basename(os.path.dirname(path)), []).append(path)
    return found


def test_every_pod_of_every_group_is_purged_and_the_groups_restarted_by_a_template_change(lws_all):
    workload = lws_all
    before = workload.uids()
    assert all(copies(workload).values())
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    # every copy purged, in every pod of every group, each backed up first and fetched to the controller
    assert not any(copy for pod, copy in copies(workload).items() if pod != 'vllm-0'), output[-6000:]
    reach = report(workload)['diagnosis']['kubernetes']['cache_reach']
    assert sorted(reach['purge']) == sorted(lws_pod_names(GROUPS, SIZE))
    # LWS's own restart: both templates annotated, every group rolled, the same names, every pod new
    templates = workload.lws()['spec']['leaderWorkerTemplate']
    assert RESTARTED in templates['workerTemplate']['metadata']['annotations']
    after = workload.uids()
    assert sorted(after) == sorted(before) and not set(after.values()) & set(before.values())
    assert workload.runtime.restarts


def test_the_leaders_alone_are_purged_when_the_workers_hold_no_cache(lws_leader):
    workload = lws_leader
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    left = copies(workload)
    assert [pod for pod, copy in left.items() if copy and pod not in LEADERS] == sorted(
        pod for pod in lws_pod_names(GROUPS, SIZE) if pod not in LEADERS)
    assert not left['vllm-1']
    templates = workload.lws()['spec']['leaderWorkerTemplate']
    for role in ('leaderTemplate', 'workerTemplate'):
        assert RESTARTED in templates[role]['metadata']['annotations'], role


def test_check_mode_changes_nothing(lws_all):
    workload = lws_all
    generation, uids, config = workload.lws()['metadata']['generation'], workload.uids(), workload.config_map()['data']
    rc, output = run(workload, '--check')
    assert rc == 0, output[-6000:]
    assert workload.lws()['metadata']['generation'] == generation
    assert workload.uids() == uids
    assert workload.config_map()['data'] == config
    assert all(copies(workload).values())
    assert not workload.runtime.restarts


def test_the_rollback_puts_each_pods_own_backup_back_by_its_stable_name(lws_all, tmp_path):
    workload = lws_all
    # at -vvv with --diff, logged: the LeaderWorkerSet, its revisions and pods carry a secret in their env (POD_ENV)
    env = dict(workload.kube.env, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))
    rc, restored = playbook(workload.inventory_path, 'dr_restore.yml', '-vvv', '--diff', env=env)
    assert rc == 0, restored[-6000:]
    run_dir = report(workload)['purge']['backup_dir']
    rc, output = playbook(workload.inventory_path, 'dr_rollback.yml', '-vvv', '--diff', '-e',
                          f'vllm_dr_rollback_dir={run_dir}', '-e', 'vllm_dr_rollback_replace_cache=true', env=env)
    assert rc == 0, output[-6000:]
    for pod in lws_pod_names(GROUPS, SIZE):
        assert re.search(rf'{workload.namespace}/{pod}: {workload.namespace}_{pod}/token_cache\.db\.\S+\.bak '
                         r'\(its own backup\)', output), output[-6000:]
    assert all(copies(workload).values())
    assert leaks(workload, {'dr_restore -vvv --diff': restored, 'dr_rollback -vvv --diff': output},
                 tmp_path / 'ansible.log') == []


def test_the_wait_outlasts_an_api_server_restart_and_judges_the_groups_when_it_is_back(lws_all):
    workload = lws_all
    kube = workload.kube
    if not kube.owned:
        pytest.skip('stops the API server: only on the suite\'s own cluster')

    def restarted():
        try:
            return RESTARTED in (workload.lws()['spec']['leaderWorkerTemplate']['workerTemplate']['metadata']
                                 .get('annotations') or {})
        except (KubeError, Exception):  # pylint: disable=broad-except
            return False

    rc, output = run_through_api_outage(workload, restarted)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []


def test_a_rollout_its_controller_stopped_judging_fails_at_the_deadline_saying_so(lws_all, lws_controller, tmp_path):
    """The LWS controller stops once group 1's pods of the restart exist, before they are ready (killed: as one whose
    watches were down when the last StatefulSet change came, it judges nothing more). Its status keeps counting group
    1 not ready while its pods are: the wait fails at its deadline, counts the groups' pods against the status and
    says how to make the controller judge them again, at -vvv with --diff without showing a secret. Once the
    controller runs again, the rollout finishes; the annotation the message proposes restarts nothing."""
    workload, kube = lws_all, lws_all.kube
    if not kube.owned:
        pytest.skip('stops the LWS controller: only on the suite\'s own cluster')
    before = {pod['metadata']['name']: pod['metadata']['uid'] for pod in workload.pods()}

    def restarted_group_one() -> bool:
        uids = {pod['metadata']['name']: pod['metadata']['uid']
                for pod in kube.get('pods', namespace=workload.namespace)['items']}
        return all(uids.get(name, before[name]) != before[name] for name in ('vllm-1', 'vllm-1-1'))

    env = dict(kube.env, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))
    try:
        # group 1's pods of the restart exist, pending on the cordoned node, when the controller is killed
        rc, message = run_cordoned(workload, restarted_group_one, lambda _running: lws_controller.kill(), 30,
                                   '-vvv', '--diff', env=env)
        assert rc != 0, message[-4000:]
        assert 'did not finish in 30 s: groups updated' in message, message[-4000:]
        assert "its groups' pods show 2 ready and 1 updated, more than its status counts" in message, message[-4000:]
        assert (f'kubectl -n {workload.namespace} annotate leaderworkerset vllm vllm-dr.inferops.io/reconcile='
                in message)
        assert leaks(workload, {'dr_restore -vvv --diff': message}, tmp_path / 'ansible.log') == []
    finally:
        if lws_controller.process.poll() is not None:
            lws_controller.start_again()
    lws_ready(kube, workload.namespace, GROUPS)
    rolled = workload.uids()
    kube.kubectl('-n', workload.namespace, 'annotate', 'leaderworkerset', 'vllm',
                 f'vllm-dr.inferops.io/reconcile={int(time.time())}', '--overwrite')
    time.sleep(5)
    assert 'vllm-dr.inferops.io/reconcile' in lws_ready(kube, workload.namespace, GROUPS)['metadata']['annotations']
    assert workload.uids() == rolled


def deleting_python(workload, pod: str, work) -> tuple:
    """The pods' interpreter (pod_volume_python) that deletes `pod` once the purge's first backup is written, in the
    loop's own step: (its path, the file it creates once `pod` is deleted). The loop visits the leaders first, so a
    worker is still to come. The node is cordoned first: the pod the controller makes again under the same name (and
    its group's, RecreateGroupOnPodRestart) stays pending, so the purge cannot reach it."""
    python, deleted = workload.host['vllm_dr_k8s_python'], os.path.join(work, 'deleted')
    backups = workload.host['vllm_dr_k8s_pod_backup_dir']
    base = (workload.kube.kubectl_path, '--kubeconfig', workload.kube.kubeconfig)
    kubectl = ' '.join(shlex.quote(part) for part in base + ('cordon', 'kwok-node-0')) + ' && ' + ' '.join(
        shlex.quote(part) for part in base + ('-n', workload.namespace, 'delete', 'pod', pod, '--grace-period=0',
                                              '--force'))
    script = os.path.join(work, 'deleting-python')
    with open(script, 'w', encoding='utf-8') as handle:
        handle.write(f'''#!/bin/sh
{shlex.quote(python)} "$@"
rc=$?
if [ ! -e {shlex.quote(deleted)} ] && [ -n "$(find {shlex.quote(backups)} -name '*.bak' 2>/dev/null | head -n 1)" ]; then
  {{ {kubectl}; }} >/dev/null 2>&1 && touch {shlex.quote(deleted)}
fi
exit $rc
''')
    os.chmod(script, 0o755)
    return script, deleted


def test_a_pod_deleted_during_the_purge_is_named_and_the_rerun_completes(lws_all, tmp_path):
    workload = lws_all
    generation, config = workload.lws()['metadata']['generation'], workload.config_map()['data']
    python, deleted = deleting_python(workload, 'vllm-1-1', str(tmp_path))
    # one pod after the other, leaders first (vllm_dr_k8s_parallel_pods: 1), so that the worker is still to come
    inventory = workload.write_inventory(vllm_dr_k8s_python=python, vllm_dr_k8s_parallel_pods=1)
    try:
        rc, output = run(workload, inventory=inventory)
    finally:
        workload.kube.kubectl('uncordon', 'kwok-node-0', check=False)
    assert os.path.exists(deleted), output[-6000:]
    assert rc != 0, output[-6000:]
    assert re.search(rf'pod vllm-1-1 of LeaderWorkerSet vllm in namespace {workload.namespace} went away during the '
                     r'purge \(deleted or replaced\), so its cache was not purged', output), output[-6000:]
    assert re.search(r'the cache was purged in \d other pods? \(backups in \S+\); sessions, the configuration and the '
                     r'LeaderWorkerSet were left as they were: re-run to purge the pods running now', output), \
        output[-6000:]
    assert 'Traceback' not in output
    # the leader, purged before its group was recreated, or not reached: a backup not copied is named, and is there
    # (the path list ends the line: a newline in the task's output, an escaped one in the JSON result)
    for paths in re.findall(r"stays on the pod's volume: ([^\"\\\n]+)", output):
        assert all(os.path.isfile(path) for path in paths.split(', ')), output[-6000:]
    assert workload.lws()['metadata']['generation'] == generation
    assert workload.config_map()['data'] == config
    # the group the controller recreated (RecreateGroupOnPodRestart) is back; the re-run purges the pods running now
    lws_ready(workload.kube, workload.namespace, GROUPS)
    rc, output = run(workload, inventory=workload.write_inventory())
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert not any(copy for pod, copy in copies(workload).items() if pod != 'vllm-0'), output[-6000:]


def without_deployment_rules(role: dict) -> dict:
    """A shipped Role without its Deployment's rules (deployments, replicasets): what a LeaderWorkerSet leaves unused."""
    role = copy.deepcopy(role)
    role['rules'] = [rule for rule in role['rules']
                     if not set(rule['resources']) & {'deployments', 'replicasets'}]
    return role


@pytest.mark.parametrize(('name', 'roles', 'velero_roles'), [
    ('dr_restore.yml', ['vllm-dr-restore', 'vllm-dr-lws-restore'], ['vllm-dr-restores']),
    ('dr_rollback.yml', ['vllm-dr-rollback', 'vllm-dr-lws-read'], []),
])
def test_the_shipped_lws_roles_are_least_privilege(lws_all, tmp_path, name, roles, velero_roles):
    workload = lws_all
    kube, namespace = workload.kube, workload.namespace
    velero_ns = f'velero-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', velero_ns)
    shipped = [without_deployment_rules(role) for role in shipped_roles(roles, velero_roles)]
    lws_roles = [index for index, role in enumerate(shipped) if role['metadata']['name'].startswith('vllm-dr-lws-')]
    assert lws_roles
    extra = ('-e', 'vllm_dr_force=true')
    if name == 'dr_rollback.yml':
        rc, output = run(workload)
        assert rc == 0, output[-6000:]
        extra = ('-e', f"vllm_dr_rollback_dir={report(workload)['purge']['backup_dir']}",
                 '-e', 'vllm_dr_rollback_replace_cache=true')
    try:
        grant(kube, namespace, velero_ns, 'vllm-dr-lws', shipped)
        inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path,
                                                                                           'vllm-dr-lws')},
                                             vllm_dr_k8s_velero_namespace=velero_ns)
        rc, output = playbook(inventory, name, *extra, env=kube.env)
        # green without any of the Deployment's rights
        assert rc == 0, output[-6000:]
        for role_index in lws_roles:
            for rule_index, rule in enumerate(shipped[role_index]['rules']):
                account = f'vllm-dr-lws-{role_index}-{rule_index}'
                narrowed = copy.deepcopy(shipped)
                del narrowed[role_index]['rules'][rule_index]
                grant(kube, namespace, velero_ns, account, narrowed)
                inventory = workload.write_inventory(
                    vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                    vllm_dr_k8s_velero_namespace=velero_ns)
                generation = workload.lws()['metadata']['generation']
                rc, output = playbook(inventory, name, *extra, env=kube.env)
                refusal = re.search(r'missing Kubernetes permissions?: (.*?); grant (?:it|them) to this identity',
                                    output)
                assert rc != 0 and refusal, (rule, output[-4000:])
                for permission in refusal.group(1).split('; '):
                    verb, resource = permission.split()[:2]
                    assert verb in rule['verbs'] and resource.split('.')[0] in rule['resources'], (rule, permission)
                assert workload.lws()['metadata']['generation'] == generation
    finally:
        kube.kubectl('delete', 'namespace', velero_ns, '--wait=false', check=False)
