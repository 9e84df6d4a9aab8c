# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The StatefulSet kind's rules, which the target model (_k8s_target.py, KINDS) composes.

- Its pods: those whose controller is the StatefulSet (matched by uid), in ordinal order (the order it starts and
  replaces them in). A pod's revision is its controller-revision-hash label, against status.updateRevision.
- Its rollout, as `kubectl rollout status sts` judges it (kubectl's StatefulSetStatusViewer): the latest spec observed
  (observedGeneration not 0 and caught up), readyReplicas == replicas, then with a rollingUpdate (the API server
  defaults one, partition 0) updatedReplicas >= replicas - partition, else currentRevision == updateRevision. kubectl
  judges no OnDelete StatefulSet; for one, the spec observed and every replica ready is complete: an OnDelete
  StatefulSet replaces nothing by itself, so pods of an older revision are not a rollout to wait for.
- Its restart: RollingUpdate rolls the ordinals >= partition (the others stay at their revision: stay_old names them;
  the partition is never changed); OnDelete rolls nothing by itself, the restart deletes the pods one by one.
"""

from __future__ import annotations

REVISION_LABEL = 'controller-revision-hash'


def _meta(obj: dict) -> dict:
    return (obj or {}).get('metadata') or {}


def _controller(obj: dict) -> dict:
    return next((owner for owner in _meta(obj).get('ownerReferences') or [] if owner.get('controller')), {})


def ordinal(name: str) -> int:
    """The ordinal of a StatefulSet's pod name (<statefulset>-<ordinal>); -1 when it has none."""
    tail = (name or '').rpartition('-')[2]
    return int(tail) if tail.isdigit() else -1


def strategy(statefulset: dict) -> tuple[str, int]:
    """(the update strategy's type, its partition: 0 unless a RollingUpdate names one)."""
    update = (statefulset.get('spec') or {}).get('updateStrategy') or {}
    kind = update.get('type') or 'RollingUpdate'
    partition = int(((update.get('rollingUpdate') or {}).get('partition') or 0)) if kind == 'RollingUpdate' else 0
    return kind, partition


def statefulset_owners(owners: list, pods: list) -> list:  # pylint: disable=unused-argument
    """The names of the StatefulSets that control the pods: nothing lies between a StatefulSet and its pods."""
    names = []
    for pod in pods or []:
        owner = _controller(pod)
        if owner.get('kind') == 'StatefulSet' and owner.get('name') and owner['name'] not in names:
            names.append(owner['name'])
    return names


def statefulset_pods(pods: list, statefulset: dict) -> list:
    """The StatefulSet's own pods (controlled by it, matched by uid), in ordinal order."""
    uid = _meta(statefulset).get('uid')
    own = [pod for pod in pods or []
           if _controller(pod).get('kind') == 'StatefulSet' and _controller(pod).get('uid') == uid]
    return sorted(own, key=lambda pod: (ordinal(_meta(pod).get('name')), _meta(pod).get('name') or ''))


def rollout_verdict(statefulset: dict) -> tuple[bool, str]:
    """(finished, why, in words) as `kubectl rollout status statefulset/<name>` judges it; an OnDelete StatefulSet
    (kubectl judges none) is finished once its latest spec is observed and every replica is ready."""
    spec, status = statefulset.get('spec') or {}, statefulset.get('status') or {}
    kind, partition = strategy(statefulset)
    generation = _meta(statefulset).get('generation', 0)
    observed = status.get('observedGeneration', 0)
    replicas = spec.get('replicas', 1)
    ready, updated = status.get('readyReplicas', 0), status.get('updatedReplicas', 0)
    if not _observed(statefulset):
        return False, f'generation {generation} not yet observed (controller at {observed})'
    if ready < replicas:
        return False, f'waiting for {replicas - ready} pods to be ready (ready {ready}/{replicas})'
    if kind == 'OnDelete':
        return True, f'OnDelete: {ready}/{replicas} ready, updated {updated}'
    rolling = (spec.get('updateStrategy') or {}).get('rollingUpdate')
    if rolling is not None:
        # the API server defaults the partition to 0: kubectl judges by it whenever it is there
        if rolling.get('partition') is not None and updated < replicas - partition:
            return False, (f'waiting for partitioned roll out to finish: {updated} out of {replicas - partition} new '
                           f'pods have been updated (partition {partition})')
        return True, f'partitioned roll out complete: {updated} new pods have been updated (partition {partition})'
    if status.get('updateRevision') != status.get('currentRevision'):
        return False, (f"waiting for statefulset rolling update to complete {updated} pods at revision "
                       f"{status.get('updateRevision')}")
    return True, (f"statefulset rolling update complete {status.get('currentReplicas', 0)} pods at revision "
                  f"{status.get('currentRevision')}")


def statefulset(workload: dict, owners: list, pods: list, *, namespace: str,  # pylint: disable=unused-argument
                quotas: list = (), limit_ranges: list = ()) -> dict:
    """A StatefulSet: its pods by the owner chain in ordinal order, its rollout as kubectl judges it, the pods of an
    older revision its rollout still replaces, and how its restart rolls (stay_old: the ordinals below the partition,
    which a restart leaves at their revision). A StatefulSet replaces one pod at a time, never surging: no quota
    room is asked."""
    own = statefulset_pods(pods, workload)
    update = (workload.get('status') or {}).get('updateRevision')
    kind, partition = strategy(workload)
    names = [_meta(pod).get('name') for pod in own]
    old = [_meta(pod).get('name') for pod in own if (_meta(pod).get('labels') or {}).get(REVISION_LABEL) != update]
    complete, status = rollout_verdict(workload)
    if kind == 'OnDelete':
        # nothing replaces them by itself: not a rollout to wait for; the restart deletes them one by one
        old_pods, stay_old = [], []
    else:
        old_pods = [name for name in old if ordinal(name) >= partition]
        stay_old = [name for name in names if ordinal(name) < partition]
    updated = [_meta(pod).get('name') for pod in own
               if (_meta(pod).get('labels') or {}).get(REVISION_LABEL) == update and _ready(pod)]
    return {'pods': own, 'old_pods': old_pods, 'complete': complete, 'status': status, 'paused': False,
            'restart_problems': [],
            'restart': {'strategy': kind, 'partition': partition if kind == 'RollingUpdate' else None,
                        'stay_old': stay_old, 'update_revision': update, 'updated': updated,
                        'observed': _observed(workload)}}


def _observed(statefulset: dict) -> bool:
    observed = (statefulset.get('status') or {}).get('observedGeneration', 0)
    return bool(observed) and observed >= _meta(statefulset).get('generation', 0)


def _ready(pod: dict) -> bool:
    status = pod.get('status') or {}
    return (status.get('phase') == 'Running' and not _meta(pod).get('deletionTimestamp')
            and any(cond.get('type') == 'Ready' and cond.get('status') == 'True'
                    for cond in status.get('conditions') or []))


def replacement_ready(target: dict, pod: str, old_uid: str) -> bool:
    """Whether pod `pod` of an OnDelete StatefulSet, deleted for the restart when its uid was `old_uid`, is back: a new
    pod under its name (another uid), running and ready at the update revision. `target` is the k8s_target model of a
    read of the StatefulSet and its pods taken after the controller observed the template change."""
    restart, uids = target.get('restart') or {}, target.get('pod_uids') or {}
    return pod in (restart.get('updated') or []) and pod in uids and uids[pod] != old_uid
