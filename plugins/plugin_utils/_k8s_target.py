# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Kubernetes target a run acts on, from the API server's raw reads: the one model the roles hand them to.

The roles read the workload, the objects between it and its pods (a Deployment's ReplicaSets) and the pods, and hand
them here as kubernetes.core.k8s_info returned them; they decide nothing themselves. The answer is:
- the workload and its pods: the pods it owns through the owner chain (matched by uid, never by the selector alone),
  the running ones by name;
- the rollout state: whether the rollout is finished, what the latest read of the workload says while a wait runs on
  it, and why it is not finished, in words;
- the cache reach (module_utils/_cache_path.py resolves the path against workingDir and the mount's subPath,
  plugin_utils/_cache_reach.py decides which pods hold a copy), when the cache is asked for;
- the preconditions of a change of the workload, each one line the run stops on before its first change.

Each workload kind is one function of KINDS, keyed by the kind the API server names; it knows how its kind owns its
pods and when its rollout is finished. A kind not in KINDS is refused in one line naming those that are.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import owner_names
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    config_map_problems, deployment_pods, old_pods, restart_room, rollout_complete, rollout_status, running_pods)


def _meta(obj: dict) -> dict:
    return (obj or {}).get('metadata') or {}


def deployment_owners(owners: list, pods: list) -> list:
    """The names of the Deployments that own the pods, through their ReplicaSets (`owners`)."""
    replicasets = owner_names(pods, 'ReplicaSet')
    return owner_names([rs for rs in owners if _meta(rs).get('name') in replicasets], 'Deployment')


def deployment(workload: dict, owners: list, pods: list, namespace: str) -> dict:
    """A Deployment: its pods through its ReplicaSets, its rollout finished as `kubectl rollout status` judges it
    (the latest spec observed, every wanted replica updated and available, no older one running), and its own
    preconditions of a restart (not paused, room in the namespace's quotas for the surge)."""
    name = _meta(workload).get('name')
    paused = bool((workload.get('spec') or {}).get('paused'))
    restart = []
    if paused:
        restart.append(f'Deployment {name} in namespace {namespace} is paused, so its restart would never roll out; '
                       f'resume it (kubectl -n {namespace} rollout resume deployment/{name}), then re-run')
    return {'pods': deployment_pods(pods, owners, workload), 'old_pods': old_pods(pods, owners, workload),
            'complete': rollout_complete(workload), 'status': rollout_status(workload), 'paused': paused,
            'restart_problems': restart}


# kind -> (the workload's facts: (workload, owners, pods, namespace) -> dict; the names of the workloads of the kind that
# own the pods: (owners, pods) -> list)
KINDS = {'Deployment': (deployment, deployment_owners)}


def _workload(read) -> tuple[str, dict | None]:
    """('found', the object), ('gone', None) or ('error', None) from what the workload's read returned: the
    registered result of kubernetes.core.k8s_info, or the object itself."""
    if isinstance(read, dict) and 'resources' not in read and 'metadata' in read:
        return 'found', read
    if not isinstance(read, dict) or read.get('failed') or 'resources' not in read:
        return 'error', None
    resources = read.get('resources') or []
    return ('found', resources[0]) if resources else ('gone', None)


def k8s_target(read, owners: list = (), pods: list = (), *, namespace: str, kind: str = 'Deployment',
               cache_path: str | None = None, container: str = 'vllm', method: str = 'exec',
               pod_backup_dir: str = '', cache_reach_mode: str = 'auto', expected_pods: list | None = None,
               quotas: list = (), limit_ranges: list = ()) -> dict:
    """The target, from the workload's read (`read`: k8s_info's registered result, or the object), the objects between
    it and its pods (`owners`) and the pods the selector or the namespace lists (`pods`).

    Returns {kind, name, namespace, found, selected, workloads, pods, pod_uids, rollout, cache_reach, preconditions}:
    - found: 'found', 'gone' (the read answered with nothing) or 'error' (the read failed, or nothing was read:
      `read` none finds the workload's name in `workloads`);
    - selected: how many of `pods` there are, and the names of the running ones (the selector's, before the owner
      chain narrows them); workloads: the names of the workloads of `kind` that own the running ones;
    - pods: the names of the workload's own running pods (phase Running, not being deleted), in name order;
      pod_uids: name -> uid of each;
    - rollout: finished (complete, and no pod of an older revision among `pods`, terminating ones included),
      complete (the workload's status alone), old_pods (their names), paused, unfinished (a rollout to wait for
      before the pods are taken: not paused, and not complete or one of the running pods of an older revision),
      wait ('complete', 'progressing', 'gone' or 'error': what this read of the workload tells a rollout wait),
      status (why not finished, in words);
    - cache_reach: where the token cache is and which pods hold a copy (None unless cache_path is given);
    - preconditions: every reason a change of the workload cannot run to its end, one line each.
    """
    found, workload = _workload(read)
    selected = running_pods(pods)
    decided = {'kind': kind, 'name': None, 'namespace': namespace, 'found': found,
               'selected': {'count': len(pods or []), 'running': [_meta(pod).get('name') for pod in selected]},
               'workloads': [], 'pods': [], 'pod_uids': {},
               'rollout': {'finished': False, 'complete': False, 'old_pods': [], 'paused': False, 'unfinished': False,
                           'wait': found if found != 'found' else 'progressing', 'status': ''},
               'cache_reach': None, 'preconditions': []}
    if kind not in KINDS:
        decided['preconditions'].append(f'workload kind {kind} is not supported; supported: {", ".join(sorted(KINDS))}')
        return decided
    decided['workloads'] = KINDS[kind][1](list(owners or []), selected)
    if workload is None:
        decided['preconditions'].append(f'the {kind} is gone from namespace {namespace}; re-run to find the workload '
                                        'again')
        return decided
    name = _meta(workload).get('name')
    facts = KINDS[kind][0](workload, list(owners or []), list(pods or []), namespace)
    running = running_pods(facts['pods'])
    finished = facts['complete'] and not facts['old_pods']
    decided.update(name=name, pods=[_meta(pod).get('name') for pod in running],
                   pod_uids={_meta(pod).get('name'): _meta(pod).get('uid') for pod in running})
    old_running = [pod for pod in facts['old_pods'] if pod in decided['pod_uids']]
    decided['rollout'] = {'finished': finished, 'complete': facts['complete'], 'old_pods': facts['old_pods'],
                          'paused': facts['paused'],
                          'unfinished': not facts['paused'] and (not facts['complete'] or bool(old_running)),
                          'wait': 'complete' if facts['complete'] else 'progressing', 'status': facts['status']}
    if cache_path is not None:
        decided['cache_reach'] = cache_reach(workload, running, cache_path, container, method=method,
                                             pod_backup_dir=pod_backup_dir or '', mode=cache_reach_mode)
    problems = list(facts['restart_problems'])
    where = f'{kind} {name} in namespace {namespace}'
    if not running:
        problems.append(f'{where} has no running pod; the cache cannot be reached, start the workload, then re-run')
    gone = [pod for pod in expected_pods or [] if pod not in decided['pods']]
    if running and gone:
        problems.append(f'pod{"s" if len(gone) > 1 else ""} {", ".join(gone)} of {kind} {name} '
                        f'{"are" if len(gone) > 1 else "is"} no longer running (replaced since the diagnosis); '
                        're-run to reach the pods running now')
    problems.extend(restart_room(workload, quotas, limit_ranges, namespace=namespace))
    decided['preconditions'] = problems
    return decided


def purge_preconditions(workload: dict | None, pods: list, owners: list, config_maps: list, *, namespace: str,
                        config_map: str, config_key: str, edit_path: str, edit_value, expected_pods: list = (),
                        quotas: list = (), limit_ranges: list = (), kind: str = 'Deployment') -> list:
    """Every reason the purge cannot run to its end, one line each, judged before it changes anything: the
    configuration edit's (the ConfigMap) and the target's own (k8s_target's preconditions). `workload` is the named
    workload (None when gone), `pods`/`owners` everything the selector and the namespace list, `expected_pods` the
    pods the diagnosis reached (the purge runs in them)."""
    problems = config_map_problems(config_maps, namespace=namespace, config_map=config_map, config_key=config_key,
                                   edit_path=edit_path, edit_value=edit_value)
    target = k8s_target({'resources': [workload] if workload else []}, owners, pods, namespace=namespace, kind=kind,
                        expected_pods=list(expected_pods or []), quotas=quotas, limit_ranges=limit_ranges)
    return problems + target['preconditions']
