"""Every precondition of the purge is checked before its first change; a fixed problem lets the re-run complete."""

from __future__ import annotations

import json
import re

from harness.k8s_runbook import cluster_state, digest, report, run


def fails_before_any_change(workload, *patterns, extra=()):
    """Run the runbook: it fails, naming each problem on its own line, and nothing in the cluster or cache changed."""
    before = cluster_state(workload)
    cache = digest(workload.lab.cache_path)
    rc, output = run(workload, *extra)
    assert rc != 0, output[-4000:]
    for pattern in patterns:
        failure = [line for line in output.splitlines() if 'fatal:' in line or 'ERROR' in line]
        assert re.search(pattern, output, re.MULTILINE), (pattern, failure or output[-4000:])
    assert cluster_state(workload) == before
    assert digest(workload.lab.cache_path) == cache
    assert not workload.runtime.restarts
    return output


def set_config(workload, data=None, immutable=None):
    config_map = workload.config_map()
    kube, namespace = workload.kube, workload.namespace
    if immutable is not None or data is not None:
        kube.kubectl('-n', namespace, 'delete', 'configmap', 'vllm-config')
        document = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'vllm-config', 'namespace': namespace},
                    'data': config_map['data'] if data is None else data}
        if immutable:
            document['immutable'] = True
        kube.apply(document)


def test_each_precondition_fails_before_any_change_and_the_fixed_run_completes(workload):
    kube, namespace = workload.kube, workload.namespace
    original = dict(workload.config_map()['data'])

    # the ConfigMap missing and the Deployment paused: both named, one line each, in one run
    kube.kubectl('-n', namespace, 'delete', 'configmap', 'vllm-config')
    kube.kubectl('-n', namespace, 'rollout', 'pause', 'deployment/vllm')
    fails_before_any_change(
        workload,
        rf'ConfigMap vllm-config not found in namespace {namespace}; set vllm_dr_k8s_config_map',
        rf'Deployment vllm in namespace {namespace} is paused, so its restart would never roll out; resume it')
    kube.kubectl('-n', namespace, 'rollout', 'resume', 'deployment/vllm')

    # the key missing, and a backup directory inside the pods that is not an absolute path
    kube.apply({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'vllm-config', 'namespace': namespace},
                'data': {'logging.ini': original['logging.ini']}})
    fails_before_any_change(workload, rf'ConfigMap vllm-config in namespace {namespace} has no key vllm\.yaml '
                                      r'\(keys: logging\.ini\); set vllm_dr_k8s_config_key',
                            r'vllm_dr_k8s_pod_backup_dir backups is not an absolute path; ',
                            extra=('-e', 'vllm_dr_k8s_pod_backup_dir=backups'))

    # vllm.yaml that is not YAML
    set_config(workload, data=dict(original, **{'vllm.yaml': original['vllm.yaml'] + 'oauth: [unclosed\n'}))
    fails_before_any_change(workload, rf'vllm\.yaml in ConfigMap vllm-config in namespace {namespace}: '
                                      r'the document is not valid YAML')

    # an immutable ConfigMap that needs the edit (no raw 422 body)
    set_config(workload, data=original, immutable=True)
    output = fails_before_any_change(workload, rf'ConfigMap vllm-config in namespace {namespace} is immutable, so '
                                               r'session_state_store\.refresh_on_startup cannot be set')
    assert '422' not in output

    # fixed: the same runbook, run again, completes the recovery
    set_config(workload, data=original, immutable=False)
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert workload.runtime.restarts
    assert workload.lab.refresh('svc')[0] == 200


def test_an_empty_cache_file_is_purged_not_refused(workload):
    # what a running gateway leaves after the cache was removed under it: a 0-byte file, no table
    with open(workload.lab.cache_path, 'wb'):
        pass
    rc, output = run(workload, '-e', 'vllm_dr_force=true')
    assert rc == 0, output[-6000:]
    purge = report(workload)['purge']
    assert workload.lab.cache_path in json.dumps(purge['cache_removed']), purge
