"""Least privilege that works when narrowed: each playbook runs green as an identity bound only to its own Role(s)
of the shipped rbac.yml (objects named by resourceNames), and with any one rule of them taken away it is refused in
one line naming the missing permission, before any change. After a removed rule the playbook only has to reach its
permission check, so the runs that are refused stay short."""

from __future__ import annotations

import copy
import re
import uuid

import pytest
import yaml

from harness.k8s_runbook import RBAC, cluster_state
from harness.playbooks import playbook
from test_kubernetes_rollback_per_pod import backup_set

# playbook -> its Roles in rbac.yml (namespace vllm: its own and its Deployment's, then Velero's), the extra vars it runs
# with
PLAYBOOKS = {
    'dr_restore.yml': (['vllm-dr-restore', 'vllm-dr-restore-deployment'], ['vllm-dr-restores'],
                       ('-e', 'vllm_dr_force=true')),
    'dr_detect.yml': (['vllm-dr-detect', 'vllm-dr-detect-deployment'], ['vllm-dr-restores'], ()),
    'dr_rollback.yml': (['vllm-dr-rollback', 'vllm-dr-rollback-deployment'], [], ()),
    'dr_audit.yml': (['vllm-dr-audit'], ['vllm-dr-audit'], ()),
    'dr_harden.yml': (['vllm-dr-harden'], ['vllm-dr-harden'], ()),
}


def shipped_roles(names: list, velero_names: list) -> list:
    with open(RBAC, encoding='utf-8') as handle:
        items = yaml.safe_load(handle)['items']
    return ([item for item in items if item['kind'] == 'Role' and item['metadata']['namespace'] == 'vllm'
             and item['metadata']['name'] in names]
            + [item for item in items if item['kind'] == 'Role' and item['metadata']['namespace'] == 'velero'
               and item['metadata']['name'] in velero_names])


def grant(kube, namespace: str, velero_ns: str, account: str, roles: list) -> None:
    """The Roles, as shipped (moved into the test's namespaces), bound to `account` alone."""
    documents = [{'apiVersion': 'v1', 'kind': 'ServiceAccount', 'metadata': {'name': account, 'namespace': namespace}}]
    for role in roles:
        role = copy.deepcopy(role)
        where = namespace if role['metadata']['namespace'] == 'vllm' else velero_ns
        role['metadata'] = {'name': f"{role['metadata']['name']}-{account}", 'namespace': where}
        documents += [role, {'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
                             'metadata': {'name': role['metadata']['name'], 'namespace': where},
                             'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role',
                                         'name': role['metadata']['name']},
                             'subjects': [{'kind': 'ServiceAccount', 'name': account, 'namespace': namespace}]}]
    kube.apply(*documents)


def kubeconfig_of(workload, tmp_path, account: str) -> str:
    kube = workload.kube
    token = kube.kubectl('-n', workload.namespace, 'create', 'token', account, '--duration=1h').strip()
    config = yaml.safe_load(kube.kubectl('config', 'view', '--raw', '--minify', '-o', 'yaml'))
    config['users'] = [{'name': account, 'user': {'token': token}}]
    config['contexts'][0]['context']['user'] = account
    path = tmp_path / f'{account}.kubeconfig'
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return str(path)


@pytest.mark.parametrize('name', list(PLAYBOOKS))
def test_each_playbook_runs_with_its_shipped_role_and_names_each_rule_taken_away(healthy_workload, tmp_path, name):
    workload = healthy_workload
    kube, namespace = workload.kube, workload.namespace
    velero_ns = f'velero-{uuid.uuid4().hex[:8]}'
    kube.kubectl('create', 'namespace', velero_ns)
    names, velero_names, extra = PLAYBOOKS[name]
    roles = shipped_roles(names, velero_names)
    assert roles, (name, names, velero_names)
    rollback_dir = tmp_path / 'run'
    if name == 'dr_rollback.yml':
        for pod in sorted(p['metadata']['name'] for p in workload.pods()):
            backup_set(rollback_dir, namespace, pod, 'the cache before the run')
        # the hand-made backups have no primary key to merge by: each replaces its pod's cache
        extra = ('-e', f'vllm_dr_rollback_dir={rollback_dir}', '-e', 'vllm_dr_rollback_replace_cache=true')
    try:
        account = 'vllm-dr-all'
        grant(kube, namespace, velero_ns, account, roles)
        inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                                             vllm_dr_k8s_velero_namespace=velero_ns)
        rc, output = playbook(inventory, name, *extra, env=kube.env)
        assert rc == 0, output[-6000:]
        assert 'missing Kubernetes permission' not in output

        for role_index, role in enumerate(roles):
            for rule_index, rule in enumerate(role['rules']):
                account = f'vllm-dr-{role_index}-{rule_index}'
                narrowed = copy.deepcopy(roles)
                del narrowed[role_index]['rules'][rule_index]
                grant(kube, namespace, velero_ns, account, narrowed)
                inventory = workload.write_inventory(
                    vllm_dr_k8s_auth={'kubeconfig': kubeconfig_of(workload, tmp_path, account)},
                    vllm_dr_k8s_velero_namespace=velero_ns)
                before = cluster_state(workload)
                rc, output = playbook(inventory, name, *extra, env=kube.env)
                refusal = re.search(r'missing Kubernetes permissions?: (.*?); grant (?:it|them) to this identity',
                                    output)
                assert rc != 0 and refusal, (role['metadata']['name'], rule, output[-4000:])
                missing = refusal.group(1).split('; ')
                # every permission named belongs to the rule taken away, with its name where the rule has names
                for permission in missing:
                    verb, resource = permission.split()[:2]
                    assert verb in rule['verbs'], (rule, permission)
                    assert resource.split('.')[0] in rule['resources'], (rule, permission)
                    if rule.get('resourceNames'):
                        assert permission.split()[2] in rule['resourceNames'], (rule, permission)
                assert cluster_state(workload) == before, (rule, output[-3000:])
    finally:
        kube.kubectl('delete', 'namespace', velero_ns, '--wait=false', check=False)
