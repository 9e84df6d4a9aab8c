"""Benchmark: the runbook on Kubernetes at 2, 20 and 100 replicas, against the write-up's manual procedure (make bench-k8s).

On the kwok control plane (tests/harness/k8s.py, a cluster of its own with an audit log), for each replica count and
round: the incident lab (snapshot, rotation at the provider, restore), a `vllm` Deployment of that many pods, and then
either dr_restore.yml or the manual procedure, each on a fresh lab and namespace.

- Each pod has its own cache directory: one kwok Exec per pod runs `kubectl exec` in that pod's directory (the
  first pod's is the lab's data directory, the one the gateway reads), each holding a copy of the restored cache,
  so that every purge is real. The cache path is relative (token_cache.db), resolved against the container's
  workingDir, as `kubectl exec` resolves it in a real container.
- --volume emptyDir (default): the cache directory is an emptyDir, one per pod, gone with the pod; the lab gateway
  starts with an empty one when the new ReplicaSet's pods come (what a kubelet gives a new pod).
  --volume pvc: one claim every replica mounts; every pod's exec runs in the lab's data directory.
- The Deployment uses Kubernetes' default rolling update (maxSurge 25%, maxUnavailable 25%).
- Wall time per phase: from the ansible log's task timestamps, a phase starting at its first task (diagnose:
  the restore role; purge: the purge role; restart: the restart handler; validate: the validate role). The manual
  procedure times its own steps.
- API calls per phase: the kube-apiserver's audit log (one event per request, stage ResponseComplete, plus watches
  that end at the run's end: stage ResponseStarted), counting only the requests of the run's own identity (a
  service account bound to the namespace's `admin` ClusterRole), so the harness's own polling is not counted.
  Both the kubectl connection's and kubernetes.core's requests are in it.
The manual procedure (the write-up's, over every pod): `kubectl logs` of every pod; `kubectl exec <pod> -- rm -f
token_cache.db` in each; vllm.yaml edited (`kubectl get configmap`, refresh_on_startup set, `kubectl apply`);
`kubectl rollout restart` and `kubectl rollout status`; then `kubectl logs -l app=vllm` to check the new pods.
Ends with one line: `100 replicas: X.XX× the 2-replica time, Y.YY× the manual baseline` (medians of the rounds).
--kind statefulset: a `vllm` StatefulSet instead (tests/harness/k8s.py statefulset_workload: a PersistentVolumeClaim
per pod from volumeClaimTemplates, one kwok Exec per pod, each pod's own copy of the cache at the path its container
sees); the manual procedure is the same over every pod, with `kubectl rollout restart/status statefulset/vllm`, and
the line reads `100 replicas (statefulset): ...`.
--kind lws: a LeaderWorkerSet (the lws controller runs on the bench's cluster, tests/harness/lws.py) of groups of 4
pods (100 replicas: 25 groups; 2 replicas: one group of 2), each pod with a claim of its own (volumeClaimTemplates)
mounted by leader and workers, so every pod's copy is purged by an exec in it. The groups roll a quarter at a time.
The manual procedure restarts the groups by a template change (`kubectl patch`: a LeaderWorkerSet has no `rollout
restart`) and waits with `kubectl wait` on its status; the line reads `100 replicas (lws): ...`.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tests'))

# pylint: disable=wrong-import-position
from harness.k8s import (GatewayRuntime, KubeCluster, delete_workload, pod_directories, pod_volume_python,  # noqa: E402
                         statefulset_workload, vllm_workload)
from harness.lws import (LwsController, LwsGatewayRuntime, delete_lws_workload, lws_ready,  # noqa: E402
                         lws_vllm_workload)
from lab.labctl import Lab  # noqa: E402

PHASES = ('diagnose', 'purge', 'restart', 'validate')
IDENTITY = 'vllm-dr-bench'
CACHE = 'token_cache.db'
AUDIT_POLICY = {
    'apiVersion': 'audit.k8s.io/v1', 'kind': 'Policy', 'omitStages': ['RequestReceived'],
    'rules': [{'level': 'Metadata', 'userGroups': ['system:serviceaccounts']}, {'level': 'None'}],
}
# the first ansible log line of each phase; the k8s_target role's tasks (access, discover, rollout wait) run inside
# these phases and match none of the marks
PHASE_MARKS = (('diagnose', re.compile(r'TASK \[inferops\.vllm_dr\.restore : ')),
               ('purge', re.compile(r'TASK \[inferops\.vllm_dr\.purge : ')),
               ('restart', re.compile(r'RUNNING HANDLER \[')),
               ('validate', re.compile(r'TASK \[inferops\.vllm_dr\.validate : ')))
LOG_STAMP = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ')


class EmptyDirRuntime(GatewayRuntime):
    """The kubelet's part for an emptyDir cache: a pod of the new ReplicaSet starts with an empty cache directory."""

    def _restart_gateway(self) -> None:
        self.lab.state = self.lab._load()  # pylint: disable=protected-access
        self.lab.stop_gateway()
        for path in glob.glob(self.lab.cache_path + '*'):
            os.unlink(path)
        config = self.cluster.get('configmap', 'vllm-config', self.namespace)['data']['vllm.yaml']
        with open(self.lab.config_path, 'w', encoding='utf-8') as handle:
            handle.write(config)
        self.lab.start_gateway()


def workload_documents(namespace: str, lab, replicas: int, volume: str, kind: str = 'deployment',
                       work: str = '') -> list:
    if kind == 'statefulset':
        # a claim per pod (volumeClaimTemplates) and one kwok Exec per pod, made with the workload
        documents = statefulset_workload(namespace, lab, work, replicas)[0]
    else:
        # an emptyDir cache gets one kwok Exec per pod (pod_directories) instead of the namespace's one
        documents = [doc for doc in vllm_workload(namespace, lab, replicas, cache_volume=volume)
                     if not (volume == 'emptyDir' and doc['kind'] == 'ClusterExec')]
    data_dir = os.path.dirname(lab.cache_path)
    for doc in documents:
        if doc['kind'] == 'Deployment':
            doc['spec']['strategy'] = {'type': 'RollingUpdate', 'rollingUpdate': {'maxSurge': '25%', 'maxUnavailable': '25%'}}
            doc['spec']['template']['spec']['containers'][0]['workingDir'] = data_dir
    documents += [
        {'apiVersion': 'v1', 'kind': 'ServiceAccount', 'metadata': {'name': IDENTITY, 'namespace': namespace}},
        {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
         'metadata': {'name': IDENTITY, 'namespace': namespace},
         'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole', 'name': 'admin'},
         'subjects': [{'kind': 'ServiceAccount', 'name': IDENTITY, 'namespace': namespace}]},
    ]
    return documents


def identity_kubeconfig(kube, namespace: str, work: str) -> str:
    token = kube.kubectl('-n', namespace, 'create', 'token', IDENTITY, '--duration=1h').strip()
    config = yaml.safe_load(kube.kubectl('config', 'view', '--raw', '--minify', '-o', 'yaml'))
    config['users'] = [{'name': IDENTITY, 'user': {'token': token}}]
    config['contexts'][0]['context']['user'] = IDENTITY
    path = os.path.join(work, f'{namespace}.kubeconfig')
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), 'w', encoding='utf-8') as handle:
        yaml.safe_dump(config, handle)
    return path


def inventory(lab, namespace: str, kubeconfig: str, work: str, kind: str = 'deployment') -> str:
    host = lab.inventory(os.path.join(work, 'reports'))['all']['children']['vllm']['hosts']['lab']
    for key in ('vllm_dr_restart_command', 'vllm_dr_config_path', 'vllm_dr_log_path'):
        host.pop(key)
    host.update({'vllm_dr_platform': 'kubernetes', 'vllm_dr_k8s_auth': {'kubeconfig': kubeconfig},
                 'vllm_dr_k8s_namespace': namespace, 'vllm_dr_k8s_python': sys.executable,
                 'vllm_dr_k8s_rollout_timeout': 600,
                 # each copy of the cache once, from the volume that holds it (an older runbook ignores it)
                 'vllm_dr_k8s_cache_reach': 'auto',
                 # relative: each pod's own directory (its container's workingDir); the backups, written before each
                 # purge, go to one directory of this machine (every name is unique), from which each is fetched
                 'vllm_dr_cache_path': CACHE, 'vllm_dr_k8s_pod_backup_dir': os.path.join(work, 'pod-backups')})
    if kind in ('statefulset', 'lws'):
        # each pod's own claim at the path its container sees (harness.k8s.pod_volume_python)
        host['vllm_dr_k8s_python'] = pod_volume_python(work, os.path.dirname(lab.cache_path))
    path = os.path.join(work, 'inventory.yml')
    with open(path, 'w', encoding='utf-8') as handle:
        yaml.safe_dump({'all': {'children': {'vllm': {'hosts': {'lab': host}}}}}, handle)
    return path


def log_phases(log_path: str, end: float) -> list:
    """[(phase, start epoch)] from the ansible log, in order."""
    starts = []
    with open(log_path, encoding='utf-8', errors='replace') as handle:
        for line in handle:
            stamp = LOG_STAMP.match(line)
            if not stamp:
                continue
            for index, (phase, mark) in enumerate(PHASE_MARKS):
                if mark.search(line) and index >= len(starts):
                    at = datetime.strptime(stamp.group(1), '%Y-%m-%d %H:%M:%S,%f').timestamp()
                    starts.extend((PHASES[missing], at) for missing in range(len(starts), index + 1))
    return starts + [('end', end)]


def run_runbook(kube, lab, namespace: str, kubeconfig: str, work: str, kind: str = 'deployment') -> list:
    log_path = os.path.join(work, 'ansible.log')
    env = dict(kube.env, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_LOG_PATH=log_path,
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, 'build', 'collections'))
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'), '-i',
                          inventory(lab, namespace, kubeconfig, work, kind),
                          os.path.join(ROOT, 'playbooks', 'dr_restore.yml')],
                         capture_output=True, text=True, env=env, check=False)
    end = time.time()
    if out.returncode != 0:
        raise RuntimeError(f'dr_restore.yml failed ({out.returncode}):\n{out.stdout[-6000:]}{out.stderr[-2000:]}')
    return log_phases(log_path, end)


def run_manual(kube, namespace: str, kubeconfig: str, replicas: int, kind: str = 'deployment') -> list:
    def kubectl(*args, stdin=None):
        return kube.kubectl('-n', namespace, *args, stdin=stdin, kubeconfig=kubeconfig)
    marks = [('diagnose', time.time())]
    pods = kubectl('get', 'pods', '-l', 'app=vllm', '-o', 'jsonpath={.items[*].metadata.name}').split()
    errors = sum(len(re.findall(r'TokenRefreshError|Invalid token', kubectl('logs', pod, '-c', 'vllm'))) for pod in pods)
    if not errors:
        raise RuntimeError('manual procedure: no incident in the logs')
    marks.append(('purge', time.time()))
    for pod in pods:
        kubectl('exec', pod, '-c', 'vllm', '--', 'rm', '-f', CACHE)
    config = json.loads(kubectl('get', 'configmap', 'vllm-config', '-o', 'json'))
    document = yaml.safe_load(config['data']['vllm.yaml'])
    document.setdefault('session_state_store', {})['refresh_on_startup'] = True
    config['data']['vllm.yaml'] = yaml.safe_dump(document)
    kubectl('apply', '-f', '-', stdin=json.dumps(config))
    marks.append(('restart', time.time()))
    kubectl('rollout', 'restart', f'{kind}/vllm')
    kubectl('rollout', 'status', f'{kind}/vllm', '--timeout=600s')
    marks.append(('validate', time.time()))
    kubectl('logs', '-l', 'app=vllm', '-c', 'vllm', f'--max-log-requests={replicas}', '--prefix')
    return marks + [('end', time.time())]


def audit_counts(audit_log: str, namespace: str, marks: list) -> dict:
    user = f'system:serviceaccount:{namespace}:{IDENTITY}'
    counts = dict.fromkeys(PHASES, 0)
    with open(audit_log, encoding='utf-8') as handle:
        for line in handle:
            event = json.loads(line)
            if event['user']['username'] != user or event['stage'] not in ('ResponseComplete', 'ResponseStarted'):
                continue
            if event['stage'] == 'ResponseStarted' and event['verb'] != 'watch':
                continue  # the same request ends with ResponseComplete
            at = datetime.fromisoformat(event['requestReceivedTimestamp'].replace('Z', '+00:00')).timestamp()
            for (phase, start), (_next, stop) in zip(marks, marks[1:]):
                if start <= at < stop:
                    counts[phase] += 1
    return counts


def wait_statefulset(kube, namespace: str, replicas: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while len(kube.running_pods(namespace)) < replicas or \
            (kube.get('statefulset', 'vllm', namespace).get('status') or {}).get('readyReplicas', 0) < replicas:
        if time.monotonic() > deadline:
            raise RuntimeError(f'StatefulSet vllm in {namespace}: not ready in {timeout} s')
        time.sleep(1)


def one_run(kube, audit_log: str, base: str, replicas: int, volume: str, mode: str, keep_log=None,
            kind: str = 'deployment') -> dict:
    work = tempfile.mkdtemp(prefix=f'{mode}-{replicas}-', dir=base)
    lab = Lab(os.path.join(work, 'lab'))
    lab.up(sessions=3)
    namespace = f'bench-{uuid.uuid4().hex[:8]}'
    try:
        lab.snapshot()
        lab.rotate()
        lab.restore()
        lab.refresh(lab.state['service_session'])  # a refresh after the restore: the incident's error lines
        kube.apply(*workload_documents(namespace, lab, replicas, volume, kind, work))
        if kind == 'statefulset':
            wait_statefulset(kube, namespace, replicas)
        else:
            kube.rollout_status(namespace, timeout='600s')
            pod_directories(kube, namespace, lab, work, volume)
        kubeconfig = identity_kubeconfig(kube, namespace, work)
        # a StatefulSet's cache is on its pods' claims, which outlive the restart
        runtime_class = EmptyDirRuntime if volume == 'emptyDir' and kind == 'deployment' else GatewayRuntime
        with runtime_class(kube, namespace, lab) as runtime:
            runtime.pump_logs()
            if mode == 'runbook':
                marks = run_runbook(kube, lab, namespace, kubeconfig, work, kind)
                if keep_log:
                    shutil.copyfile(os.path.join(work, 'ansible.log'), keep_log)
            else:
                marks = run_manual(kube, namespace, kubeconfig, replicas, kind)
        if runtime.errors:
            raise RuntimeError(f'the gateway runtime failed: {runtime.errors}')
        time.sleep(1)  # the audit log is written in batches
        seconds = {phase: stop - start for (phase, start), (_next, stop) in zip(marks, marks[1:])}
        seconds['total'] = marks[-1][1] - marks[0][1]
        calls = audit_counts(audit_log, namespace, marks)
        calls['total'] = sum(calls.values())
        return {'seconds': seconds, 'calls': calls}
    finally:
        delete_workload(kube, namespace)
        lab.down()


# --kind lws: the runbook on a LeaderWorkerSet, groups of a leader and workers, each pod with a claim of its own for the
# cache (volumeClaimTemplates) that every pod's container mounts: every pod holds a copy, purged by an exec in it.
LWS_GROUP_SIZE = 4
LWS_ACCESS = {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'Role',
              'rules': [{'apiGroups': ['leaderworkerset.x-k8s.io'], 'resources': ['leaderworkersets'],
                         'verbs': ['get', 'list', 'watch', 'patch']}]}


def lws_shape(pods: int) -> tuple:
    """(groups, size) for `pods` pods: groups of LWS_GROUP_SIZE, or one group of them all when fewer."""
    return (pods // LWS_GROUP_SIZE, LWS_GROUP_SIZE) if pods >= LWS_GROUP_SIZE else (1, pods)


def lws_documents(namespace: str, lab, pods: int, backups: str) -> list:
    groups, size = lws_shape(pods)
    # the rollout as a Deployment's default: a quarter of the groups at a time (at least one)
    documents = lws_vllm_workload(namespace, lab, groups, size, cache_in='all',
                                  max_unavailable=max(1, groups // 4), backups=backups)
    extra = [doc for doc in workload_documents(namespace, lab, 1, 'emptyDir', 'deployment', '')
             if doc['kind'] in ('ServiceAccount', 'RoleBinding')]
    # the namespace's admin ClusterRole does not cover a custom resource: the LeaderWorkerSet's rights beside it
    role = dict(LWS_ACCESS, metadata={'name': f'{IDENTITY}-lws', 'namespace': namespace})
    binding = {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
               'metadata': {'name': f'{IDENTITY}-lws', 'namespace': namespace},
               'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role', 'name': f'{IDENTITY}-lws'},
               'subjects': [{'kind': 'ServiceAccount', 'name': IDENTITY, 'namespace': namespace}]}
    return documents + extra + [role, binding]


def run_manual_lws(kube, namespace: str, kubeconfig: str, pods: int) -> list:
    """The write-up's procedure over every pod of every group: each pod's logs, the cache removed in each pod, the
    configuration edited, the groups restarted by a template change (a LeaderWorkerSet has no `rollout restart`) and
    waited for by its status, then the new pods' logs."""
    def kubectl(*args, stdin=None):
        return kube.kubectl('-n', namespace, *args, stdin=stdin, kubeconfig=kubeconfig)
    marks = [('diagnose', time.time())]
    names = kubectl('get', 'pods', '-l', 'app=vllm', '-o', 'jsonpath={.items[*].metadata.name}').split()
    errors = sum(len(re.findall(r'TokenRefreshError|Invalid token', kubectl('logs', pod, '-c', 'vllm')))
                 for pod in names)
    if not errors:
        raise RuntimeError('manual procedure: no incident in the logs')
    marks.append(('purge', time.time()))
    for pod in names:
        kubectl('exec', pod, '-c', 'vllm', '--', 'rm', '-f', CACHE)
    config = json.loads(kubectl('get', 'configmap', 'vllm-config', '-o', 'json'))
    document = yaml.safe_load(config['data']['vllm.yaml'])
    document.setdefault('session_state_store', {})['refresh_on_startup'] = True
    config['data']['vllm.yaml'] = yaml.safe_dump(document)
    kubectl('apply', '-f', '-', stdin=json.dumps(config))
    marks.append(('restart', time.time()))
    stamp = datetime.utcnow().strftime('%Y-%m-%dT%H:%M:%SZ')
    kubectl('patch', 'leaderworkerset', 'vllm', '--type=merge', '-p', json.dumps(
        {'spec': {'leaderWorkerTemplate': {'workerTemplate': {'metadata': {'annotations': {
            'kubectl.kubernetes.io/restartedAt': stamp}}}}}}))
    generation = json.loads(kubectl('get', 'leaderworkerset', 'vllm', '-o', 'json'))['metadata']['generation']
    groups, _size = lws_shape(pods)
    for condition in (f'jsonpath={{.status.observedGeneration}}={generation}',
                      f'jsonpath={{.status.updatedReplicas}}={groups}', f'jsonpath={{.status.readyReplicas}}={groups}',
                      'condition=Available'):
        kubectl('wait', 'leaderworkerset/vllm', f'--for={condition}', '--timeout=600s')
    marks.append(('validate', time.time()))
    kubectl('logs', '-l', 'app=vllm', '-c', 'vllm', f'--max-log-requests={pods}', '--prefix')
    return marks + [('end', time.time())]


def one_lws_run(kube, audit_log: str, base: str, pods: int, mode: str, keep_log=None) -> dict:
    """One run of the runbook (or the manual procedure) on a fresh lab and a LeaderWorkerSet of `pods` pods."""
    work = tempfile.mkdtemp(prefix=f'lws-{mode}-{pods}-', dir=base)
    lab = Lab(os.path.join(work, 'lab'))
    lab.up(sessions=3)
    namespace = f'bench-{uuid.uuid4().hex[:8]}'
    groups, size = lws_shape(pods)
    try:
        lab.snapshot()
        lab.rotate()
        lab.restore()
        lab.refresh(lab.state['service_session'])
        backups = os.path.join(work, 'pod-backups')
        os.makedirs(backups, mode=0o700)
        kube.apply(*lws_documents(namespace, lab, pods, backups))
        lws_ready(kube, namespace, groups, timeout=900)
        pod_directories(kube, namespace, lab, work, 'per-pod')
        kubeconfig = identity_kubeconfig(kube, namespace, work)
        with LwsGatewayRuntime(kube, namespace, lab) as runtime:
            runtime.pump_logs()
            if mode == 'runbook':
                marks = run_runbook(kube, lab, namespace, kubeconfig, work, 'lws')
                if keep_log:
                    shutil.copyfile(os.path.join(work, 'ansible.log'), keep_log)
            else:
                marks = run_manual_lws(kube, namespace, kubeconfig, pods)
        if runtime.errors:
            raise RuntimeError(f'the gateway runtime failed: {runtime.errors}')
        time.sleep(1)
        seconds = {phase: stop - start for (phase, start), (_next, stop) in zip(marks, marks[1:])}
        seconds['total'] = marks[-1][1] - marks[0][1]
        calls = audit_counts(audit_log, namespace, marks)
        calls['total'] = sum(calls.values())
        return {'seconds': seconds, 'calls': calls}
    finally:
        delete_lws_workload(kube, namespace, groups, size)
        lab.down()


def median_of(runs: list, key: str) -> dict:
    return {column: statistics.median(run[key][column] for run in runs) for column in PHASES + ('total',)}


def print_table(results: dict) -> None:
    print(f'{"replicas":>8} {"procedure":<9} ' + ' '.join(f'{p:>17}' for p in PHASES + ('total',)))
    print(f'{"":>8} {"":<9} ' + ' '.join(f'{"s (API calls)":>17}' for _column in PHASES + ('total',)))
    for (replicas, mode), runs in sorted(results.items()):
        seconds, calls = median_of(runs, 'seconds'), median_of(runs, 'calls')
        cells = ' '.join(f'{seconds[c]:>9.2f} ({calls[c]:>5.0f})' for c in PHASES + ('total',))
        print(f'{replicas:>8} {mode:<9} {cells}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--replicas', default='2,20,100', help='replica counts, comma-separated (default 2,20,100)')
    parser.add_argument('--rounds', type=int, default=2, help='runs of each point; the table shows medians (default 2)')
    parser.add_argument('--volume', choices=('emptyDir', 'pvc'), default='emptyDir',
                        help='the volume that holds the cache (default emptyDir: one per pod)')
    parser.add_argument('--modes', default='runbook,manual', help='runbook, manual or both (default)')
    parser.add_argument('--kind', choices=('deployment', 'statefulset', 'lws'), default='deployment',
                        help='the workload (default deployment); a statefulset has a claim per pod '
                             '(volumeClaimTemplates), --volume does not apply to it; lws: a LeaderWorkerSet of '
                             'groups of 4, a claim per pod')
    parser.add_argument('--json', help='also write the raw runs to this file')
    parser.add_argument('--logs', help="keep each runbook run's ansible log in this directory (<replicas>-<round>.log)")
    args = parser.parse_args()
    counts = [int(value) for value in args.replicas.split(',')]
    modes = args.modes.split(',')
    base = tempfile.mkdtemp(prefix='vllm-dr-bench-k8s-')
    policy = os.path.join(base, 'audit-policy.yaml')
    with open(policy, 'w', encoding='utf-8') as handle:
        yaml.safe_dump(AUDIT_POLICY, handle)
    os.environ.pop('KUBECONFIG', None)  # the bench's own control plane: the audit log needs it
    os.environ['VLLM_DR_K8S_AUDIT_POLICY'] = policy
    results = {}
    try:
        with KubeCluster(os.path.join(base, 'k8s')) as kube, contextlib.ExitStack() as stack:
            if args.kind == 'lws':
                stack.enter_context(LwsController(kube, os.path.join(base, 'lws')))
            audit_log = os.path.join(kube.state_dir, 'clusters', kube.name, 'logs', 'audit.log')
            if args.logs:
                os.makedirs(args.logs, exist_ok=True)
            for round_ in range(args.rounds):
                for replicas in counts:
                    for mode in modes:
                        keep_log = os.path.join(args.logs, f'{replicas}-{round_ + 1}.log') if args.logs else None
                        run = (one_lws_run(kube, audit_log, base, replicas, mode, keep_log) if args.kind == 'lws'
                               else one_run(kube, audit_log, base, replicas, args.volume, mode, keep_log, args.kind))
                        results.setdefault((replicas, mode), []).append(run)
                        print(f'# {replicas} replicas, {mode}: '
                              + ', '.join(f'{c} {run["seconds"][c]:.2f} s ({run["calls"][c]})' for c in PHASES + ('total',)),
                              flush=True)
                        if args.json:  # after each run: a bench stopped early keeps what it measured
                            with open(args.json, 'w', encoding='utf-8') as handle:
                                json.dump({f'{r}:{m}': runs for (r, m), runs in results.items()}, handle, indent=1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    where = 'volumeClaimTemplates (a claim per pod)' if args.kind in ('statefulset', 'lws') else args.volume
    print(f'{args.kind}; volume: {where}; medians of {args.rounds} round(s); API calls from the audit log')
    print_table(results)
    small, large = min(counts), max(counts)
    if (small, 'runbook') in results and (large, 'runbook') in results and (large, 'manual') in results:
        large_time = median_of(results[(large, 'runbook')], 'seconds')['total']
        label = f'{large} replicas' if args.kind == 'deployment' else f'{large} replicas ({args.kind})'
        print(f'{label}: {large_time / median_of(results[(small, "runbook")], "seconds")["total"]:.2f}× '
              f'the {small}-replica time, {large_time / median_of(results[(large, "manual")], "seconds")["total"]:.2f}× '
              'the manual baseline')
    return 0


if __name__ == '__main__':
    sys.exit(main())
