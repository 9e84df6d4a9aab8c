"""The readiness audit and the Velero exclusion (dr_harden.yml) on a StatefulSet and on a LeaderWorkerSet, on the real
API server, each run as an identity bound only to the shipped Roles of its kind: the audit judges the workload's pod
templates and the PVCs of its volumeClaimTemplates claim (one per pod); dr_harden.yml annotates every pod template
that mounts the cache and labels every pod's PVC, changes nothing the second time or with --check, and
vllm_dr_harden_state=absent takes out exactly what it added; each rule of the kind's Roles taken away is named."""

from __future__ import annotations

import copy
import json
import re
import uuid

import pytest
import yaml

from conftest import Workload
from harness.k8s_runbook import leaks
from harness.lws import delete_lws_workload, lws_ready, lws_vllm_workload
from harness.playbooks import playbook, recap
from lab.labctl import Lab
from test_kubernetes_lws import without_deployment_rules
from test_kubernetes_rbac_per_playbook import grant, kubeconfig_of, shipped_roles
# the fixture of the StatefulSet suite: the lab behind a `vllm` StatefulSet, its cache on a volumeClaimTemplates claim
from test_kubernetes_statefulset import statefulset  # noqa: F401 pylint: disable=unused-import

EXCLUDES = 'backup.velero.io/backup-volumes-excludes'
CACHE_LABEL = 'vllm-dr.inferops.io/token-cache'
POLICY = 'vllm-dr-token-cache'
# the operator's own resource policy (in the ConfigMap the runbook's Role names) and another annotation of theirs
OPERATOR_RULE = {'conditions': {'csi': {}}, 'action': {'type': 'snapshot'}}
KEPT = {'example.com/owner': 'inference-team'}
SKIP_RULE = {'conditions': {'pvcLabels': {CACHE_LABEL: 'true'}}, 'action': {'type': 'skip'}}
LWS_TEMPLATES = ('workerTemplate', 'leaderTemplate')


@pytest.fixture
def lws_both(kwok, lws_controller, tmp_path):
    """The lab behind a LeaderWorkerSet `vllm` of 2 groups of 2 whose leader and worker templates both mount the cache's
    volumeClaimTemplates claim `cache` (a PVC cache-<pod> per pod)."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=3)
    namespace = f'lws-{uuid.uuid4().hex[:8]}'
    try:
        kwok.apply(*lws_vllm_workload(namespace, lab, 2, 2, cache_in='both'))
        lws_ready(kwok, namespace, 2)
        work = Workload(kwok, lab, namespace, tmp_path)
        work.host.update({'vllm_dr_cache_path': 'token_cache.db'})
        work.write_inventory()
        yield work
    finally:
        delete_lws_workload(kwok, namespace, 2, 2)
        lab.down()


def templates_of(obj: dict, kind: str) -> dict:
    """The pod templates of the workload, by their path."""
    if kind == 'StatefulSet':
        return {'spec.template': obj['spec']['template']}
    return {f'spec.leaderWorkerTemplate.{key}': obj['spec']['leaderWorkerTemplate'][key] for key in LWS_TEMPLATES}


def item(result: dict, key: str) -> dict:
    return next(entry for entry in result['items'] if entry['id'] == key)


def exercise(workload: Workload, tmp_path, kind: str, resource: str, volume: str, pvcs: list, roles: dict) -> None:
    """The audit and dr_harden.yml through their whole cycle on the workload of `kind`, each as an identity bound to
    its shipped Roles (`roles`: playbook -> (Roles in the workload's namespace, in Velero's, the kind's own))."""
    kube, ns = workload.kube, workload.namespace
    velero_ns = f'velero-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', velero_ns)

    def state() -> dict:
        config_map = kube.get('configmap', POLICY, velero_ns)
        return {'annotations': {path: (template['metadata'].get('annotations') or {})
                                for path, template in templates_of(kube.get(resource, 'vllm', ns), kind).items()},
                'pvc_labels': {name: kube.get('pvc', name, ns)['metadata'].get('labels') or {} for name in pvcs},
                'policy': yaml.safe_load(config_map['data']['policy.yaml'])}

    try:
        # the operator already excludes a scratch volume and annotates each pod template, and has a resource policy
        metadata = {'metadata': {'annotations': dict(KEPT, **{EXCLUDES: 'scratch'})}}
        patch = ({'spec': {'template': metadata}} if kind == 'StatefulSet' else
                 {'spec': {'leaderWorkerTemplate': {key: metadata for key in LWS_TEMPLATES}}})
        kube.kubectl('-n', ns, 'patch', resource, 'vllm', '--type', 'merge', '-p', json.dumps(patch))
        kube.apply({'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': POLICY, 'namespace': velero_ns},
                    'data': {'policy.yaml': yaml.safe_dump({'version': 'v1', 'volumePolicies': [OPERATOR_RULE]})}})
        inventories, kind_roles = {}, {}
        for name, (names, velero_names, own) in roles.items():
            shipped = [without_deployment_rules(role) for role in shipped_roles(names, velero_names)]
            assert {role['metadata']['name'] for role in shipped} >= set(own), (name, own)
            account = f"vllm-dr-{name.split('_')[1].split('.')[0]}"
            grant(kube, ns, velero_ns, account, shipped)
            inventories[name] = workload.write_inventory(
                vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                vllm_dr_k8s_velero_namespace=velero_ns, vllm_dr_k8s_kind=kind)
            kind_roles[name] = shipped
        outputs = {}
        # logged: the workload's pod templates carry a secret in their env (POD_ENV), and no run may show it
        env = dict(kube.env, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'))

        def run(name, *extra, inventory=None):
            rc, output = playbook(inventory or inventories[name], name, *extra, env=env)
            outputs[f'{len(outputs)}: {name} {" ".join(extra)}'] = output
            return rc, output

        def audit(*extra):
            rc, output = run('dr_audit.yml', '-e', 'vllm_dr_audit_fail_below=100', *extra)
            assert (workload.reports / 'lab.audit.json').exists(), output[-3000:]
            return rc, output, json.loads((workload.reports / 'lab.audit.json').read_text())['audit']

        before = state()
        rc, output, result = audit('-vvv')
        assert rc != 0 and 'is below 100%' in output and 'missing Kubernetes permission' not in output, output[-3000:]
        assert item(result, 'restore_hook')['status'] == 'fail'
        for path in before['annotations']:
            where = f'{kind} vllm' + (f' {path}' if kind == 'LeaderWorkerSet' else '')
            assert f'{where} has no init container purge' in item(result, 'restore_hook')['detail']
        p3 = item(result, 'cache_outside_snapshots')
        assert p3['status'] == 'fail'
        assert f'file-system backups include volume {volume} (volumeClaimTemplate)' in p3['detail'], p3
        for pvc in pvcs:
            assert f'snapshot backups include PVC {pvc};' in p3['detail'], p3

        # --check: every change named, none made
        rc, output = run('dr_harden.yml', '--check', '--diff')
        assert rc == 0, output[-3000:]
        assert output.count(f'{EXCLUDES}: scratch -> scratch,{volume}') == len(before['annotations']), output[-3000:]
        for pvc in pvcs:
            assert f'PersistentVolumeClaim {pvc}, label {CACHE_LABEL}: added' in output
        assert state() == before

        rc, output = run('dr_harden.yml', '-vvv', '--diff')
        assert rc == 0, output[-3000:]
        # the recap counts tasks: one patch of the workload (all its templates), the PVCs' labels (a loop, one item per
        # PVC, each named above), the policy
        assert recap(output)['changed'] == 3, output[-3000:]
        after = state()
        for path, annotations in after['annotations'].items():
            assert annotations[EXCLUDES] == f'scratch,{volume}', (path, annotations)
            assert {key: annotations[key] for key in KEPT} == KEPT
        assert all(labels.get(CACHE_LABEL) == 'true' for labels in after['pvc_labels'].values()), after
        assert after['policy'] == {'version': 'v1', 'volumePolicies': [SKIP_RULE, OPERATOR_RULE]}

        rc, output = run('dr_harden.yml')
        assert rc == 0 and recap(output)['changed'] == 0, output[-3000:]
        assert state() == after

        rc, output, result = audit()
        p3 = item(result, 'cache_outside_snapshots')
        assert p3['status'] == 'pass', p3
        for pvc in pvcs:
            assert f'resource policy {velero_ns}/{POLICY} skips PVC {pvc}' in p3['detail'], p3

        rc, output = run('dr_harden.yml', '-e', 'vllm_dr_harden_state=absent')
        assert rc == 0 and recap(output)['changed'] == 3, output[-3000:]
        assert state() == before
        rc, output = run('dr_harden.yml', '-e', 'vllm_dr_harden_state=absent')
        assert rc == 0 and recap(output)['changed'] == 0, output[-3000:]

        # each rule of the kind's own Roles is needed: taken away, it is named before any change
        for name, own in ((name, entry[2]) for name, entry in roles.items()):
            shipped = kind_roles[name]
            for role_index, role in enumerate(shipped):
                if role['metadata']['name'] not in own:
                    continue
                for rule_index, rule in enumerate(role['rules']):
                    account = f'vllm-dr-narrow-{role_index}-{rule_index}-{name[3]}'
                    narrowed = copy.deepcopy(shipped)
                    del narrowed[role_index]['rules'][rule_index]
                    grant(kube, ns, velero_ns, account, narrowed)
                    inventory = workload.write_inventory(
                        vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                        vllm_dr_k8s_velero_namespace=velero_ns, vllm_dr_k8s_kind=kind)
                    rc, output = run(name, inventory=inventory)
                    refusal = re.search(r'missing Kubernetes permissions?: (.*?); grant (?:it|them) to this identity',
                                        output)
                    assert rc != 0 and refusal, (name, rule, output[-4000:])
                    for permission in refusal.group(1).split('; '):
                        verb, what = permission.split()[:2]
                        assert verb in rule['verbs'] and what.split('.')[0] in rule['resources'], (rule, permission)
                    assert state() == before

        assert leaks(workload, outputs, tmp_path / 'ansible.log') == []
    finally:
        kube.kubectl('delete', 'namespace', velero_ns, '--wait=false', check=False)


def test_statefulset_audit_and_exclusion_cover_its_template_and_every_pods_claim(statefulset, tmp_path):
    workload = statefulset(incident=False)
    exercise(workload, tmp_path, 'StatefulSet', 'statefulset', 'vllm-data', ['vllm-data-vllm-0', 'vllm-data-vllm-1'], {
        'dr_audit.yml': (['vllm-dr-audit', 'vllm-dr-audit-statefulset'], ['vllm-dr-audit'],
                         ['vllm-dr-audit-statefulset']),
        'dr_harden.yml': (['vllm-dr-harden', 'vllm-dr-harden-statefulset'], ['vllm-dr-harden'],
                          ['vllm-dr-harden-statefulset'])})


def test_leaderworkerset_audit_and_exclusion_cover_both_templates_and_every_pods_claim(lws_both, tmp_path):
    exercise(lws_both, tmp_path, 'LeaderWorkerSet', 'leaderworkerset', 'cache',
             ['cache-vllm-0', 'cache-vllm-0-1', 'cache-vllm-1', 'cache-vllm-1-1'], {
                 'dr_audit.yml': (['vllm-dr-audit', 'vllm-dr-lws-audit'], ['vllm-dr-audit'], ['vllm-dr-lws-audit']),
                 'dr_harden.yml': (['vllm-dr-harden', 'vllm-dr-lws-harden'], ['vllm-dr-harden'],
                                   ['vllm-dr-lws-harden'])})
