"""The LeaderWorkerSet kind of the target model: its groups through the owner chain, each judged as a whole, its
rollout judged by its status, its restart by a template change, and which pods of a group hold the token cache.

The objects are shaped as the lws v0.9.0 controller makes them (tests/functional/k8s/test_kubernetes_lws_model.py
drives the same model against the real controller's objects): a leader StatefulSet named after the LeaderWorkerSet and
owned by it, a worker StatefulSet per group named after its leader pod and owned by it, every pod and StatefulSet
labelled with its template revision."""

from __future__ import annotations

import copy

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils import _k8s_lws as lws
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import k8s_target

L = 'leaderworkerset.sigs.k8s.io/'
CACHE = '/var/lib/vllm/token_cache.db'


def template(volume: dict | None = None) -> dict:
    mounts = [{'name': 'config', 'mountPath': '/etc/vllm'}]
    volumes = [{'name': 'config', 'configMap': {'name': 'vllm-config'}}]
    if volume is not None:
        mounts.append({'name': 'vllm-data', 'mountPath': '/var/lib/vllm'})
        volumes.append(dict({'name': 'vllm-data'}, **volume))
    return {'metadata': {'labels': {'app': 'vllm'}},
            'spec': {'containers': [{'name': 'vllm', 'volumeMounts': mounts}], 'volumes': volumes}}


def leader_worker_set(groups=2, size=3, worker=None, leader=None, generation=1, status=None, partition=0, claims=()):
    spec = {'replicas': groups,
            'leaderWorkerTemplate': {'size': size, 'workerTemplate': worker or template({'emptyDir': {}})},
            'rolloutStrategy': {'type': 'RollingUpdate',
                                'rollingUpdateConfiguration': {'maxUnavailable': 1, 'maxSurge': 0,
                                                               'partition': partition}}}
    if leader is not None:
        spec['leaderWorkerTemplate']['leaderTemplate'] = leader
    if claims:
        spec['leaderWorkerTemplate']['volumeClaimTemplates'] = [{'metadata': {'name': name}} for name in claims]
    done = {'observedGeneration': generation, 'replicas': groups, 'updatedReplicas': groups, 'readyReplicas': groups,
            'conditions': [{'type': 'Progressing', 'status': 'False', 'observedGeneration': generation},
                           {'type': 'Available', 'status': 'True', 'observedGeneration': generation}]}
    return {'apiVersion': 'leaderworkerset.x-k8s.io/v1', 'kind': 'LeaderWorkerSet',
            'metadata': {'name': 'vllm', 'uid': 'lws-uid', 'generation': generation},
            'spec': spec, 'status': done if status is None else status}


def pod(name, group, worker, owner, revision='r1', ready=True, phase='Running'):
    return {'metadata': {'name': name, 'uid': f'uid-{name}',
                         'labels': {'app': 'vllm', L + 'name': 'vllm', L + 'group-index': str(group),
                                    L + 'worker-index': str(worker), L + 'template-revision-hash': revision},
                         'ownerReferences': [{'kind': 'StatefulSet', 'name': owner['metadata']['name'],
                                              'uid': owner['metadata']['uid'], 'controller': True}]},
            'status': {'phase': phase, 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}}


def statefulset(name, owner_kind, owner_name, replicas, revision='r1', available=None, group=None):
    labels = {L + 'name': 'vllm', L + 'template-revision-hash': revision}
    if group is not None:
        labels[L + 'group-index'] = str(group)
    return {'metadata': {'name': name, 'uid': f'sts-{name}', 'labels': labels,
                         'ownerReferences': [{'kind': owner_kind, 'name': owner_name,
                                              'uid': 'lws-uid' if owner_kind == 'LeaderWorkerSet'
                                              else f'uid-{owner_name}', 'controller': True}]},
            'spec': {'replicas': replicas},
            'status': {'availableReplicas': replicas if available is None else available,
                       'currentRevision': f'{name}-1', 'updateRevision': f'{name}-1'}}


def objects(groups=2, size=3, revision='r1', **kwargs):
    """(the LeaderWorkerSet, its StatefulSets, its pods), all ready at `revision`."""
    workload = leader_worker_set(groups, size, **kwargs)
    leader_sts = statefulset('vllm', 'LeaderWorkerSet', 'vllm', groups, revision)
    sets, pods = [leader_sts], []
    for group in range(groups):
        leader = pod(f'vllm-{group}', group, 0, leader_sts, revision)
        pods.append(leader)
        workers = statefulset(f'vllm-{group}', 'Pod', f'vllm-{group}', size - 1, revision, group=group)
        sets.append(workers)
        pods.extend(pod(f'vllm-{group}-{index}', group, index, workers, revision) for index in range(1, size))
    return workload, sets, pods


def facts(workload, sets, pods):
    return lws.leaderworkerset(workload, sets, pods, namespace='ns')


def names(pods):
    return [item['metadata']['name'] for item in pods]


def test_pods_are_found_through_the_owner_chain_group_by_group_leader_first():
    workload, sets, pods = objects(groups=11, size=2)
    # a pod labelled like the set's, owned by no StatefulSet of it, is not one of its pods
    stranger = pod('vllm-99', 99, 0, {'metadata': {'name': 'other', 'uid': 'other-uid'}})
    decided = facts(workload, sets, list(reversed(pods)) + [stranger])
    # group 10 after group 9: by group index, not by name
    assert names(decided['pods']) == [name for group in range(11) for name in (f'vllm-{group}', f'vllm-{group}-1')]
    assert [group['index'] for group in decided['groups']] == list(range(11))
    assert decided['groups'][3] == {'index': 3, 'leader': 'vllm-3', 'workers': ['vllm-3-1'],
                                    'pods': ['vllm-3', 'vllm-3-1'], 'ready': True, 'updated': True,
                                    'revisions': ['r1'], 'problem': ''}


def test_the_owners_are_named_from_a_worker_pod_through_its_leader_pod():
    _workload, sets, pods = objects()
    workers_only = [item for item in pods if item['metadata']['labels'][L + 'worker-index'] != '0']
    leaders = [item for item in pods if item['metadata']['labels'][L + 'worker-index'] == '0']
    assert lws.lws_owners(sets, workers_only + leaders) == ['vllm']
    # without the leader pods the chain breaks at the worker StatefulSet: nothing is guessed from the labels
    assert lws.lws_owners(sets, workers_only) == []


def test_a_group_is_ready_only_when_its_leader_and_every_worker_are():
    workload, sets, pods = objects()
    pods[4]['status']['conditions'][0]['status'] = 'False'  # vllm-1-1
    sets[2]['status']['availableReplicas'] = 1
    decided = facts(workload, sets, pods)
    assert [group['ready'] for group in decided['groups']] == [True, False]
    assert decided['groups'][1]['problem'] == 'workers available 1/2, worker vllm-1-1 not ready'
    pods[3]['status']['phase'] = 'Pending'  # the leader vllm-1
    assert facts(workload, sets, pods)['groups'][1]['problem'].startswith('leader vllm-1 not ready')


def test_the_rollout_is_complete_when_the_status_counts_every_group_updated_and_ready():
    workload, sets, pods = objects()
    assert facts(workload, sets, pods)['complete'] is True
    for change in ({'updatedReplicas': 1}, {'readyReplicas': 1}, {'replicas': 3}, {'observedGeneration': 0}):
        changed = copy.deepcopy(workload)
        changed['status'].update(change)
        assert facts(changed, sets, pods)['complete'] is False, change


def test_an_update_in_progress_or_not_available_is_not_complete():
    workload, sets, pods = objects()
    rolling = copy.deepcopy(workload)
    rolling['status']['conditions'].append({'type': 'UpdateInProgress', 'status': 'True', 'reason': 'GroupsUpdating',
                                            'message': 'Rolling Upgrade is in progress', 'observedGeneration': 1})
    decided = facts(rolling, sets, pods)
    assert decided['complete'] is False
    assert 'UpdateInProgress=True (GroupsUpdating: Rolling Upgrade is in progress)' in decided['status']
    stale = copy.deepcopy(workload)
    stale['metadata']['generation'] = 2
    stale['status']['observedGeneration'] = 2  # counted at generation 2, but Available still said of generation 1
    assert facts(stale, sets, pods)['complete'] is False


def test_pods_of_an_older_revision_are_old_while_the_new_one_rolls():
    workload, sets, pods = objects(revision='r2')
    for item in pods[:3] + sets[1:2]:  # group 0 still at r1
        item['metadata']['labels'][L + 'template-revision-hash'] = 'r1'
    decided = facts(workload, sets, pods)
    assert decided['old_pods'] == ['vllm-0', 'vllm-0-1', 'vllm-0-2']
    assert [group['updated'] for group in decided['groups']] == [False, True]


def test_a_partition_is_refused_as_a_restart_that_would_leave_groups_stale():
    workload, sets, pods = objects(groups=3, partition=2)
    decided = facts(workload, sets, pods)
    assert decided['restart_problems'] == [
        'LeaderWorkerSet vllm in namespace ns has rolloutStrategy partition 2, so its restart would leave groups 0..1 '
        'on the stale cache; set spec.rolloutStrategy.rollingUpdateConfiguration.partition to 0, then re-run']
    assert decided['restart']['stay_old'] == ['vllm-0', 'vllm-0-1', 'vllm-0-2', 'vllm-1', 'vllm-1-1', 'vllm-1-2']
    assert facts(*objects())['restart'] == {'strategy': 'RollingUpdate', 'partition': None, 'stay_old': [],
                                            'templates': ['workerTemplate']}


def test_the_restart_annotates_the_leader_template_too_when_there_is_one():
    stamp = '2026-12-06T01:00:00Z'
    annotated = {'metadata': {'annotations': {lws.RESTARTED: stamp}}}
    assert lws.restart_patch(leader_worker_set(), stamp) == {
        'spec': {'leaderWorkerTemplate': {'workerTemplate': annotated}}}
    assert lws.restart_patch(leader_worker_set(leader=template()), stamp) == {
        'spec': {'leaderWorkerTemplate': {'workerTemplate': annotated, 'leaderTemplate': annotated}}}


def reach(workload, sets, pods, **kwargs):
    return lws.lws_cache_reach(workload, lws.lws_pods(workload, sets, pods), CACHE, 'vllm', **kwargs)


def test_the_leaders_alone_hold_the_cache_when_the_worker_template_mounts_nothing_there():
    hostpath = {'hostPath': {'path': '/srv/vllm'}}
    workload, sets, pods = objects(worker=template(), leader=template(hostpath))
    decided = reach(workload, sets, pods)
    assert decided['holders'] == 'leader'
    assert decided['strategy'] == 'per_node'
    assert decided['problem'] is None
    assert decided['reason'].startswith('the worker template mounts no volume at the cache: the leaders hold it')


def test_every_pod_of_a_group_holds_a_copy_when_the_worker_template_mounts_it():
    workload, sets, pods = objects(worker=template({'csi': {'driver': 'x'}}))
    decided = reach(workload, sets, pods)
    assert decided['holders'] == 'all'
    # the leaders first, then the workers
    assert decided['purge'] == ['vllm-0', 'vllm-1', 'vllm-0-1', 'vllm-0-2', 'vllm-1-1', 'vllm-1-2']
    assert decided['inspect'] == decided['purge']


def test_a_claim_per_pod_from_volume_claim_templates_is_purged_in_every_pod():
    worker = template()
    worker['spec']['containers'][0]['volumeMounts'].append({'name': 'cache', 'mountPath': '/var/lib/vllm'})
    workload, sets, pods = objects(worker=worker, claims=('cache',))
    decided = reach(workload, sets, pods)
    assert (decided['holders'], decided['strategy'], decided['problem']) == ('all', 'per_pod', None)
    assert len(decided['purge']) == 6


def test_templates_that_put_the_cache_in_different_places_are_refused_in_one_line():
    # a relative cache path, against each template's workingDir
    worker, leader = template({'csi': {'driver': 'x'}}), template({'csi': {'driver': 'x'}})
    worker['spec']['containers'][0]['volumeMounts'][-1]['mountPath'] = '/srv'
    worker['spec']['containers'][0]['workingDir'] = '/srv'
    leader['spec']['containers'][0]['workingDir'] = '/var/lib/vllm'
    workload, sets, pods = objects(worker=worker, leader=leader)
    decided = lws.lws_cache_reach(workload, lws.lws_pods(workload, sets, pods), 'token_cache.db', 'vllm')
    assert decided['problem'] == (
        'the leader and worker templates of LeaderWorkerSet vllm put the cache at /var/lib/vllm/token_cache.db (csi '
        'volume vllm-data, token_cache.db in the volume) and /srv/token_cache.db (csi volume vllm-data, '
        'token_cache.db in the volume); mount its volume at the same path in both templates, then re-run')


def test_a_purge_method_that_patches_one_template_is_refused_in_one_line():
    assert reach(*objects(), method='init_container')['problem'].startswith(
        'vllm_dr_k8s_purge_method init_container is not supported for a LeaderWorkerSet; set it to exec')


def test_the_target_model_reads_the_kind_from_the_pods_and_takes_the_groups():
    workload, sets, pods = objects(worker=template({'csi': {'driver': 'x'}}))
    for item in pods:  # kwok's pods: running
        item['spec'] = {}
    # the pods' own controller is a StatefulSet: the LeaderWorkerSet's label names the kind
    assert k8s_target(None, sets, pods, namespace='ns', kind='auto')['kind'] == 'LeaderWorkerSet'
    target = k8s_target({'resources': [workload]}, sets, pods, namespace='ns', kind='auto', cache_path=CACHE)
    assert (target['kind'], target['name'], target['api_version'], target['resource'], target['group']) == (
        'LeaderWorkerSet', 'vllm', 'leaderworkerset.x-k8s.io/v1', 'leaderworkersets', 'leaderworkerset.x-k8s.io')
    assert target['workloads'] == ['vllm']
    assert target['pods'] == ['vllm-0', 'vllm-0-1', 'vllm-0-2', 'vllm-1', 'vllm-1-1', 'vllm-1-2']
    assert target['rollout']['finished'] is True
    assert target['cache_reach']['purge'] == ['vllm-0', 'vllm-1', 'vllm-0-1', 'vllm-0-2', 'vllm-1-1', 'vllm-1-2']
    assert target['restart']['templates'] == ['workerTemplate']
    # the rollback takes the cache's place from the same model (discover's cache_reach), by the kind's own reach
    assert (target['cache_reach']['location'], target['cache_reach']['problem']) == (CACHE, None)


def stalled(groups=2):
    """The rollout a controller stopped judging: group 1 rolled to r2 and ready in its pods, group 0 still at r1
    (the partition was not lowered), and the status still counting group 1 as not ready (from before it was)."""
    workload, sets, pods = objects(groups=groups, size=2, revision='r2')
    for item in pods[:2] + sets[1:2]:
        item['metadata']['labels'][L + 'template-revision-hash'] = 'r1'
    workload['metadata']['namespace'] = 'ns'
    workload['status'].update({'updatedReplicas': 1, 'readyReplicas': 1})
    return workload, sets, pods


def test_a_status_that_lags_the_groups_pods_is_named_with_how_to_make_the_controller_judge_them_again():
    workload, sets, pods = stalled()
    decided = facts(workload, sets, pods)
    assert decided['complete'] is False
    assert decided['status'].startswith('groups updated 1/2, ready 1/2')
    assert "its groups' pods show 2 ready and 1 updated, more than its status counts" in decided['status']
    assert decided['lagging'] is True
    assert ('kubectl -n ns annotate leaderworkerset vllm vllm-dr.inferops.io/reconcile=$(date +%s) --overwrite'
            in decided['status'])
    # counted by the same rule through the target model (what the rollout wait's message prints)
    target = k8s_target({'resources': [workload]}, sets, pods, namespace='ns', kind='LeaderWorkerSet')
    assert 'more than its status counts' in target['rollout']['status'] and target['rollout']['lagging'] is True
    # without the pods (a wait's read of the workload alone) nothing is said to lag
    assert k8s_target({'resources': [workload]}, namespace='ns', kind='LeaderWorkerSet')['rollout']['lagging'] is False


def test_a_status_that_agrees_with_the_pods_or_has_not_seen_the_spec_is_not_said_to_lag():
    workload, sets, pods = stalled()
    pods[2]['status']['conditions'][0]['status'] = 'False'  # group 1's leader not ready: the status is right
    assert 'status counts' not in facts(workload, sets, pods)['status']
    assert facts(workload, sets, pods)['lagging'] is False
    workload, sets, pods = stalled()
    workload['metadata']['generation'] = 2  # a spec the controller has not seen: its counts are of the old one
    assert 'status counts' not in facts(workload, sets, pods)['status']
    workload, sets, pods = stalled()
    assert 'status counts' not in lws.rollout_status(workload)  # no pods read: nothing to compare
    workload, sets, pods = objects()
    assert lws.status_lag(workload, facts(workload, sets, pods)['groups']) == ''  # finished: agrees


def test_a_ready_surge_group_counts_as_the_controller_counts_it():
    # three groups (index 2 a surge one, beyond replicas 2), all ready in their pods; the status counts two ready:
    # the controller counts surge groups too, so one group is not counted
    workload, sets, pods = objects(groups=3, size=2)
    workload['spec']['replicas'] = 2
    workload['metadata']['namespace'] = 'ns'
    workload['status'].update({'replicas': 3, 'readyReplicas': 2, 'updatedReplicas': 3})
    assert "show 3 ready and 3 updated" in lws.status_lag(workload, facts(workload, sets, pods)['groups'])
    workload['status']['readyReplicas'] = 3
    assert lws.status_lag(workload, facts(workload, sets, pods)['groups']) == ''
