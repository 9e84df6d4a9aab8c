"""The readiness audit's verdict for a Deployment: the cache's volume and its exclusion per Velero backup mode, the
restore purge, the PrometheusRules (skipped without the CRD), refresh_on_startup in the ConfigMap."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.inferops.vllm_dr.plugins.module_utils._dr_audit import AuditError, verdict
from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import CACHE_LABEL, EXCLUDES, skip_rule

from harness.k8s_objects import CACHE, config_map, deployment, pvc

RULE = {'metadata': {'name': 'vllm-dr'}, 'spec': {'groups': [{'name': 'g', 'rules': [
    {'alert': 'VllmTokenRefreshErrors', 'expr': '1'}, {'alert': 'VllmInvalidSessionToken', 'expr': '1'}]}]}}


def facts(template=None, pvcs=None, policies=None, rules=None, refresh=False, modes=None):
    vllm_yaml = yaml.safe_dump({'session_state_store': {'backend': 'redis', 'refresh_on_startup': refresh}})
    found = {'platform': 'kubernetes', 'deployments': [template or deployment()], 'pvcs': pvcs or [pvc()],
             'config_maps': [{'metadata': {'name': 'vllm-config'}, 'data': {'vllm.yaml': vllm_yaml}}],
             'velero_config_maps': policies or [], 'selector': 'app=vllm', 'deployment': '', 'container': 'vllm',
             'cache': {'path': CACHE}, 'config_map': 'vllm-config', 'config_key': 'vllm.yaml', 'rules': rules,
             'store': {'backend': 'redis'}, 'probe': {'refresh_url': 'http://x', 'session': 'svc', 'found': True}}
    if modes is not None:
        found['backup_modes'] = modes
    return found


def items(result):
    return {item['id']: item for item in result['items']}


def test_an_unhardened_deployment_fails_p2_and_p3_and_skips_p4_without_the_crd():
    result = verdict(facts(), fail_below=100)
    found = items(result)
    assert {key: item['status'] for key, item in found.items()} == {
        'cache_external': 'advice', 'refresh_on_startup': 'fail', 'restore_hook': 'fail',
        'cache_outside_snapshots': 'fail', 'alert_rules': 'skip', 'probe_session': 'pass'}
    assert 'no PrometheusRule CRD' in found['alert_rules']['detail']
    assert 'file-system backups include volume vllm-data' in found['cache_outside_snapshots']['detail']
    assert 'snapshot backups include PVC vllm-pvc' in found['cache_outside_snapshots']['detail']
    assert result['score'] == 25 and result['below_threshold'] and result['skipped']


def test_a_hardened_deployment_is_ready():
    template = deployment(annotations={EXCLUDES: 'vllm-data', 'init.hook.restore.velero.io/container-name': 'p'})
    result = verdict(facts(template, [pvc({CACHE_LABEL: 'true'})], [config_map([skip_rule()])], [RULE],
                           refresh=True), fail_below=100)
    assert result['verdict'] == 'ready' and result['score'] == 100, result
    assert 'resource policy velero/policy skips PVC vllm-pvc' in items(result)['cache_outside_snapshots']['detail']


def test_only_the_backup_modes_in_use_are_judged():
    template = deployment(annotations={EXCLUDES: 'vllm-data'})
    assert items(verdict(facts(template, modes=['file_system'])))['cache_outside_snapshots']['status'] == 'pass'
    assert items(verdict(facts(template)))['cache_outside_snapshots']['status'] == 'fail'
    with pytest.raises(AuditError, match='backup_modes must be a list of file_system, snapshot'):
        verdict(facts(modes=['tape']))


def test_an_emptydir_cache_needs_only_the_file_system_exclusion():
    template = deployment(volume={'emptyDir': {}}, annotations={EXCLUDES: 'vllm-data'})
    assert items(verdict(facts(template)))['cache_outside_snapshots']['status'] == 'pass'


def test_a_hostpath_cache_fails_with_the_fix():
    item = items(verdict(facts(deployment(volume={'hostPath': {'path': '/srv'}}))))['cache_outside_snapshots']
    assert item['status'] == 'fail' and 'emptyDir or a PVC of its own' in item['fix']


def test_missing_alert_rules_fail_when_the_crd_exists():
    assert items(verdict(facts(rules=[])))['alert_rules']['status'] == 'fail'


def test_a_missing_container_is_an_audit_error():
    bad = facts()
    bad['container'] = 'sidecar'
    with pytest.raises(AuditError, match='no container sidecar'):
        verdict(bad)
