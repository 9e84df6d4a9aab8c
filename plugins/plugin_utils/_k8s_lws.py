# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The LeaderWorkerSet kind (sigs.k8s.io/lws) of the Kubernetes target model (_k8s_target.py), from the raw reads.

A LeaderWorkerSet runs groups: group <i> is a leader pod <lws>-<i> and workers <lws>-<i>-<w> (w = 1 .. size-1). Its
controller makes one leader StatefulSet, named after the LeaderWorkerSet and owned by it, whose pods are the leaders,
and one worker StatefulSet per group, named after the leader pod and owned by it, whose pods are that group's
workers. So its pods are found through that owner chain, matched by uid: the leader pods owned by the leader
StatefulSet, the worker StatefulSets owned by those leader pods, the worker pods owned by them.

Every pod, and every StatefulSet, carries the template revision it was made from (the label
leaderworkerset.sigs.k8s.io/template-revision-hash); the leader StatefulSet carries the current one. A group is judged
as a whole, as the controller judges it: ready when its leader pod is running and ready and its worker StatefulSet
has every replica available at one revision (and every worker pod is running and ready); updated when its leader pod
and worker StatefulSet are at the current revision. The rollout is finished when the controller saw the latest spec,
counts every group updated and ready (status.updatedReplicas, status.readyReplicas against spec.replicas, no surge
group left) and says so (condition Available true, UpdateInProgress not), and no pod of an older revision is left.

The restart is LWS's own: a change of the pod templates (a restartedAt annotation in the leader and the worker
template) makes a new revision, which the controller rolls out group by group as spec.rolloutStrategy says
(maxUnavailable and maxSurge, in groups). A partition above 0 keeps the groups below it at the old revision: the
restart could not finish, so it is refused.

The token cache lives in the leader only (vLLM's API server runs there) or in every pod of a group, as the pod
templates say: the workers hold a copy when the worker template's container mounts a volume at the cache's path; the
leaders always do (the leader template, or the worker template when there is none, says where).
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_kinds import claims_of, pod_template, present_templates
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach

KIND = 'LeaderWorkerSet'
LABEL = 'leaderworkerset.sigs.k8s.io/'
NAME_LABEL = LABEL + 'name'
GROUP_LABEL = LABEL + 'group-index'
WORKER_LABEL = LABEL + 'worker-index'
REVISION_LABEL = LABEL + 'template-revision-hash'
RESTARTED = 'kubectl.kubernetes.io/restartedAt'
_CHAIN_DEPTH = 4


def _meta(obj: dict) -> dict:
    return (obj or {}).get('metadata') or {}


def _labels(obj: dict) -> dict:
    return _meta(obj).get('labels') or {}


def _owned_by(obj: dict, kind: str, uids: set) -> bool:
    return any(owner.get('kind') == kind and owner.get('uid') in uids
               for owner in _meta(obj).get('ownerReferences') or [])


def _int(value, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _ready(pod: dict) -> bool:
    """Running, not being deleted, and its Ready condition true (what the controller counts as a ready pod)."""
    status = pod.get('status') or {}
    return (status.get('phase') == 'Running' and not _meta(pod).get('deletionTimestamp')
            and any(cond.get('type') == 'Ready' and cond.get('status') == 'True'
                    for cond in status.get('conditions') or []))


def _statefulset_ready(statefulset: dict | None) -> bool:
    """Every replica available, at one revision: the controller's test of a group's workers."""
    if statefulset is None:
        return False
    spec, status = statefulset.get('spec') or {}, statefulset.get('status') or {}
    return (_int(spec.get('replicas'), 1) == _int(status.get('availableReplicas'))
            and status.get('currentRevision') == status.get('updateRevision'))


def group_size(workload: dict) -> int:
    return _int((((workload or {}).get('spec') or {}).get('leaderWorkerTemplate') or {}).get('size'), 1)


def wanted_groups(workload: dict) -> int:
    return _int(((workload or {}).get('spec') or {}).get('replicas'), 1)


def lws_owners(statefulsets: list, pods: list) -> list:
    """The names of the LeaderWorkerSets that own the pods, through the owner chain (a worker pod's StatefulSet is
    owned by its leader pod, the leader pod by the leader StatefulSet, that one by the LeaderWorkerSet), matched by
    uid; each once, in the order first met."""
    objects = {_meta(obj).get('uid'): obj
               for obj in list(statefulsets or []) + list(pods or []) if _meta(obj).get('uid')}
    names = []
    for pod in pods or []:
        current = pod
        for _step in range(_CHAIN_DEPTH):
            owners = _meta(current).get('ownerReferences') or []
            lws = [owner for owner in owners if owner.get('kind') == KIND and owner.get('name')]
            if lws:
                if lws[0]['name'] not in names:
                    names.append(lws[0]['name'])
                break
            parents = [objects[owner['uid']] for owner in owners if owner.get('uid') in objects]
            if not parents:
                break
            current = parents[0]
    return names


def current_revision(workload: dict, statefulsets: list) -> str | None:
    """The revision the controller rolls out now: the leader StatefulSet's template-revision-hash."""
    leader = leader_statefulset(workload, statefulsets)
    return _labels(leader).get(REVISION_LABEL) if leader else None


def leader_statefulset(workload: dict, statefulsets: list) -> dict | None:
    uid = _meta(workload).get('uid')
    return next((sts for sts in statefulsets or [] if _owned_by(sts, KIND, {uid})), None)


def _position(pod: dict) -> tuple:
    labels, name = _labels(pod), _meta(pod).get('name') or ''
    return (_int(labels.get(GROUP_LABEL), -1), _int(labels.get(WORKER_LABEL), 0), name)


def groups(workload: dict, statefulsets: list, pods: list) -> list:
    """The LeaderWorkerSet's groups by index, from its pods found through the owner chain:
    [{index, leader (its name, or None), workers (names, by worker index), pods (the leader first), ready, updated,
    revisions (every revision its pods run), problem (why not ready, in words, '' when ready)}]."""
    size, current = group_size(workload), current_revision(workload, statefulsets)
    leader_sts = leader_statefulset(workload, statefulsets)
    leaders = [pod for pod in pods or []
               if leader_sts and _owned_by(pod, 'StatefulSet', {_meta(leader_sts).get('uid')})]
    decided = []
    for leader in sorted(leaders, key=_position):
        name = _meta(leader).get('name')
        worker_sts = next((sts for sts in statefulsets or []
                           if _owned_by(sts, 'Pod', {_meta(leader).get('uid')})), None)
        workers = sorted((pod for pod in pods or [] if worker_sts
                          and _owned_by(pod, 'StatefulSet', {_meta(worker_sts).get('uid')})), key=_position)
        live = [pod for pod in workers if not _meta(pod).get('deletionTimestamp')]
        problem = []
        if not _ready(leader):
            problem.append(f'leader {name} not ready')
        if size > 1:
            unready = [_meta(pod).get('name') for pod in live if not _ready(pod)]
            if worker_sts is None:
                problem.append('no worker StatefulSet yet')
            elif not _statefulset_ready(worker_sts):
                status = worker_sts.get('status') or {}
                problem.append(f'workers available {_int(status.get("availableReplicas"))}/{size - 1}')
            if unready:
                problem.append(f'worker{"s" if len(unready) > 1 else ""} {", ".join(unready)} not ready')
            elif len(live) < size - 1 and worker_sts is not None and _statefulset_ready(worker_sts):
                problem.append(f'{len(live)} of {size - 1} workers running')
        revisions = sorted({_labels(pod).get(REVISION_LABEL) or '' for pod in [leader] + workers})
        updated = (current is not None and _labels(leader).get(REVISION_LABEL) == current
                   and (size == 1 or (worker_sts is not None and _labels(worker_sts).get(REVISION_LABEL) == current)))
        decided.append({'index': _int(_labels(leader).get(GROUP_LABEL), -1), 'leader': name,
                        'workers': [_meta(pod).get('name') for pod in workers],
                        'pods': [name] + [_meta(pod).get('name') for pod in workers],
                        'ready': not problem, 'updated': updated, 'revisions': revisions,
                        'problem': ', '.join(problem)})
    return decided


def lws_pods(workload: dict, statefulsets: list, pods: list) -> list:
    """The LeaderWorkerSet's own pods (through the owner chain), group by group, the leader first in each."""
    names = {name for group in groups(workload, statefulsets, pods) for name in group['pods']}
    return sorted((pod for pod in pods or [] if _meta(pod).get('name') in names), key=_position)


def old_pods(workload: dict, statefulsets: list, pods: list) -> list:
    """The names of the LeaderWorkerSet's pods (terminating ones included) not at the current revision."""
    current = current_revision(workload, statefulsets)
    return [_meta(pod).get('name') for pod in lws_pods(workload, statefulsets, pods)
            if _labels(pod).get(REVISION_LABEL) != current]


def _conditions(workload: dict) -> dict:
    return {cond.get('type'): cond for cond in ((workload or {}).get('status') or {}).get('conditions') or []}


def _counts(workload: dict) -> dict:
    status = (workload or {}).get('status') or {}
    return {'generation': _int(_meta(workload).get('generation')), 'observed': _int(status.get('observedGeneration')),
            'wanted': wanted_groups(workload), 'replicas': _int(status.get('replicas')),
            'updated': _int(status.get('updatedReplicas')), 'ready': _int(status.get('readyReplicas'))}


def rollout_complete(workload: dict) -> bool:
    """The controller saw the latest spec and counts every wanted group updated and ready, none more (no surge group
    left), and its conditions say the update is done (Available true, UpdateInProgress not true, for this
    generation)."""
    c, conditions = _counts(workload), _conditions(workload)
    available = conditions.get('Available') or {}
    in_progress = conditions.get('UpdateInProgress') or {}
    return (c['observed'] >= c['generation'] and c['updated'] == c['wanted'] and c['ready'] == c['wanted']
            and c['replicas'] == c['wanted'] and available.get('status') == 'True'
            and _int(available.get('observedGeneration'), c['generation']) >= c['generation']
            and in_progress.get('status') != 'True')


def rollout_status(workload: dict, group_list: list = ()) -> str:
    """Why the rollout is not finished, in words: the counts of groups, the conditions, and each group not ready."""
    c = _counts(workload)
    parts = [f"groups updated {c['updated']}/{c['wanted']}", f"ready {c['ready']}/{c['wanted']}",
             f"groups {c['replicas']} (surge ones included)"]
    if c['observed'] < c['generation']:
        parts.append(f"generation {c['generation']} not yet observed (controller at {c['observed']})")
    described = [f"{cond.get('type')}={cond.get('status')} ({cond.get('reason', '')}: {cond.get('message', '')})"
                 for cond in _conditions(workload).values()]
    text = ', '.join(parts) + '; conditions: ' + ('; '.join(described) if described else 'none reported')
    unready = [f"group {group['index']} ({group['problem']})" for group in group_list or [] if not group['ready']]
    return text + (f"; not ready: {'; '.join(unready)}" if unready else '')


def status_lag(workload: dict, group_list: list = ()) -> str:
    """'' unless the groups' own pods (`group_list`, from groups()) show more groups ready, or updated, than the
    LeaderWorkerSet's status counts (counted as its controller counts them: every group, surge ones included): then
    the controller has not judged them since they changed, and the rollout waits on it, not on the pods. The
    controller judges a group's pods only when the LeaderWorkerSet or one of its StatefulSets changes, not when a pod
    does; one that was not watching when the last of those changes came (its watches were down: after an API server
    outage, each comes back after its own back-off) stays behind until the next change. So does one that is not
    running."""
    c = _counts(workload)
    ready = sum(1 for group in group_list or [] if group['ready'])
    updated = sum(1 for group in group_list or [] if group['updated'])
    if not group_list or c['observed'] < c['generation'] or (ready <= c['ready'] and updated <= c['updated']):
        return ''
    name, namespace = _meta(workload).get('name'), _meta(workload).get('namespace')
    return (f"; its groups' pods show {ready} ready and {updated} updated, more than its status counts: the "
            f"LeaderWorkerSet controller has not judged them since they changed (it does when the LeaderWorkerSet or "
            f"one of its StatefulSets changes, and misses a change while its watches are down, as after an API server "
            f"outage). Check that the controller runs, make it judge the groups again (kubectl -n {namespace} annotate "
            f"leaderworkerset {name} vllm-dr.inferops.io/reconcile=$(date +%s) --overwrite, which restarts "
            f"nothing), then re-run")


def partition(workload: dict) -> int:
    rolling = (((workload or {}).get('spec') or {}).get('rolloutStrategy') or {}).get('rollingUpdateConfiguration')
    return _int((rolling or {}).get('partition'))


def restart_problems(workload: dict, namespace: str) -> list:
    """Why a restart of the LeaderWorkerSet could not finish, one line each, before anything is changed."""
    name, kept = _meta(workload).get('name'), partition(workload)
    if kept > 0:
        return [f'LeaderWorkerSet {name} in namespace {namespace} has rolloutStrategy partition {kept}, so its restart '
                f'would leave group{"s" if kept > 1 else ""} 0..{kept - 1} on the stale cache; set '
                'spec.rolloutStrategy.rollingUpdateConfiguration.partition to 0, then re-run']
    return []


def restart_templates(workload: dict) -> list:
    """The pod templates the restart annotates: the worker template, and the leader template when there is one
    (else the worker template is the leaders' too)."""
    return [keys[-1] for keys, _template in present_templates(workload, KIND)]


def restart_patch(workload: dict, stamp: str) -> dict:
    """The merge patch that restarts every group: `stamp` as the restartedAt annotation of the worker template, and
    of the leader template when there is one (else the worker template is the leaders' too)."""
    annotated = {'metadata': {'annotations': {RESTARTED: stamp}}}
    return {'spec': {'leaderWorkerTemplate': {template: annotated for template in restart_templates(workload)}}}


def _template_workload(workload: dict, role: str) -> dict:
    """The pod template of `role` (leader or worker) shaped as a StatefulSet's spec, with leaderWorkerTemplate's
    volumeClaimTemplates (a claim per pod, which the pod template alone does not name), for the cache reach."""
    claims = claims_of(workload, KIND)
    return {'metadata': {'name': f'{_meta(workload).get("name")} ({role} template)'},
            'spec': {'template': pod_template(workload, KIND, role), 'volumeClaimTemplates': claims}}


def holders(workload: dict, cache_path: str, container: str) -> tuple[str, str]:
    """('leader' or 'all', why): whether the workers hold a copy of the cache too, from the worker template."""
    worker = cache_reach(_template_workload(workload, 'worker'), [], cache_path, container, kind=KIND)
    if worker['volume'] is not None:
        return 'all', f'the worker template mounts volume {worker["volume"]} at the cache: every pod holds a copy'
    return 'leader', 'the worker template mounts no volume at the cache: the leaders hold it'


def _is_leader(pod: dict, workload: dict) -> bool:
    """A leader pod: the StatefulSet that controls it is the leader one, named after the LeaderWorkerSet (a group's
    worker StatefulSet is named after its leader pod)."""
    return any(owner.get('kind') == 'StatefulSet' and owner.get('name') == _meta(workload).get('name')
               for owner in _meta(pod).get('ownerReferences') or [])


def lws_cache_reach(workload: dict, pods: list, cache_path: str, container: str, *, method: str = 'exec',
                    pod_backup_dir: str = '', mode: str = 'auto', kind: str = KIND) -> dict:
    """The cache reach (plugin_utils/_cache_reach.py's answer) over the pods that hold a copy: the leader pods among
    `pods` (the LeaderWorkerSet's own running ones) against the leader template, and, when the workers hold one too,
    the worker pods against the worker template; with holders ('leader' or 'all') and holders_reason. Read and purged
    in the leaders first, then the workers."""
    del kind
    name = _meta(workload).get('name')
    held_by, why = holders(workload, cache_path, container)
    leaders = [pod for pod in pods or [] if _is_leader(pod, workload)]
    workers = [pod for pod in pods or [] if not _is_leader(pod, workload)]
    parts = [('leader', leaders)] + ([('worker', workers)] if held_by == 'all' else [])
    reaches = [cache_reach(_template_workload(workload, role), members, cache_path, container, method=method,
                           pod_backup_dir=pod_backup_dir, mode=mode, kind=KIND)
               for role, members in parts]
    decided = dict(reaches[0], holders=held_by, holders_reason=why)
    if method != 'exec':
        decided['problem'] = (f'vllm_dr_k8s_purge_method {method} is not supported for a LeaderWorkerSet; set it to '
                              'exec (the cache is purged in each pod that holds a copy, then the groups are restarted)')
        return decided
    if len(reaches) > 1:
        worker = reaches[1]
        decided['problem'] = decided['problem'] or worker['problem']
        if not decided['problem'] and (worker['location'], worker['backup_dir']) != (decided['location'],
                                                                                     decided['backup_dir']):
            decided['problem'] = (f'the leader and worker templates of LeaderWorkerSet {name} put the cache at '
                                  f'{decided["where"]} and {worker["where"]}; mount its volume at the same path in '
                                  'both templates, then re-run')
        decided['inspect'] = decided['inspect'] + worker['inspect']
        decided['purge'] = decided['purge'] + worker['purge']
        decided['own_copies'] = decided['own_copies'] and worker['own_copies']
        decided['reason'] = f"leaders: {decided['reason']}; workers: {worker['reason']}"
    decided['reason'] = f"{why}; {decided['reason']}"
    return decided


def leaderworkerset(workload: dict, statefulsets: list, pods: list, *, namespace: str, quotas: list = (),
                    limit_ranges: list = ()) -> dict:
    """The LeaderWorkerSet's facts for the target model: its pods (group by group, the leader first), the old ones,
    its groups, whether its rollout is complete (by its status: its controller judges each group as a whole) and why
    not, the preconditions of its restart and how the restart rolls. `statefulsets` are the namespace's StatefulSets
    (the leader one and each group's worker one). Quotas are not judged: a surge adds whole groups, and maxSurge is 0
    unless set."""
    del quotas, limit_ranges
    group_list = groups(workload, statefulsets, pods)
    kept, lag = partition(workload), status_lag(workload, group_list)
    return {'pods': lws_pods(workload, statefulsets, pods), 'old_pods': old_pods(workload, statefulsets, pods),
            'groups': group_list, 'complete': rollout_complete(workload),
            'status': rollout_status(workload, group_list) + lag, 'lagging': bool(lag), 'paused': False,
            'restart_problems': restart_problems(workload, namespace),
            'restart': {'strategy': 'RollingUpdate', 'partition': kept or None,
                        'templates': restart_templates(workload),
                        'stay_old': [pod for group in group_list if 0 <= group['index'] < kept
                                     for pod in group['pods']]}}
