"""The LeaderWorkerSet controller (sigs.k8s.io/lws) on the suite's control plane, so that LWS groups are real.

tools/lws/build.sh builds the release's manager and copies its CRDs and webhook configurations into the cache (once);
LwsController applies the CRDs, runs the manager as a local process against the cluster's kubeconfig, on free loopback
ports (webhook server, metrics, health probes), and registers its admission webhooks.

The webhooks run, with a certificate this harness issues. The manager's own certificate rotation
(internalCertManagement) cannot serve this control plane: it issues a certificate for the DNS name
`lws-webhook-service.lws-system.svc` and injects its CA into webhook configurations that name that Service, and the
API server reaches a Service's webhook through the Service's cluster IP. Here the manager is a process on this machine,
not a pod behind a Service, and the cluster has no pod network nor kube-proxy (kwok's pods run nothing), so no Service
leads to it (an Endpoints or EndpointSlice may not name a loopback address, and the manager listens on the loopback
only). So the rotation is off, the webhook configurations are the release's own (config/webhook, with its
kustomize patches: the pod webhooks only for pods labelled leaderworkerset.sigs.k8s.io/name) with each clientConfig
pointed at `https://127.0.0.1:<port><path>` and the CA bundle of a certificate for 127.0.0.1 (TlsFiles), which the
manager serves from its certDir. Everything else (defaulting and validation of LeaderWorkerSets, the pod webhook that
labels each pod with its group and worker index and sets LWS_LEADER_ADDRESS) runs as in a release deployment.

lws_vllm_workload() is the incident's workload run by a LeaderWorkerSet instead of a Deployment: groups of a leader and
workers, each pod with a claim of its own (volumeClaimTemplates) for the cache, on a PersistentVolume made for it.
"""

from __future__ import annotations

import base64
import copy
import glob
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import yaml

from harness.k8s import POD_ENV, ROOT, GatewayRuntime, KubeCluster, KubeError, delete_workload, vllm_workload
from harness.servers import LOOPBACK, ServerError, TlsFiles, _Process, free_port

BUILD_SH = os.path.join(ROOT, 'tools', 'lws', 'build.sh')
WEBHOOK_NAMES = {'MutatingWebhookConfiguration': 'lws-mutating-webhook-configuration',
                 'ValidatingWebhookConfiguration': 'lws-validating-webhook-configuration'}
CRDS = ('leaderworkersets.leaderworkerset.x-k8s.io', 'disaggregatedsets.disaggregatedset.x-k8s.io')
NAME_LABEL = 'leaderworkerset.sigs.k8s.io/name'


def build() -> str:
    """The cache directory of the built controller (bin/lws-manager, crd/, webhook/); built on the first call."""
    out = subprocess.run(['bash', BUILD_SH], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f'tools/lws/build.sh failed:\n{out.stderr[-4000:]}')
    return out.stdout.strip().splitlines()[-1]


def _json_patch_replace(document: dict, patch: list) -> dict:
    """The release's webhook patches (kustomize JSON 6902): each a `replace` of one webhook by index."""
    patched = copy.deepcopy(document)
    for operation in patch:
        parts = operation['path'].strip('/').split('/')
        if operation['op'] != 'replace' or len(parts) != 2 or parts[0] != 'webhooks':
            raise ValueError(f'unexpected webhook patch {operation["op"]} {operation["path"]}: tools/lws/build.sh '
                             'copies a config/webhook this harness does not know')
        patched['webhooks'][int(parts[1])] = operation['value']
    return patched


def webhook_configurations(cache: str, port: int, ca_bundle: str) -> list:
    """The release's webhook configurations (config/webhook/manifests.yaml with its patches), each webhook's
    clientConfig pointed at the manager on https://127.0.0.1:`port` and trusting `ca_bundle` (base64 PEM)."""
    with open(os.path.join(cache, 'webhook', 'manifests.yaml'), encoding='utf-8') as handle:
        documents = [doc for doc in yaml.safe_load_all(handle) if doc]
    patches = {}
    for kind, name in (('MutatingWebhookConfiguration', 'mutating-patch.yaml'),
                       ('ValidatingWebhookConfiguration', 'validating-patch.yaml')):
        with open(os.path.join(cache, 'webhook', name), encoding='utf-8') as handle:
            patches[kind] = yaml.safe_load(handle)
    configurations = []
    for document in documents:
        document = _json_patch_replace(document, patches[document['kind']])
        document['metadata'] = {'name': WEBHOOK_NAMES[document['kind']]}
        for hook in document['webhooks']:
            path = hook['clientConfig']['service']['path']
            hook['clientConfig'] = {'url': f'https://{LOOPBACK}:{port}{path}', 'caBundle': ca_bundle}
        configurations.append(document)
    return configurations


class LwsController(_Process):
    """The LWS manager of the release on `kube`'s control plane, its CRDs and admission webhooks installed."""

    name = 'lws-manager'
    kinds = ('leaderworkersets',)  # what state_of shows the status of
    start_timeout = 60.0

    def __init__(self, kube: KubeCluster, workdir: str):
        super().__init__(workdir)
        self.kube = kube
        self.cache = build()
        self.cert_dir = os.path.join(self.dir, 'certs')
        self.config_path = os.path.join(self.dir, 'config.yaml')
        self.webhook_port = self.metrics_port = self.health_port = 0
        self.tls = None

    def _choose_ports(self) -> None:
        self.webhook_port, self.metrics_port, self.health_port = free_port(), free_port(), free_port()
        config = {
            'apiVersion': 'config.lws.x-k8s.io/v1alpha1', 'kind': 'Configuration',
            'leaderElection': {'leaderElect': False},
            'internalCertManagement': {'enable': False},
            'webhook': {'host': LOOPBACK, 'port': self.webhook_port, 'certDir': self.cert_dir},
            'metrics': {'bindAddress': f'{LOOPBACK}:{self.metrics_port}'},
            'health': {'healthProbeBindAddress': f'{LOOPBACK}:{self.health_port}'},
        }
        with open(self.config_path, 'w', encoding='utf-8') as handle:
            yaml.safe_dump(config, handle)

    def _command(self) -> list:
        # verbosity 5: the log names each object a controller of it reconciles (watching_again)
        return [os.path.join(self.cache, 'bin', 'lws-manager'), '--config', self.config_path, '--zap-log-level', '5']

    def _environment(self) -> dict:
        return dict(os.environ, KUBECONFIG=self.kube.kubeconfig)

    def _ready(self) -> bool:
        with urllib.request.urlopen(f'http://{LOOPBACK}:{self.health_port}/readyz', timeout=2) as answer:  # nosec
            if answer.status != 200:
                return False
        # the webhook server answers TLS with the certificate the API server is told to trust
        context = ssl.create_default_context(cafile=self.tls.ca_cert)
        request = urllib.request.Request(f'https://{LOOPBACK}:{self.webhook_port}/validate--v1-pod', method='GET')
        try:
            urllib.request.urlopen(request, timeout=2, context=context)  # nosec: loopback only
        except urllib.error.HTTPError:
            pass  # a GET is no admission review: any HTTP answer means the server is up
        return True

    def _wait_established(self, timeout: float = 60) -> None:
        """Wait until the API server serves every CRD (`kubectl wait` fails while a new CRD has no status yet)."""
        deadline = time.monotonic() + timeout
        for crd in CRDS:
            while not any(condition['type'] == 'Established' and condition['status'] == 'True'
                          for condition in self.kube.get('crd', crd).get('status', {}).get('conditions') or []):
                if time.monotonic() > deadline:
                    raise ServerError(f'the CRD {crd} was not established in {timeout:.0f} s')
                time.sleep(0.2)

    def start_again(self) -> None:
        """Start the manager again after kill(), on the same ports and certificates (its webhooks still point there)."""
        self._spawn()
        if not self._wait_ready():
            raise ServerError(f'{self.name} did not start again; its log: {self.log_tail()}')

    def watching_again(self, timeout: float = 120) -> None:
        """Wait until the manager sees pod changes again, after the API server was down.

        The LWS controller judges a group's pods when the LeaderWorkerSet or one of its StatefulSets changes, from its
        own cache of the pods; a pod's change alone does not make it judge. After an outage each of its watches comes
        back after its own back-off (seen 17 to 22 s apart, in any order): if the last StatefulSet change of a group
        reaches it before its pod watch is back, it judges the group from pods of before and the rollout stalls until
        the next change (its resync is 10 h). A test of the runbook's wait lets pods become ready only after this.

        Seen by a change only the pod watch brings: an annotation of a pod of a LeaderWorkerSet that owns no
        StatefulSet (a worker; a leader owns its group's worker StatefulSet, so a StatefulSet's change reconciles it
        too), answered by the manager's pod controller reconciling that pod (logged at verbosity 5). Nothing to wait
        for without such a pod."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ServerError(f'{self.name} exited ({self.process.returncode}); its log: {self.log_tail()}')
            owners = {ref.get('uid') for sts in self.kube.get('statefulsets', all_namespaces=True)['items']
                      for ref in sts['metadata'].get('ownerReferences') or [] if ref.get('kind') == 'Pod'}
            pods = self.kube.get('pods', all_namespaces=True, selector=NAME_LABEL)['items']
            candidates = [pod['metadata'] for pod in pods
                          if not pod['metadata'].get('deletionTimestamp') and pod['metadata']['uid'] not in owners]
            if not candidates:
                return
            for pod in candidates:
                mark = os.path.getsize(self.log_path)
                try:
                    self.kube.kubectl('-n', pod['namespace'], 'annotate', 'pod', pod['name'],
                                      f'vllm-dr-suite/watched={time.time_ns()}', '--overwrite')
                except KubeError:
                    continue  # gone meanwhile: the next one
                reconciled = re.compile(r'Reconciling\s+\{"controller": "pod".*"Pod": \{"name":"%s","namespace":"%s"\}'
                                        % (re.escape(pod['name']), re.escape(pod['namespace'])))
                while time.monotonic() < deadline:
                    with open(self.log_path, encoding='utf-8', errors='replace') as log:
                        log.seek(mark)
                        if reconciled.search(log.read()):
                            return
                    time.sleep(0.5)
                raise ServerError(f'{self.name} did not see a change of pod {pod["namespace"]}/{pod["name"]} in '
                                  f'{timeout:.0f} s after the API server came back; its log: {self.log_tail()}')
            if time.monotonic() > deadline:
                raise ServerError(f'{self.name}: no pod of a LeaderWorkerSet could be annotated in {timeout:.0f} s')
            time.sleep(0.5)

    def start(self):
        self.tls = TlsFiles(os.path.join(self.dir, 'tls'))
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copyfile(self.tls.server_cert, os.path.join(self.cert_dir, 'tls.crt'))
        shutil.copyfile(self.tls.server_key, os.path.join(self.cert_dir, 'tls.key'))
        self.kube.kubectl('apply', '--server-side', *sum((['-f', path] for path in
                                                          sorted(glob.glob(os.path.join(self.cache, 'crd', '*.yaml')))),
                                                         []))
        self._wait_established()
        super().start()
        with open(self.tls.ca_cert, 'rb') as handle:
            ca_bundle = base64.b64encode(handle.read()).decode()
        self.kube.apply(*webhook_configurations(self.cache, self.webhook_port, ca_bundle))
        self.kube.controllers.append(self)
        return self

    def stop(self) -> None:
        # the webhooks go first: a pod of an LWS created after the manager stopped would be refused (failurePolicy Fail)
        for kind, name in WEBHOOK_NAMES.items():
            self.kube.kubectl('delete', kind.lower(), name, '--ignore-not-found', check=False)
        if self in self.kube.controllers:
            self.kube.controllers.remove(self)
        super().stop()


LWS_API = 'leaderworkerset.x-k8s.io/v1'
CACHE_CLAIM = 'cache'
REVISION_LABEL = 'leaderworkerset.sigs.k8s.io/template-revision-hash'


def lws_pod_names(groups: int, size: int, name: str = 'vllm') -> list:
    """The names the controller gives the pods: <lws>-<group> for a leader, <lws>-<group>-<worker> for a worker."""
    return [pod for group in range(groups)
            for pod in [f'{name}-{group}'] + [f'{name}-{group}-{worker}' for worker in range(1, size)]]


def lws_vllm_workload(namespace: str, lab, groups: int = 2, size: int = 2, cache_in: str = 'all',
                      max_unavailable=1, max_surge=0, backups: str | None = None) -> list:
    """The incident's workload for `lab` as a LeaderWorkerSet `vllm` of `groups` groups of `size` pods, in `namespace`:
    the namespace, the ConfigMap and the pods' logs of vllm_workload(), the LeaderWorkerSet and a PersistentVolume bound
    ahead to each pod's claim (`cache-<pod>`, from volumeClaimTemplates, as a StatefulSet names it).

    The container's workingDir is the lab's data directory, so that a relative cache path names each pod's own copy
    (pod_directories() gives each pod its directory there). `cache_in` all: the worker template mounts the claim too,
    every pod holds a copy; leader: a leader template mounts it, the workers' does not; both: a leader template and the
    worker template, each mounts it. With `backups`, the claim is
    mounted there a second time: the purge's backup directory on the cache's volume, one directory of this machine for
    every pod (each backup's name is its own), from which each is fetched (harness.k8s.pod_volume_python() shows each
    pod its own directory at the cache's path only).
    """
    data_dir = os.path.dirname(lab.cache_path)
    kept = [copy.deepcopy(doc) for doc in vllm_workload(namespace, lab, cache_volume='emptyDir')
            if doc['kind'] in ('Namespace', 'ConfigMap', 'ClusterLogs')]

    def template(mounts_cache: bool) -> dict:
        mounts = [{'name': 'config', 'mountPath': '/etc/vllm'}]
        if mounts_cache:
            mounts.insert(0, {'name': CACHE_CLAIM, 'mountPath': data_dir})
            if backups:
                mounts.append({'name': CACHE_CLAIM, 'mountPath': backups})
        return {'metadata': {'labels': {'app': 'vllm'}},
                'spec': {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai:latest', 'workingDir': data_dir,
                                         'env': copy.deepcopy(POD_ENV), 'volumeMounts': mounts}],
                         'volumes': [{'name': 'config', 'configMap': {'name': 'vllm-config'}}]}}

    leader_worker = {'size': size, 'restartPolicy': 'RecreateGroupOnPodRestart',
                     'workerTemplate': template(cache_in in ('all', 'both')),
                     'volumeClaimTemplates': [{'metadata': {'name': CACHE_CLAIM},
                                               'spec': {'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                                                        'resources': {'requests': {'storage': '1Gi'}}}}]}
    if cache_in in ('leader', 'both'):
        leader_worker['leaderTemplate'] = template(True)
    workload = {'apiVersion': LWS_API, 'kind': 'LeaderWorkerSet',
                'metadata': {'name': 'vllm', 'namespace': namespace, 'labels': {'app': 'vllm'}},
                'spec': {'replicas': groups, 'leaderWorkerTemplate': leader_worker,
                         'rolloutStrategy': {'type': 'RollingUpdate', 'rollingUpdateConfiguration': {
                             'maxUnavailable': max_unavailable, 'maxSurge': max_surge}}}}
    # the StatefulSets make a claim for every pod, whether its container mounts it or not
    volumes = [{'apiVersion': 'v1', 'kind': 'PersistentVolume', 'metadata': {'name': f'{namespace}-{pod}'},
                'spec': {'capacity': {'storage': '1Gi'}, 'accessModes': ['ReadWriteOnce'], 'storageClassName': '',
                         'hostPath': {'path': data_dir},
                         'claimRef': {'namespace': namespace, 'name': f'{CACHE_CLAIM}-{pod}'}}}
               for pod in lws_pod_names(groups, size)]
    return kept[:1] + volumes + kept[1:] + [workload]


def lws_ready(kube: KubeCluster, namespace: str, groups: int, timeout: float = 300) -> dict:
    """The LeaderWorkerSet once its controller counts every group ready at its latest generation."""
    deadline = time.monotonic() + timeout
    while True:
        workload = kube.get('leaderworkerset', 'vllm', namespace)
        status = workload.get('status') or {}
        if (status.get('observedGeneration'), status.get('readyReplicas'), status.get('updatedReplicas')) == (
                workload['metadata']['generation'], groups, groups):
            return workload
        if time.monotonic() > deadline:
            raise ServerError(f'LeaderWorkerSet vllm in {namespace} not ready in {timeout:.0f} s: {status}')
        time.sleep(0.5)


def delete_lws_workload(kube: KubeCluster, namespace: str, groups: int, size: int) -> None:
    delete_workload(kube, namespace)
    kube.kubectl('delete', 'pv', *[f'{namespace}-{pod}' for pod in lws_pod_names(groups, size)], '--wait=false',
                 '--ignore-not-found', check=False)


class LwsGatewayRuntime(GatewayRuntime):
    """GatewayRuntime for a LeaderWorkerSet: the gateway restarts when the newest pod is of a new template revision
    (the pods of a LeaderWorkerSet carry its template-revision-hash, not a pod-template-hash)."""

    REVISION_LABELS = (REVISION_LABEL,)
