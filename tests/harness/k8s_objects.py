"""Kubernetes objects as the API server returns them, small enough for unit tests of the decisions on them."""

from __future__ import annotations

import yaml

CACHE = '/var/lib/vllm/token_cache.db'


def deployment(volume=None, annotations=None, name='vllm', labels=None, init=None):
    volume = volume or {'persistentVolumeClaim': {'claimName': 'vllm-pvc'}}
    return {'metadata': {'name': name}, 'spec': {'template': {
        'metadata': {'labels': labels or {'app': 'vllm'}, 'annotations': annotations or {}},
        'spec': {'initContainers': init or [],
                 'containers': [{'name': 'vllm', 'volumeMounts': [{'name': 'root', 'mountPath': '/var'},
                                                                  {'name': 'vllm-data', 'mountPath': '/var/lib/vllm/'}]}],
                 'volumes': [{'name': 'root', 'emptyDir': {}}, dict(volume, name='vllm-data')]}}}}


def pvc(labels=None, storage_class='fast'):
    return {'metadata': {'name': 'vllm-pvc', 'labels': labels or {}},
            'spec': {'storageClassName': storage_class}, 'status': {'phase': 'Bound'}}


def config_map(rules, labels=None, name='policy'):
    return {'metadata': {'name': name, 'namespace': 'velero', 'labels': labels or {}},
            'data': {'policy.yaml': yaml.safe_dump({'version': 'v1', 'volumePolicies': rules})}}
