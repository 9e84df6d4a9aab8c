"""The Kubernetes suite's cluster and the vLLM workload on it.

KubeCluster is the cluster named by KUBECONFIG when the user gives one, else a real control plane started by
tools/k8s/cluster.sh (etcd, kube-apiserver, kube-controller-manager, kube-scheduler; kwok for the kubelets).
vllm_workload() is the incident's workload: a `vllm` Deployment of pods labelled app=vllm, the token cache on a
PVC (mounted at the lab's data directory, which stands for /var/lib/vllm), vllm.yaml in a ConfigMap. With kwok, the pods' logs are the lab gateway's log file
(ClusterLogs) and `kubectl exec` runs on this machine in the lab's data directory (ClusterExec); GatewayRuntime
plays the kubelet's part for the process behind the pods: a new ReplicaSet's pods restart the lab gateway with the
ConfigMap's vllm.yaml, as pods started from a new template would start vLLM with it.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

import yaml

from harness.servers import process_alive

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLUSTER_SH = os.path.join(ROOT, 'tools', 'k8s', 'cluster.sh')
BUILD_SH = os.path.join(ROOT, 'tools', 'k8s', 'build.sh')
# cluster.sh creates clusters on this machine in turn under this lock (kwokctl picks ports free at that moment)
CREATE_LOCK = os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'inferops-vllm-dr',
                           'cluster-create.lock')


class KubeError(RuntimeError):
    pass


class KubeCluster:
    def __init__(self, workdir: str):
        self.workdir = workdir
        self.name = f'vllm-dr-test-{os.getpid()}'
        self.owned = False
        self.kubeconfig = os.environ.get('KUBECONFIG', '')
        self.bin_dir = ''
        self.state_dir = os.path.join(workdir, 'clusters')
        # the kubelet's part for the control plane's own processes (see _supervise)
        self.component_restarts = []
        # controllers the suite runs against this cluster outside it (the LWS manager): named in state_of
        self.controllers = []
        self._stopped = set()
        self._lock = threading.Lock()
        self._api = None  # (pool, URL, headers) of _read, made at its first read
        self._api_lock = threading.Lock()
        self._resources = None  # kind name -> where the API server serves it (_resource)
        self._halt = threading.Event()
        self._supervisor = None

    def __enter__(self) -> 'KubeCluster':
        if self.kubeconfig:
            self.bin_dir = os.path.dirname(shutil.which('kubectl') or '')
            if not self.bin_dir:
                raise KubeError('KUBECONFIG is set but kubectl is not on PATH; install kubectl or unset KUBECONFIG')
            return self
        env = dict(os.environ, VLLM_DR_K8S_NAME=self.name, VLLM_DR_K8S_STATE=self.state_dir)
        self.bin_dir = subprocess.run(['bash', BUILD_SH], check=True, capture_output=True, text=True).stdout.strip()
        out = subprocess.run(['bash', CLUSTER_SH, 'up'], env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise KubeError(f'the control plane did not start:\n{out.stderr[-4000:]}')
        self.kubeconfig = out.stdout.strip().splitlines()[-1]
        self.owned = True
        self._env = env
        self._argv = {name: self._cmdline(pid) for name, pid in self.component_pids().items()}
        self._supervisor = threading.Thread(target=self._supervise, name='control-plane-supervisor', daemon=True)
        self._supervisor.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.owned:
            self._halt.set()
            self._supervisor.join(timeout=10)
            subprocess.run(['bash', CLUSTER_SH, 'down'], env=self._env, capture_output=True, check=False)

    @staticmethod
    def _cmdline(pid: int) -> list:
        with open(f'/proc/{pid}/cmdline', 'rb') as handle:
            return [arg.decode() for arg in handle.read().split(b'\0') if arg]

    def _supervise(self) -> None:
        """Start again a control-plane process that exits by itself, as the kubelet restarts a static pod.

        kube-scheduler exits on purpose when its cache no longer matches the API server ("Scheduler cache is
        corrupted", klog.FlushAndExit), which a watch gap can cause: the tests that stop the API server make such
        gaps. In a cluster the kubelet starts the scheduler again and scheduling goes on; without this, every later
        test of the session would wait for pods that nothing schedules. Each restart is recorded in
        component_restarts (name, time, the last lines of its log), for the suite to report."""
        while not self._halt.wait(1.0):
            with self._lock:
                for name, pid in self.component_pids().items():
                    if name in self._stopped or process_alive(pid) or self._halt.is_set():
                        continue
                    log = os.path.join(self.state_dir, 'clusters', self.name, 'logs', f'{name}.log')
                    with open(log, encoding='utf-8', errors='replace') as handle:
                        tail = handle.read()[-2000:]
                    self._start(name, self._argv[name])
                    self.component_restarts.append((name, time.time(), tail))

    def component_pids(self) -> dict:
        """component name -> pid of each process of the cluster this suite started (kwokctl's pid files)."""
        pids_dir = os.path.join(self.state_dir, 'clusters', self.name, 'pids')
        pids = {}
        for name in sorted(os.listdir(pids_dir)) if self.owned and os.path.isdir(pids_dir) else []:
            with open(os.path.join(pids_dir, name), encoding='utf-8') as handle:
                pids[name[:-len('.pid')]] = int(handle.read().strip())
        return pids

    def stop_component(self, name: str) -> list:
        """Stop one process of the suite's cluster (e.g. kube-apiserver); return its command line for start_component."""
        with self._lock:
            pid = self.component_pids()[name]
            argv = self._cmdline(pid)
            self._stopped.add(name)
            os.kill(pid, signal.SIGKILL)  # a crash, not a graceful stop: down at once
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.1)
        return argv

    def start_component(self, name: str, argv: list) -> None:
        """Start a stopped process of the cluster again, as kwokctl started it (its pid file updated for `down`)."""
        with self._lock:
            self._start(name, argv)
            self._stopped.discard(name)

    @contextlib.contextmanager
    def api_server_down(self, seconds: float):
        """The API server killed for `seconds` (a crash), then started again and ready, and each controller the suite
        runs against it watching again (see LwsController.watching_again).

        No cluster is created on this machine meanwhile (cluster.sh's creation lock is held until the API server is
        back): kwokctl would see the stopped API server's port free and give it to the new cluster. The suites that
        run side by side (pytest-xdist workers, each with a cluster of its own) rely on this."""
        os.makedirs(os.path.dirname(CREATE_LOCK), exist_ok=True)
        with open(CREATE_LOCK, 'a', encoding='utf-8') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            argv = self.stop_component('kube-apiserver')
            try:
                time.sleep(seconds)
                yield
            finally:
                self.start_component('kube-apiserver', argv)
            self.wait_ready()
        for controller in self.controllers:
            controller.watching_again()

    def _start(self, name: str, argv: list) -> None:
        cluster_dir = os.path.join(self.state_dir, 'clusters', self.name)
        with open(os.path.join(cluster_dir, 'logs', f'{name}.log'), 'ab') as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cluster_dir,  # pylint: disable=consider-using-with
                                       start_new_session=True)
        with open(os.path.join(cluster_dir, 'pids', f'{name}.pid'), 'w', encoding='utf-8') as handle:
            handle.write(str(process.pid))

    def runs_pods(self, timeout: float = 60) -> str:
        """'' when a new pod is scheduled and running within `timeout`, else why not (the API server, the scheduler or
        kwok is down): the suite's check that its control plane still works after a test's set-up failed."""
        namespace, name = 'vllm-dr-suite-probe', f'probe-{int(time.time() * 1000)}'
        try:
            self.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': namespace}},
                       {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': name, 'namespace': namespace},
                        'spec': {'containers': [{'name': 'probe', 'image': 'busybox'}]}})
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                pod = self.get('pod', name, namespace)
                if pod['status'].get('phase') == 'Running':
                    return ''
                time.sleep(1)
            return (f"a new pod was not running after {timeout:.0f} s (node {pod['spec'].get('nodeName') or 'none'}, "
                    f"phase {pod['status'].get('phase')}); components: {self.component_pids()}")
        except (KubeError, subprocess.TimeoutExpired) as exc:
            return f'the API server did not answer: {str(exc)[:300]}'
        finally:
            self.kubectl('-n', namespace, 'delete', 'pod', name, '--wait=false', '--ignore-not-found', check=False)

    def wait_ready(self, timeout: float = 60) -> None:
        """Wait until the API server answers /readyz again (after start_component)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.kubectl('get', '--raw', '/readyz')
                return
            except KubeError:
                if time.monotonic() > deadline:
                    raise AssertionError(f'the API server did not come back in {timeout:.0f} s; '
                                         f'what listens on its port: {self._api_port_holders()}') from None
                time.sleep(0.5)

    def _api_port_holders(self) -> str:
        try:
            argv = self._cmdline(self.component_pids()['kube-apiserver']) if self.owned else []
        except (OSError, KeyError):
            argv = []
        port = next((arg.split('=', 1)[1] for arg in argv if arg.startswith('--secure-port=')), '')
        if not port:
            return 'unknown'
        out = subprocess.run(['ss', '-Hltnp', f'sport = :{port}'], capture_output=True, text=True, check=False)
        return out.stdout.strip() or f'nothing on {port}'

    @property
    def kubectl_path(self) -> str:
        return os.path.join(self.bin_dir, 'kubectl')

    @property
    def env(self) -> dict:
        """The environment for ansible-playbook: this cluster's kubectl first on PATH."""
        return dict(os.environ, PATH=self.bin_dir + os.pathsep + os.environ.get('PATH', ''), KUBECONFIG=self.kubeconfig)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, kubeconfig: str | None = None) -> str:
        out = subprocess.run([self.kubectl_path, '--kubeconfig', kubeconfig or self.kubeconfig, *args], input=stdin,
                             capture_output=True, text=True, timeout=120, check=False)
        if check and out.returncode != 0:
            raise KubeError(f'kubectl {" ".join(args)}: {out.stderr.strip()}')
        return out.stdout

    def apply(self, *documents: dict) -> None:
        self.kubectl('apply', '-f', '-', stdin=yaml.safe_dump_all(documents))

    def get(self, kind: str, name: str = '', namespace: str = '', selector: str = '',
            all_namespaces: bool = False) -> dict:
        """What `kubectl get <kind> [name] -o json` prints, read in this process: the suite polls the API server
        several times a second (GatewayRuntime's pods, the waits of the tests), and a kubectl process per read costs
        the CPU the tests beside it need (62 ms a read, against 1 ms here). A kind the API server does not list
        (kubectl's own aliases) is read with kubectl. Any failure (the API server away, an object not found) is a
        KubeError, as kubectl's would be."""
        resource = self._resource(kind)
        if resource is None:
            args = ['get', kind] + ([name] if name else []) + (['-n', namespace] if namespace else [])
            args += (['-l', selector] if selector else []) + (['-A'] if all_namespaces else [])
            return json.loads(self.kubectl(*args, '-o', 'json'))
        prefix, plural, namespaced, api_version, object_kind = resource
        where = f'/namespaces/{namespace or "default"}' if namespaced and (name or not all_namespaces) else ''
        path = f'{prefix}{where}/{plural}' + (f'/{name}' if name else '')
        read = self._read(path, {'labelSelector': selector} if selector and not name else None)
        for item in read.get('items') or []:  # as kubectl lists them: each item names its kind
            item.setdefault('apiVersion', api_version)
            item.setdefault('kind', object_kind)
        return read

    def _api_pool(self) -> tuple:
        """(a urllib3 pool keeping its connections to the API server, its URL, the request headers), from the
        kubeconfig as the kubernetes client reads it (certificates, a token), made once."""
        with self._api_lock:
            if self._api is None:
                import urllib3  # pylint: disable=import-outside-toplevel
                from kubernetes import client, config  # pylint: disable=import-outside-toplevel
                settings = client.Configuration()
                config.load_kube_config(config_file=self.kubeconfig, client_configuration=settings)
                token = (settings.api_key or {}).get('authorization')
                pool = urllib3.PoolManager(cert_reqs='CERT_REQUIRED' if settings.verify_ssl else 'CERT_NONE',
                                           ca_certs=settings.ssl_ca_cert, cert_file=settings.cert_file,
                                           key_file=settings.key_file, maxsize=4)
                self._api = (pool, settings.host.rstrip('/'), {'Authorization': token} if token else {})
            return self._api

    def _read(self, path: str, fields: dict | None = None) -> dict:
        try:
            pool, host, headers = self._api_pool()
            answer = pool.request('GET', host + path, fields=fields, headers=headers, timeout=30.0, retries=False)
            if answer.status != 200:
                raise KubeError(f'{answer.status} {answer.data.decode(errors="replace")[:300]}')
            return json.loads(answer.data)
        except Exception as exc:  # refused, reset, timed out: what kubectl would fail on
            raise KubeError(f'GET {path}: {exc}') from None

    def _resource(self, kind: str) -> tuple | None:
        """(path prefix, plural, namespaced, apiVersion, Kind) of a kind as kubectl names it (plural, singular, short
        name or Kind, any case), from the API server's discovery: read once, and again for a kind it did not list (a
        CRD installed since)."""
        wanted = kind.lower()
        for attempt in range(2):
            if self._resources is None or attempt:
                found = {}
                versions = [('/api/v1', 'v1')] + [
                    (f"/apis/{group['preferredVersion']['groupVersion']}", group['preferredVersion']['groupVersion'])
                    for group in self._read('/apis').get('groups') or []]
                for prefix, api_version in versions:
                    try:
                        listed = self._read(prefix).get('resources') or []
                    except KubeError:
                        listed = []  # a group version that does not answer (an aggregated API down): kubectl's then
                    for item in listed:
                        if '/' in item['name']:
                            continue  # a subresource
                        entry = (prefix, item['name'], item['namespaced'], api_version, item['kind'])
                        aliases = [item['name'], item.get('singularName'), item['kind']] + (item.get('shortNames') or [])
                        for alias in filter(None, aliases):
                            found.setdefault(alias.lower(), entry)
                self._resources = found
            if wanted in self._resources:
                return self._resources[wanted]
        return None

    def has_kwok(self) -> bool:
        return bool(self.kubectl('get', 'crd', 'clusterexecs.kwok.x-k8s.io', '--ignore-not-found', '-o', 'name'))

    def rollout_status(self, namespace: str, deployment: str = 'vllm', timeout: str = '120s') -> None:
        self.kubectl('-n', namespace, 'rollout', 'status', f'deployment/{deployment}', f'--timeout={timeout}')

    def state_of(self, namespace: str) -> str:
        """What a person would look at when a rollout in `namespace` did not finish: its workloads and pods, its last
        events, the control-plane processes the suite started again, and the state and last log lines of each controller
        the suite runs against the cluster (for a test's failure message)."""
        parts = []
        for title, args in (('workloads and pods', ('get', 'statefulsets,deployments,pods', '-o', 'wide')),
                            ('last events', ('get', 'events', '--sort-by=.lastTimestamp'))):
            try:
                text = self.kubectl('-n', namespace, *args, check=False)
            except subprocess.TimeoutExpired:
                text = '(kubectl timed out)'
            parts.append(f'--- {title} in {namespace}:\n' + '\n'.join(text.splitlines()[-25:]))
        restarts = ', '.join(f'{name} at {time.strftime("%H:%M:%S", time.gmtime(when))}'
                             for name, when, _tail in self.component_restarts)
        parts.append(f'--- control-plane processes started again: {restarts or "none"}')
        for controller in self.controllers:
            for kind in controller.kinds:
                status = self.kubectl('-n', namespace, 'get', kind, '-o',
                                      'jsonpath={range .items[*]}{.metadata.name}: {.status}{"\\n"}{end}', check=False)
                parts.append(f'--- {kind} status in {namespace}:\n{status}')
            code = controller.process.poll() if controller.process is not None else 'not started'
            parts.append(f'--- {controller.name}: ' + ('running' if code is None else f'stopped ({code})') +
                         ', its last lines:\n' + controller.log_tail(25))
        return '\n'.join(parts)

    def running_pods(self, namespace: str, selector: str = 'app=vllm') -> list:
        return [pod for pod in self.get('pods', namespace=namespace, selector=selector)['items']
                if pod['status'].get('phase') == 'Running' and not pod['metadata'].get('deletionTimestamp')]


CONFIG_NOTE = '# vLLM gateway configuration; kept by hand, keep the comments\n'

# A secret every vLLM pod template of the suite carries as an env value, as vLLM's often do (a Hugging Face token):
# every read of a workload, its ReplicaSets or revisions and its pods returns it, and no output may show it.
POD_ENV_SECRET = 'hf_' + secrets.token_hex(16)
POD_ENV = [{'name': 'HF_TOKEN', 'value': POD_ENV_SECRET}]


def pod_log_path(lab) -> str:
    """The container log kwok serves: the gateway's lines in the CRI log format, as a container runtime writes them."""
    return os.path.join(os.path.dirname(lab.log_path), 'vllm.cri.log')


def vllm_workload(namespace: str, lab, replicas: int = 2, cache_volume: str = 'pvc') -> list:
    """The incident's workload for `lab`, in `namespace`; the cache on a volume every replica shares (`pvc`), or on
    an `emptyDir` of each pod (no PersistentVolume nor claim then)."""
    data_dir = os.path.dirname(lab.cache_path)
    with open(lab.config_path, encoding='utf-8') as handle:
        config_text = CONFIG_NOTE + handle.read()
    labels = {'app': 'vllm'}
    pod_spec = {
        'containers': [{
            'name': 'vllm', 'image': 'vllm/vllm-openai:latest', 'env': copy.deepcopy(POD_ENV),
            # kwok runs `kubectl exec` on this machine: the volume is mounted where the lab keeps the cache,
            # so the pod and this machine name the cache by the same path
            'volumeMounts': [{'name': 'vllm-data', 'mountPath': data_dir},
                             {'name': 'config', 'mountPath': '/etc/vllm'}]}],
        'volumes': [{'name': 'vllm-data', 'persistentVolumeClaim': {'claimName': 'vllm-pvc'}},
                    {'name': 'config', 'configMap': {'name': 'vllm-config'}}],
    }
    if cache_volume == 'emptyDir':
        pod_spec['volumes'][0] = {'name': 'vllm-data', 'emptyDir': {}}
    documents = [
        {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': namespace}},
        {'apiVersion': 'v1', 'kind': 'PersistentVolume',
         'metadata': {'name': f'{namespace}-data'},
         'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteMany'], 'storageClassName': '',
                  'hostPath': {'path': data_dir},
                  'claimRef': {'namespace': namespace, 'name': 'vllm-pvc'}}},
        {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
         'metadata': {'name': 'vllm-pvc', 'namespace': namespace},
         'spec': {'accessModes': ['ReadWriteMany'], 'storageClassName': '', 'volumeName': f'{namespace}-data',
                  'resources': {'requests': {'storage': '1Gi'}}}},
        {'apiVersion': 'v1', 'kind': 'ConfigMap',
         'metadata': {'name': 'vllm-config', 'namespace': namespace},
         'data': {'vllm.yaml': config_text, 'logging.ini': '[logger_root]\nlevel = INFO\n'}},
        {'apiVersion': 'apps/v1', 'kind': 'Deployment',
         'metadata': {'name': 'vllm', 'namespace': namespace, 'labels': labels},
         'spec': {'replicas': replicas, 'selector': {'matchLabels': labels},
                  'strategy': {'type': 'RollingUpdate', 'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 0}},
                  'template': {'metadata': {'labels': labels}, 'spec': pod_spec}}},
        {'apiVersion': 'kwok.x-k8s.io/v1alpha1', 'kind': 'ClusterLogs', 'metadata': {'name': f'{namespace}-logs'},
         'spec': {'selector': {'matchNamespaces': [namespace]},
                  'logs': [{'containers': ['vllm'], 'logsFile': pod_log_path(lab), 'follow': False}]}},
        {'apiVersion': 'kwok.x-k8s.io/v1alpha1', 'kind': 'ClusterExec', 'metadata': {'name': f'{namespace}-exec'},
         'spec': {'selector': {'matchNamespaces': [namespace]},
                  'execs': [{'containers': ['vllm'], 'local': {'workDir': data_dir}}]}},
    ]
    if cache_volume == 'emptyDir':
        documents = [doc for doc in documents if doc['kind'] not in ('PersistentVolume', 'PersistentVolumeClaim')]
    return documents


def pod_directories(kube: KubeCluster, namespace: str, lab, work: str, volume: str) -> dict:
    """pod name -> its cache directory on this machine, where one kwok Exec per pod runs its `kubectl exec`.

    With `pvc` every pod's is the lab's data directory; else each pod has its own, a copy of the restored cache (the
    first pod's is the lab's data directory, the one the gateway reads). A pod started later has no Exec of its own:
    the namespace's ClusterExec, if any, runs it in the lab's data directory.
    """
    pods = sorted(pod['metadata']['name'] for pod in kube.running_pods(namespace))
    data_dir = os.path.dirname(lab.cache_path)
    if volume == 'pvc':
        return {name: data_dir for name in pods}
    directories = {}
    for index, name in enumerate(pods):
        directory = data_dir if index == 0 else os.path.join(work, 'pods', name)
        if index:
            os.makedirs(directory, mode=0o700)
            for path in glob.glob(lab.cache_path + '*'):
                shutil.copy2(path, os.path.join(directory, os.path.basename(path)))
        directories[name] = directory
    kube.apply(*[{'apiVersion': 'kwok.x-k8s.io/v1alpha1', 'kind': 'Exec',
                  'metadata': {'name': name, 'namespace': namespace},
                  'spec': {'execs': [{'containers': ['vllm'], 'local': {'workDir': directory}}]}}
                 for name, directory in directories.items()])
    return directories


def pod_volume_python(work: str, data_dir: str) -> str:
    """The interpreter of a pod whose own volume is mounted at `data_dir`, as a container runtime gives it: kwok runs a
    pod's `kubectl exec` in the pod's directory (its Exec's workDir), and this runs Python in a mount namespace of its
    own with that directory bound over `data_dir`, so that the path the container sees is the pod's own copy. Needs
    root (unshare, mount)."""
    path = os.path.join(work, 'pod-python')
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(f"""#!/bin/sh
[ "$PWD" = '{data_dir}' ] && exec '{sys.executable}' "$@"
exec unshare -m --propagation private sh -c 'mount --bind "$PWD" "$0" && exec "$@"' '{data_dir}' '{sys.executable}' "$@"
""")
    os.chmod(path, 0o755)
    return path


def statefulset_workload(namespace: str, lab, work: str, replicas: int = 2, strategy: str = 'RollingUpdate',
                         partition: int | None = None) -> tuple[list, dict]:
    """The incident's workload for `lab` as a `vllm` StatefulSet in `namespace`: the cache on a volumeClaimTemplates
    claim (a PersistentVolumeClaim per pod, bound to a PersistentVolume of its own per ordinal), and one kwok Exec per
    pod running its `kubectl exec` in that pod's own directory, a copy of the restored cache (ordinal 0's is the lab's
    data directory, the one the gateway reads). The cache path is relative (token_cache.db), resolved against the
    container's workingDir; pod_volume_python() is the interpreter that shows each pod its own directory there. The
    claim is mounted a second time at <work>/pod-backups, the purge's backup directory on the cache's volume, one
    directory of this machine for every pod (each backup's name is its own), from which each is fetched. Returns (the
    documents, pod name -> its directory); the names are stable, so a pod that replaces one keeps its Exec and its
    directory, as it keeps its claim.
    """
    data_dir = os.path.dirname(lab.cache_path)
    documents = [doc for doc in vllm_workload(namespace, lab, replicas)
                 if doc['kind'] not in ('PersistentVolume', 'PersistentVolumeClaim', 'Deployment', 'ClusterExec')]
    deployment = next(doc for doc in vllm_workload(namespace, lab, replicas) if doc['kind'] == 'Deployment')
    pod_spec = deployment['spec']['template']['spec']
    pod_spec['volumes'] = [volume for volume in pod_spec['volumes'] if volume['name'] != 'vllm-data']
    pod_spec['containers'][0]['workingDir'] = data_dir
    pod_spec['containers'][0]['volumeMounts'].append({'name': 'vllm-data', 'mountPath': os.path.join(work, 'pod-backups')})
    os.makedirs(os.path.join(work, 'pod-backups'), mode=0o700, exist_ok=True)
    labels = {'app': 'vllm'}
    update = {'type': strategy}
    if strategy == 'RollingUpdate':
        update['rollingUpdate'] = {'partition': partition or 0}
    directories = {}
    for index in range(replicas):
        name = f'vllm-{index}'
        directory = data_dir if index == 0 else os.path.join(work, 'pods', name)
        if index:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            for path in glob.glob(lab.cache_path + '*'):
                shutil.copy2(path, os.path.join(directory, os.path.basename(path)))
        directories[name] = directory
        documents += [
            {'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': f'{namespace}-data-{index}'},
             'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                      'hostPath': {'path': directory},
                      'claimRef': {'namespace': namespace, 'name': f'vllm-data-{name}'}}},
            {'apiVersion': 'kwok.x-k8s.io/v1alpha1', 'kind': 'Exec', 'metadata': {'name': name, 'namespace': namespace},
             'spec': {'execs': [{'containers': ['vllm'], 'local': {'workDir': directory}}]}},
        ]
    documents.append(
        {'apiVersion': 'apps/v1', 'kind': 'StatefulSet',
         'metadata': {'name': 'vllm', 'namespace': namespace, 'labels': labels},
         'spec': {'replicas': replicas, 'serviceName': 'vllm', 'selector': {'matchLabels': labels},
                  'podManagementPolicy': 'Parallel', 'updateStrategy': update,
                  'template': {'metadata': {'labels': labels}, 'spec': pod_spec},
                  'volumeClaimTemplates': [{'metadata': {'name': 'vllm-data'},
                                            'spec': {'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                                                     'resources': {'requests': {'storage': '1Gi'}}}}]}})
    return documents, directories


def delete_workload(cluster: KubeCluster, namespace: str) -> None:
    cluster.kubectl('delete', 'namespace', namespace, '--wait=false', '--ignore-not-found', check=False)
    cluster.kubectl('delete', 'pv', f'{namespace}-data', '--wait=false', '--ignore-not-found', check=False)
    # a StatefulSet's, one per ordinal
    names = cluster.kubectl('get', 'pv', '-o', 'name', check=False) or ''
    ordinals = [name for name in names.split() if name.startswith(f'persistentvolume/{namespace}-data-')]
    if ordinals:
        cluster.kubectl('delete', *ordinals, '--wait=false', '--ignore-not-found', check=False)
    cluster.kubectl('delete', 'clusterlogs', f'{namespace}-logs', '--ignore-not-found', check=False)
    cluster.kubectl('delete', 'clusterexec', f'{namespace}-exec', '--ignore-not-found', check=False)


class GatewayRuntime:
    """Play the kubelet's part for the lab gateway, the process behind the pods kwok runs.

    - Container log: the gateway's log lines are copied into pod_log_path() in the CRI format
      (`<RFC 3339 time> stdout F <line>`), which is what kwok, like a kubelet, serves to `kubectl logs`.
    - Restart: when the workload's pods change template (a rollout), the gateway is stopped as soon as the first
      pod of the new ReplicaSet (a StatefulSet's: of the new revision) exists, vllm.yaml is written from the ConfigMap (what a configMap volume gives a new
      pod), and the gateway is started again.
    Polls every 0.2 s.
    """

    def __init__(self, cluster: KubeCluster, namespace: str, lab):
        self.cluster, self.namespace, self.lab = cluster, namespace, lab
        self.restarts = []
        self.errors = []
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.pump_logs()
        self.current = self._template_hash()

    def pump_logs(self) -> None:
        if not os.path.exists(self.lab.log_path):
            return
        with open(self.lab.log_path, 'rb') as source:
            source.seek(self._offset)
            chunk = source.read()
        complete = chunk[:chunk.rfind(b'\n') + 1]
        if not complete:
            return
        # seconds and fraction from one reading (time.gmtime() alone reads a coarser clock that may lag a second)
        seconds, nanos = divmod(time.time_ns(), 1_000_000_000)
        stamp = time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds)) + '.%09dZ' % nanos
        with open(pod_log_path(self.lab), 'ab') as target:
            for line in complete.splitlines():
                target.write(stamp.encode() + b' stdout F ' + line + b'\n')
        self._offset += len(complete)

    # the labels that name a pod's template revision, the first one a pod carries: a Deployment's pods carry their
    # ReplicaSet's template hash, a StatefulSet's their revision
    REVISION_LABELS = ('pod-template-hash', 'controller-revision-hash')

    def _template_hash(self) -> str | None:
        """The template hash of the newest live pod: the ReplicaSet whose pods are starting now."""
        pods = [pod for pod in self.cluster.get('pods', namespace=self.namespace, selector='app=vllm')['items']
                if not pod['metadata'].get('deletionTimestamp')]
        if not pods:
            return None
        newest = max(pods, key=lambda pod: pod['metadata']['creationTimestamp'])
        labels = newest['metadata']['labels']
        return next((labels[name] for name in self.REVISION_LABELS if labels.get(name)), None)

    def _restart_gateway(self) -> None:
        # the gateway may have been restarted by labctl in another process (the drill's restore command): its pid is
        # on disk, not in this process's copy of the lab's state
        self.lab.state = self.lab._load()  # pylint: disable=protected-access
        self.lab.stop_gateway()
        config = self.cluster.get('configmap', 'vllm-config', self.namespace)['data']['vllm.yaml']
        with open(self.lab.config_path, 'w', encoding='utf-8') as handle:
            handle.write(config)
        self.lab.start_gateway()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.pump_logs()
                newest = self._template_hash()
                if newest and newest != self.current:
                    self._restart_gateway()
                    self.current = newest
                    self.restarts.append(time.time())
            except Exception as exc:  # kept for the test to report; the loop goes on
                self.errors.append(repr(exc))

    def __enter__(self) -> 'GatewayRuntime':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
