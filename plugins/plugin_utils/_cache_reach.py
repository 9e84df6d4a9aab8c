# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which pods the runbook must reach to read and purge the token cache, from the volume that holds it.

The one place that decides it. The kind of volume tells how many copies of the cache there are:
- shared: a volume every replica of the workload mounts (a PersistentVolumeClaim, a network file system): one copy,
  read and purged once, in the first pod.
- per_node: a hostPath: one copy per node, read and purged in one pod of each node.
- restart: the pod's own storage that dies with the pod (an emptyDir, a generic ephemeral volume, or no volume at all:
  the container's own file system). The restart replaces every pod and with it every copy: the restart is the purge,
  no exec is needed, and nothing that would survive the restart is deleted (so there is nothing to back up). The
  diagnosis still reads one copy, as evidence of what the restart discards.
- per_pod: a StatefulSet's volumeClaimTemplates volume (a PersistentVolumeClaim per pod: every pod's own copy), and
  anything else (a CSI volume, a subPathExpr that may name a directory per pod): every pod, as before.
Where the cache is (the path against workingDir, the mount that holds it, its subPath or subPathExpr) is resolved by
module_utils/_cache_path.py, which the audit and dr_harden read too; with it this decides how the purge reaches the
cache for the method asked (exec inside the container, the init container on the same subPath, the restart) and
where its backups go (on the cache's own volume). What cannot be resolved or reached is `problem`, one line the run
stops on before its first change; nothing is guessed.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._cache_path import (
    CachePathError, backup_dir, describe, exec_problem, init_mount, resolve)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_kinds import claims_of

SHARED_KINDS = frozenset(('persistentVolumeClaim', 'nfs', 'cephfs', 'glusterfs', 'azureFile', 'cinder', 'iscsi',
                          'rbd', 'fc', 'portworxVolume', 'quobyte', 'storageos', 'flocker'))
POD_LIFETIME_KINDS = frozenset(('emptyDir', 'ephemeral'))
METHODS = ('exec', 'init_container', 'velero_hook')


def _first_pod_per_node(pods: list) -> list:
    chosen = {}
    for pod in pods:
        chosen.setdefault(pod.get('spec', {}).get('nodeName') or '', pod['metadata']['name'])
    return list(chosen.values())


def _strategy(resolved: dict, names: list, pods: list) -> tuple:
    """(strategy, inspect, purge, reason) from the kind of the volume that holds the cache."""
    kind, volume, location = resolved['kind'], resolved['volume'], resolved['location']
    if resolved['mount'] is None:
        return 'restart', names[:1], [], f'{location} is on the container\'s own file system, gone with the pod at the restart'
    if resolved['sub_path_expr']:
        return 'per_pod', names, names, f'volume {volume} is mounted with subPathExpr (a directory per pod, maybe): every pod'
    if kind in POD_LIFETIME_KINDS:
        return 'restart', names[:1], [], f'{kind} volume {volume} is gone with its pod at the restart'
    if kind in SHARED_KINDS:
        return 'shared', names[:1], names[:1], f'{kind} volume {volume} is the same for every replica: one copy'
    if kind == 'volumeClaimTemplate':
        return 'per_pod', names, names, (f'volume {volume} is a volumeClaimTemplates claim, a PersistentVolumeClaim per '
                                         'pod: every pod holds its own copy')
    if kind == 'hostPath':
        per_node = _first_pod_per_node(pods)
        return 'per_node', per_node, per_node, f'hostPath volume {volume}: one copy per node'
    return 'per_pod', names, names, f'{kind} volume {volume}: every pod'


def _pod_spec(workload: dict) -> dict:
    """The pod template's spec, with a StatefulSet's volumeClaimTemplates as the volumes its pods get (each pod its own
    PersistentVolumeClaim, which takes the place of a template volume of the same name)."""
    spec = dict(((workload.get('spec') or {}).get('template') or {}).get('spec') or {})
    claims = [(claim.get('metadata') or {}).get('name') for claim in claims_of(workload, 'StatefulSet')]
    if claims:
        spec['volumes'] = ([{'name': name, 'volumeClaimTemplate': {}} for name in claims]
                           + [volume for volume in spec.get('volumes') or [] if volume.get('name') not in claims])
    return spec


def cache_reach(workload: dict, pods: list, cache_path: str, container_name: str, method: str = 'exec',
                pod_backup_dir: str = '', mode: str = 'auto', kind: str = 'Deployment') -> dict:
    """{strategy, volume, kind, inspect, purge, own_copies, reason, location, path_in_volume, where, init, backup_dir,
    problem}: the pod names to read the cache in and to purge it in, the path the container sees (location), the init
    container's volume mount and environment (init, for init_container), the backup directory inside the purging
    container (backup_dir), and `problem`: none, or the one line that stops the run before its first change.
    `own_copies`: each pod in `purge` holds a copy no other pod reaches (a claim of its own, a volume that lives with
    the pod, one pod per node of a hostPath), so that the pods may be purged at the same time; otherwise (a volume
    the pods share, a kind not known to be per pod) one after the other, or two purges would race on one file.

    mode every_pod (vllm_dr_k8s_cache_reach) reads every pod's copy, and purges in every pod unless the cache is on
    the container's own file system (the restart purges it there); auto decides from the volume."""
    spec = _pod_spec(workload)
    names = [pod['metadata']['name'] for pod in pods]
    owner = '%s %s' % (kind, workload.get('metadata', {}).get('name', '?'))
    decided = {'strategy': 'unresolved', 'volume': None, 'kind': None, 'inspect': [], 'purge': [], 'own_copies': False,
               'reason': '', 'location': None, 'path_in_volume': None, 'where': '', 'init': None, 'backup_dir': None,
               'problem': None}
    if method not in METHODS:
        decided['problem'] = f'vllm_dr_k8s_purge_method {method} is not one of: {", ".join(METHODS)}'
        return decided
    try:
        resolved = resolve(spec, container_name, cache_path, owner)
    except CachePathError as exc:
        decided.update(reason=str(exc), problem=str(exc))
        return decided
    strategy, inspect, purge, reason = _strategy(resolved, names, pods)
    dies_with_pod = strategy == 'restart'
    per_node = strategy == 'per_node' and mode != 'every_pod'
    own_copies = dies_with_pod or resolved['kind'] == 'volumeClaimTemplate' or per_node
    if mode == 'every_pod':
        inspect, purge = names, (names if resolved['volume'] else [])
        strategy, reason = 'every_pod', 'vllm_dr_k8s_cache_reach is every_pod'
    decided.update({'strategy': strategy, 'volume': resolved['volume'], 'kind': resolved['kind'], 'inspect': inspect,
                    'purge': purge, 'own_copies': own_copies, 'reason': reason, 'location': resolved['location'],
                    'path_in_volume': resolved['path_in_volume'], 'where': describe(resolved)})
    try:
        if method == 'init_container':
            decided['init'] = init_mount(resolved, spec)
            decided['backup_dir'] = backup_dir(resolved, spec, pod_backup_dir, mount=decided['init']['mount'])
        elif resolved['mount'] is not None and not (dies_with_pod and mode != 'every_pod' and method == 'exec'):
            # the restart alone purges a cache that dies with its pod: exec reaches nothing inside the container then,
            # deletes nothing there, and needs no backup directory (Velero's restore hook still keeps its backups)
            problem = exec_problem(resolved) if not dies_with_pod else None
            if problem:
                raise CachePathError(problem)
            decided['backup_dir'] = backup_dir(resolved, spec, pod_backup_dir)
    except CachePathError as exc:
        decided['problem'] = str(exc)
    return decided
