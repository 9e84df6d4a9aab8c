"""The OpenTelemetry Collector sidecar (extensions/observability/kubernetes/vllm-dr-otelcol-sidecar.yml) patches a vLLM
Deployment as its documentation says, with the shipped collector configuration in a ConfigMap, and the API server
accepts the result."""

from __future__ import annotations

import os
import uuid

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SIDECAR = os.path.join(ROOT, 'extensions', 'observability', 'kubernetes', 'vllm-dr-otelcol-sidecar.yml')
CONFIG = os.path.join(ROOT, 'extensions', 'observability', 'otelcol', 'vllm-dr.yaml')


def vllm_deployment(namespace: str) -> dict:
    labels = {'app': 'vllm'}
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'metadata': {'name': 'vllm', 'namespace': namespace},
            'spec': {'replicas': 0, 'selector': {'matchLabels': labels},
                     'template': {'metadata': {'labels': labels},
                                  'spec': {'containers': [{'name': 'vllm', 'image': 'vllm/vllm-openai:latest'}]}}}}


def test_the_sidecar_patch_puts_the_collector_beside_vllm_on_the_shared_log_volume(kube):
    namespace = f'otelcol-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', namespace)
    try:
        # the two commands of the manifest's header, as an operator runs them
        kube.kubectl('-n', namespace, 'create', 'configmap', 'vllm-dr-otelcol', f'--from-file={CONFIG}')
        kube.apply(vllm_deployment(namespace))
        kube.kubectl('-n', namespace, 'patch', 'deployment', 'vllm', '--patch-file', SIDECAR)

        pod = kube.get('deployment', 'vllm', namespace)['spec']['template']['spec']
        containers = {container['name']: container for container in pod['containers']}
        assert set(containers) == {'vllm', 'otelcol'}
        assert containers['vllm']['image'] == 'vllm/vllm-openai:latest'
        volumes = {volume['name']: volume for volume in pod['volumes']}
        mounts = {name: {mount['name']: mount['mountPath'] for mount in container['volumeMounts']}
                  for name, container in containers.items()}
        assert mounts['vllm']['vllm-logs'] == mounts['otelcol']['vllm-logs'] == '/var/log/vllm'
        assert 'emptyDir' in volumes['vllm-logs']

        otelcol = containers['otelcol']
        env = {item['name']: item for item in otelcol['env']}
        assert env['VLLM_DR_LOG_PATH']['value'].startswith(mounts['otelcol']['vllm-logs'] + '/')
        # the collector reads its configuration file from the ConfigMap created from the shipped file
        config_map = kube.get('configmap', volumes['otelcol-config']['configMap']['name'], namespace)
        with open(CONFIG, encoding='utf-8') as handle:
            assert config_map['data'] == {os.path.basename(CONFIG): handle.read()}
        argument = next(arg for arg in otelcol['args'] if arg.startswith('--config='))
        assert argument == f'--config={mounts["otelcol"]["otelcol-config"]}/{os.path.basename(CONFIG)}'
        # the exporter listens where the container port says
        listen = env['VLLM_DR_OTELCOL_LISTEN']['value']
        assert int(listen.rsplit(':', 1)[1]) == otelcol['ports'][0]['containerPort']
        with open(CONFIG, encoding='utf-8') as handle:
            assert yaml.safe_load(handle)['exporters']['prometheus']['endpoint'].startswith('${env:VLLM_DR_OTELCOL_LISTEN')
    finally:
        kube.kubectl('delete', 'namespace', namespace, '--wait=false', check=False)
