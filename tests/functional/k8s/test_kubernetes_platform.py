"""The runbook with vllm_dr_platform=kubernetes, on a real API server with real controllers (kwok runs the pods)."""

from __future__ import annotations

import json
import os
import re
import subprocess

import yaml

from harness.caches import cache_rows
from harness.k8s import CONFIG_NOTE
from harness.k8s_runbook import (cluster_state, current_hash, digest, pod_hashes, rbac_documents, report, run,
                                 service_account_kubeconfig, store, when_logged)
from harness.playbooks import playbook, recap
from harness.reports import report_path
from harness.sessions import dump_redis


def test_drill_on_the_control_plane_diagnoses_purges_restarts_and_validates(workload):
    before_pods = {pod['metadata']['name'] for pod in workload.pods()}
    before_hash = current_hash(workload)
    before_cache = cache_rows(workload.lab.cache_path)
    before_store = dump_redis(store(workload))
    assert len(before_pods) == 2
    assert workload.lab.refresh('svc')[0] == 401

    rc, output = run(workload)
    assert rc == 0, output[-6000:]

    result = report(workload)
    diagnosis = result['diagnosis']
    assert diagnosis['recovery_needed'] is True
    assert diagnosis['platform'] == 'kubernetes'
    assert diagnosis['kubernetes']['deployment'] == 'vllm'
    assert sorted(diagnosis['kubernetes']['pods']) == sorted(before_pods)
    assert diagnosis['cache']['stale'] is True
    # the logs of both replicas were read, and they show the incident
    assert diagnosis['logs']['error_lines'] > 0
    read = diagnosis['logs']['pods']
    assert sorted(pod['name'] for pod in read) == sorted(before_pods), read
    assert all(pod['state'] == 'read' and pod['error_lines'] > 0 for pod in read), read

    # exec: the cache, on the volume every replica shares, was purged once, in the first pod, backed up on the volume
    # and on the controller; the report names every pod and the one the cache was read and purged in
    first = sorted(before_pods)[0]
    reach = diagnosis['kubernetes']['cache_reach']
    assert (reach['strategy'], reach['inspect'], reach['purge']) == ('shared', [first], [first]), reach
    purge = result['purge']
    assert purge['cache_backups'], purge
    fetched = [os.path.join(walked[0], name) for walked in os.walk(purge['backup_dir']) for name in walked[2]
               if name.startswith('token_cache.db')]
    assert [os.path.basename(os.path.dirname(path)) for path in fetched if path.endswith('.bak')] == \
        [f'{workload.namespace}_{first}'], fetched
    assert oct(os.stat(fetched[0]).st_mode & 0o777) == '0o600'
    markdown = report_path(workload.reports, 'lab.md').read_text()
    assert f"- Pods of Deployment vllm: {', '.join(sorted(before_pods))}; token cache read in {first} " \
           '(persistentVolumeClaim volume vllm-data is the same for every replica: one copy)' in markdown, markdown
    assert re.search(rf'- Token cache removed: [^\n]+ \(in {first}\); backups: ', markdown), markdown
    assert int(purge['sessions_deleted']) >= 1

    # restarted: a new ReplicaSet, all pods Ready, none of the old ones left
    after_hash = current_hash(workload)
    assert after_hash != before_hash
    assert pod_hashes(workload) == {after_hash}
    pods = workload.pods()
    assert len(pods) == 2 and not before_pods & {pod['metadata']['name'] for pod in pods}
    assert all(any(c['type'] == 'Ready' and c['status'] == 'True' for c in pod['status']['conditions']) for pod in pods)
    deployment = workload.deployment()
    assert 'kubectl.kubernetes.io/restartedAt' in deployment['spec']['template']['metadata']['annotations']
    assert re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$',
                    deployment['spec']['template']['metadata']['annotations']['kubectl.kubernetes.io/restartedAt'])
    assert workload.runtime.restarts, 'the gateway behind the pods was not restarted by the rollout'

    # validated, and really working
    assert result['validation']['failed'] == [], result['validation']
    assert workload.lab.refresh('svc')[0] == 200

    # vllm.yaml in the ConfigMap: the flag set, the comment and the other key kept
    data = workload.config_map()['data']
    assert data['vllm.yaml'].startswith(CONFIG_NOTE)
    assert yaml.safe_load(data['vllm.yaml'])['session_state_store']['refresh_on_startup'] is True
    assert data['logging.ini'] == '[logger_root]\nlevel = INFO\n'

    # a second run finds nothing to do and restarts nothing
    generation = workload.deployment()['metadata']['generation']
    rc, output = run(workload)
    assert rc == 0, output[-4000:]
    assert recap(output)['changed'] == 0, output[-4000:]
    assert workload.deployment()['metadata']['generation'] == generation

    # the rollback merges the first run's one backup back through the pods running now: every row the run removed
    rc, output = playbook(workload.inventory_path, 'dr_rollback.yml', '-e', f"vllm_dr_rollback_dir={purge['backup_dir']}",
                          env=workload.kube.env)
    assert rc == 0, output[-4000:]
    for pod in sorted(pod['metadata']['name'] for pod in pods):
        assert f'{workload.namespace}/{pod}: {workload.namespace}_{first}/' in output, output[-4000:]
    # every swept session is back; the service's own session was signed in again by the restarted gateway
    service_session = workload.lab.state['service_session']
    service = f"vllm:session:{service_session}".encode()
    cached = cache_rows(workload.lab.cache_path)
    assert {sid: row for sid, row in cached.items() if sid != service_session} == {
        sid: row for sid, row in before_cache.items() if sid != service_session}, cached.keys()
    after_store = dump_redis(store(workload))
    assert {k: v for k, v in after_store.items() if k != service} == \
        {k: v for k, v in before_store.items() if k != service}


def test_check_mode_changes_nothing_in_the_cluster(workload):
    before = cluster_state(workload)
    cache = digest(workload.lab.cache_path)
    rc, output = run(workload, '--check')
    assert rc == 0, output[-6000:]
    assert 'changed: [lab' in output  # it does report what it would change
    assert cluster_state(workload) == before
    assert digest(workload.lab.cache_path) == cache
    assert not workload.runtime.restarts


def test_init_container_method_patches_a_deployment_the_api_server_accepts(workload, tmp_path):
    workload.write_inventory(vllm_dr_k8s_purge_method='init_container')
    rc, output = run(workload)
    assert rc == 0, output[-6000:]

    template = workload.deployment()['spec']['template']['spec']
    init = [c for c in template.get('initContainers', []) if c['name'] == 'purge-token-cache']
    assert len(init) == 1
    assert init[0]['volumeMounts'] == [{'name': 'vllm-data', 'mountPath': os.path.dirname(workload.lab.cache_path)}]
    assert init[0]['command'][:2] == ['sh', '-c']
    assert pod_hashes(workload) == {current_hash(workload)}

    # the init container's script, run by sh here, moves the cache aside on the volume and keeps five
    data = tmp_path / 'volume'
    data.mkdir()
    # the cache and the backup directory beside it (vllm_dr_k8s_pod_backup_dir's default) moved to the copy's volume
    script = init[0]['command'][2].replace(os.path.dirname(workload.lab.cache_path), str(data))
    for run_number in range(7):
        (data / 'token_cache.db').write_bytes(b'cache %d' % run_number)
        (data / 'token_cache.db-wal').write_bytes(b'wal')
        subprocess.run(['sh', '-c', script], check=True)
        assert not (data / 'token_cache.db').exists() and not (data / 'token_cache.db-wal').exists()
    kept = sorted(os.listdir(data / '.vllm_dr_backups'))
    assert len(kept) == 5
    names = sorted(os.listdir(data / '.vllm_dr_backups' / kept[-1]))
    assert [re.sub(r'\.\d{8}T\d{6}\.\d{6}Z\.', '.<stamp>.', name) for name in names] == \
        ['token_cache.db.<stamp>.bak', 'token_cache.db.<stamp>.bak-wal'], names
    subprocess.run(['sh', '-c', script], check=True)  # nothing to move: still succeeds

    # applying it again changes nothing: the same init container is already there, the pod template is as it was
    # and nothing rolls. (The forced run records the restart it might owe on the Deployment's metadata before its
    # first change, and removes it at its end when it changed nothing: the record bumps the Deployment's generation,
    # as any change of its annotations does, but not its template.)
    template, hashes = workload.deployment()['spec']['template'], pod_hashes(workload)
    rc, output = run(workload, '-e', 'vllm_dr_force=true')
    assert rc == 0, output[-6000:]
    assert workload.deployment()['spec']['template'] == template and pod_hashes(workload) == hashes
    assert 'vllm-dr.inferops.io/restart-pending' not in workload.deployment()['metadata'].get('annotations', {})


def test_velero_hook_method_annotates_the_pod_template_and_purges_now(workload):
    workload.write_inventory(vllm_dr_k8s_purge_method='velero_hook')
    rc, output = run(workload)
    assert rc == 0, output[-6000:]
    annotations = workload.deployment()['spec']['template']['metadata']['annotations']
    assert annotations['init.hook.restore.velero.io/container-name'] == 'purge-token-cache'
    assert annotations['init.hook.restore.velero.io/container-image'].startswith('busybox')
    command = json.loads(annotations['init.hook.restore.velero.io/command'])
    assert command[:2] == ['sh', '-c'] and 'token_cache.db' in command[2]
    assert 'initContainers' not in workload.deployment()['spec']['template']['spec']  # ordinary restarts keep the cache
    assert report(workload)['purge']['cache_backups']
    assert workload.lab.refresh('svc')[0] == 200


VELERO_CRD = {
    'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
    'metadata': {'name': 'restores.velero.io'},
    'spec': {'group': 'velero.io', 'scope': 'Namespaced',
             'names': {'plural': 'restores', 'singular': 'restore', 'kind': 'Restore', 'listKind': 'RestoreList'},
             'versions': [{'name': 'v1', 'served': True, 'storage': True,
                           'schema': {'openAPIV3Schema': {'type': 'object',
                                                          'x-kubernetes-preserve-unknown-fields': True}}}]},
}


def velero_restore(name, phase, completed=None):
    status = {'phase': phase}
    if completed:
        status['completionTimestamp'] = completed
    return {'apiVersion': 'velero.io/v1', 'kind': 'Restore', 'metadata': {'name': name, 'namespace': 'velero'},
            'spec': {'backupName': 'nightly'}, 'status': status}


def restored_at(output):
    return re.search(r'"restored at: ([^"]*)"', output).group(1)


def test_restore_time_comes_from_the_latest_finished_velero_restore(workload):
    workload.write_inventory(vllm_dr_restored_at='')
    kube = workload.kube
    kube.kubectl('delete', 'crd', 'restores.velero.io', '--ignore-not-found')
    rc, output = run(workload, '--tags', 'diagnose', '--check')
    assert rc == 0, output[-6000:]
    assert restored_at(output) == 'unknown'  # no Velero installed: no restore time, no failure

    kube.apply(VELERO_CRD)
    kube.kubectl('wait', '--for=condition=Established', 'crd/restores.velero.io', '--timeout=60s')
    kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}},
               velero_restore('nightly-1', 'Completed', '2026-11-30T02:10:00Z'),
               velero_restore('nightly-2', 'PartiallyFailed', '2026-12-01T02:12:30Z'),
               velero_restore('nightly-3', 'InProgress'),
               velero_restore('nightly-0', 'Failed', '2026-11-29T02:00:00Z'))
    try:
        rc, output = run(workload, '--tags', 'diagnose', '--check')
        assert rc == 0, output[-6000:]
        assert restored_at(output) == '2026-12-01T02:12:30Z'
    finally:
        kube.kubectl('delete', 'crd', 'restores.velero.io', '--ignore-not-found')


def test_a_missing_deployment_is_an_error(workload):
    workload.write_inventory(vllm_dr_k8s_deployment='vllm-gone')
    rc, output = run(workload)
    assert rc != 0
    assert re.search(r'Deployment vllm-gone not found in namespace vllm-\w+; check vllm_dr_k8s_deployment', output)


def test_runbook_runs_with_the_shipped_least_privilege_role(workload, tmp_path):
    kube = workload.kube
    kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}})
    kube.apply(*rbac_documents(workload.namespace))
    kubeconfig = service_account_kubeconfig(workload, tmp_path)
    # the identity really is limited: it may not read secrets
    assert kube.kubectl('auth', 'can-i', 'get', 'secrets', '-n', workload.namespace,
                        kubeconfig=kubeconfig, check=False).strip() == 'no'
    inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig}, vllm_dr_restored_at='')
    rc, output = run(workload, inventory=inventory)
    assert rc == 0, output[-6000:]
    assert report(workload)['validation']['failed'] == []
    assert kubeconfig not in output or 'token' not in output
    token = yaml.safe_load(open(kubeconfig, encoding='utf-8'))['users'][0]['user']['token']
    assert token not in output


def test_a_role_missing_a_verb_fails_first_and_names_the_permission(workload, tmp_path):
    kube = workload.kube
    kube.apply({'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': 'velero'}})
    kube.apply(*rbac_documents(workload.namespace, drop_verb=('patch', 'deployments')))
    kubeconfig = service_account_kubeconfig(workload, tmp_path)
    inventory = workload.write_inventory(vllm_dr_k8s_auth={'kubeconfig': kubeconfig})
    before = cluster_state(workload)
    cache = digest(workload.lab.cache_path)
    rc, output = run(workload, inventory=inventory)
    assert rc != 0
    assert re.search(rf'missing Kubernetes permission: patch deployments\.apps vllm in namespace {workload.namespace}; '
                     r'grant it to this identity', output), output[-4000:]
    # it stopped before the purge changed anything
    assert cluster_state(workload) == before
    assert digest(workload.lab.cache_path) == cache


def test_a_rollout_that_cannot_finish_fails_with_its_conditions_and_the_rerun_waits_for_it(workload, tmp_path):
    kube = workload.kube
    kube.kubectl('cordon', 'kwok-node-0')
    try:
        inventory = workload.write_inventory(vllm_dr_k8s_rollout_timeout=8)
        rc, output = run(workload, inventory=inventory)
        assert rc != 0
        # maxSurge 1, maxUnavailable 0: one new pod waits for a node, the two old ones keep serving
        assert re.search(r'rollout of Deployment vllm in vllm-\w+ did not finish in 8 s: updated 1/2, available 2/2, '
                         r'replicas 3 \(old ones included\); conditions: .*Progressing=True '
                         r'\((NewReplicaSetCreated|ReplicaSetUpdated)', output), output[-4000:]
        # the re-run waits for the rollout the first run left unfinished; the node comes back just after the re-run
        # listed the pods, so the rollout replaces them while it would read their logs and purge them
        log_path = str(tmp_path / 'rerun.log')
        watcher = when_logged(log_path, r'TASK \[inferops\.vllm_dr\.k8s_target : Keep the running pods\]',
                              lambda: kube.kubectl('uncordon', 'kwok-node-0'))
        rc, output = playbook(workload.write_inventory(vllm_dr_k8s_rollout_timeout=120), 'dr_restore.yml',
                              env=dict(kube.env, ANSIBLE_LOG_PATH=log_path))
        watcher.join()
    finally:
        kube.kubectl('uncordon', 'kwok-node-0', check=False)
    assert rc == 0, output[-6000:]
    # the diagnosis waited for the rollout before it read the logs of the pods it left
    assert re.search(r"TASK \[inferops\.vllm_dr\.k8s_target : Wait until the Deployment's rollout is complete\].*"
                     r'TASK \[inferops\.vllm_dr\.restore : Read the logs of every replica\]', output, re.S), output[-6000:]
    # the validation waited for the rollout too (whether or not the re-run restarted again)
    assert "Fix the rollout wait's deadline" in output[output.index('Prove the recovery'):], output[-6000:]
    assert pod_hashes(workload) == {current_hash(workload)}
    assert report(workload)['validation']['failed'] == []
