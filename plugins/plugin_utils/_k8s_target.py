# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Kubernetes target a run acts on, from the API server's raw reads: the one model the roles hand them to.

The roles read the workload, the objects between it and its pods (a Deployment's ReplicaSets) and the pods, and hand
them here as kubernetes.core.k8s_info returned them; they decide nothing themselves. The answer is:
- the workload's kind, when the run does not name it (vllm_dr_k8s_kind auto): read from the running pods' owner chain;
  a kind not supported (a DaemonSet, a Job, a bare pod) and a workload an operator's resource controls (KServe's
  InferenceService) are refused in one line naming those supported;
- the workload and its pods: the pods it owns through the owner chain (matched by uid, never by the selector alone),
  the running ones by name;
- the rollout state: whether the rollout is finished, what the latest read of the workload says while a wait runs on
  it, and why it is not finished, in words;
- the cache reach (module_utils/_cache_path.py resolves the path against workingDir and the mount's subPath,
  plugin_utils/_cache_reach.py decides which pods hold a copy), when the cache is asked for;
- the preconditions of a change of the workload, each one line the run stops on before its first change.

How a kind plugs in: one entry of KINDS, keyed by the kind the API server names, a Kind of
- facts(workload, owners, pods, *, namespace, quotas, limit_ranges) -> dict with pods (the workload's own pod objects,
  running or not, in the order the purge visits them), old_pods (the names of those of an older revision that its
  rollout still has to replace), complete and status (its rollout as `kubectl rollout status` judges it, and why not in
  words), paused (a restart would never roll out), restart_problems (its own preconditions of a restart, one line
  each: a Deployment's quota room for the surge) and restart (how its restart rolls: {strategy, partition, stay_old},
  stay_old naming the pods a restart leaves at their revision, or none);
- owners(owners, pods) -> the names of the workloads of the kind that own the running pods through `owners`;
- api_version and resource (plural), for the reads, the patch and the permissions asked;
- pod_controller: the kind of the pods' own controller (ReplicaSet for a Deployment), which names the kind from the
  pods when the run does not (pod_label, when set, names it first: a label the kind puts on its pods);
- reach, when the kind's pods are not all made from one pod template (a LeaderWorkerSet's leaders and workers): its
  own cache reach, (workload, running pods, cache_path, container, *, method, pod_backup_dir, mode, kind) -> the
  answer of _cache_reach.cache_reach, which the other kinds use;
- between: the kind, API version and resource (plural) of the objects between the workload and its pods (a
  Deployment's ReplicaSets), or none when the workload controls its pods itself (a StatefulSet); target_reads names
  them to the roles, which read them in the same call as the pods (the owners this model takes), and kind_access asks
  for their list;
plus one restart task file roles/purge/tasks/platform/kubernetes_restart_<kind in lower case>.yml.

When the roles read the pods: once at each moment the target may have changed since the last read, each read handed
here whole.
- The diagnosis (k8s_target's discover): the target and where the cache is.
- The purge, right before its first change (purge's preconditions): the same pods still running, the cache's place
  for the purge method; then, only when the purge did not reach a pod, once more to say whether it was replaced.
- The rollout wait (k8s_target's rollout_wait): with the workload and what lies between it and its pods, in one call,
  until the rollout is finished (rollout.finished: the workload's status says complete and no pod of an older
  revision is left); at its deadline, while the workload's status lags what its pods show, a few seconds more.
- A StatefulSet with updateStrategy OnDelete (its restart handler): each pod deleted, until its replacement is ready,
  as nothing else replaces it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import cache_reach
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_lws import (
    NAME_LABEL, leaderworkerset, lws_cache_reach, lws_owners)
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import owner_names
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_statefulset import statefulset, statefulset_owners
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import (
    config_map_problems, deployment_pods, old_pods, restart_room, rollout_complete, rollout_status, running_pods)


def _meta(obj: dict) -> dict:
    return (obj or {}).get('metadata') or {}


def controller(obj: dict) -> dict | None:
    """The ownerReference of `obj` marked controller, or none."""
    return next((owner for owner in _meta(obj).get('ownerReferences') or [] if owner.get('controller')), None)


def deployment_owners(owners: list, pods: list) -> list:
    """The names of the Deployments that own the pods, through their ReplicaSets (`owners`)."""
    replicasets = owner_names(pods, 'ReplicaSet')
    return owner_names([rs for rs in owners if _meta(rs).get('name') in replicasets], 'Deployment')


def deployment(workload: dict, owners: list, pods: list, *, namespace: str, quotas: list = (),
               limit_ranges: list = ()) -> dict:
    """A Deployment: its pods through its ReplicaSets, its rollout finished as `kubectl rollout status` judges it
    (the latest spec observed, every wanted replica updated and available, no older one running), and its own
    preconditions of a restart (not paused, room in the namespace's quotas for the surge)."""
    name = _meta(workload).get('name')
    paused = bool((workload.get('spec') or {}).get('paused'))
    restart = []
    if paused:
        restart.append(f'Deployment {name} in namespace {namespace} is paused, so its restart would never roll out; '
                       f'resume it (kubectl -n {namespace} rollout resume deployment/{name}), then re-run')
    restart.extend(restart_room(workload, quotas, limit_ranges, namespace=namespace))
    strategy = ((workload.get('spec') or {}).get('strategy') or {}).get('type') or 'RollingUpdate'
    return {'pods': deployment_pods(pods, owners, workload), 'old_pods': old_pods(pods, owners, workload),
            'complete': rollout_complete(workload), 'status': rollout_status(workload), 'paused': paused,
            'restart_problems': restart, 'restart': {'strategy': strategy, 'partition': None, 'stay_old': []}}


# how a restart rolls, as a kind's facts say it: strategy, partition, stay_old, and for a wait on single pods the
# update revision, the pods running and ready at it, and whether the controller observed the latest spec
RESTART = {'strategy': None, 'partition': None, 'stay_old': [], 'update_revision': None, 'updated': [],
           'observed': False}


class Between(NamedTuple):
    """The objects between a workload and its pods, read whole in the namespace."""
    kind: str
    api_version: str
    resource: str


class Kind(NamedTuple):
    facts: Callable
    owners: Callable
    api_version: str
    resource: str
    pod_controller: str
    pod_label: str | None = None
    reach: Callable | None = None
    # the objects between the workload and its pods (the owners the model matches by uid); none when the workload
    # controls its pods itself
    between: Between | None = None


KINDS = {
    'Deployment': Kind(deployment, deployment_owners, 'apps/v1', 'deployments', 'ReplicaSet',
                       between=Between('ReplicaSet', 'apps/v1', 'replicasets')),
    'LeaderWorkerSet': Kind(leaderworkerset, lws_owners, 'leaderworkerset.x-k8s.io/v1', 'leaderworkersets',
                            'StatefulSet', NAME_LABEL, lws_cache_reach,
                            between=Between('StatefulSet', 'apps/v1', 'statefulsets')),
    'StatefulSet': Kind(statefulset, statefulset_owners, 'apps/v1', 'statefulsets', 'StatefulSet'),
}


def _supported() -> str:
    return ', '.join(sorted(KINDS))


def _group(api_version: str) -> str:
    return api_version.rpartition('/')[0]


def target_reads(kind: str | None, *, selector: str | None = None, name: str | None = None) -> list:
    """What one read of the target takes, as module vllm_k8s_read takes its reads, in this order: the objects between
    the workload and its pods (key owners: a Deployment's ReplicaSets; none for a StatefulSet), the pods (key pods,
    when `selector` is given), then the workload itself (key workload, when its `name` is given). The workload comes
    last: read after its pods, its status can only be ahead of what they show, so a status behind them (lagging) is
    its controller's, never the read's. A kind not supported (or none yet) reads only the pods."""
    spec = KINDS.get(kind)
    reads = [{'key': 'owners', 'kind': spec.between.kind, 'api_version': spec.between.api_version}] \
        if spec and spec.between else []
    if selector is not None:
        reads.append({'key': 'pods', 'kind': 'Pod', 'label_selectors': [selector]})
    if spec and name:
        reads.append({'key': 'workload', 'kind': kind, 'api_version': spec.api_version, 'name': name})
    return reads


def kind_access(kind: str | None, restart: dict | None = None) -> dict:
    """{read, change}: what the kind's reads and changes ask of the API server beyond what every run asks (the pods,
    the ConfigMap, the workload by name), as module vllm_k8s_read takes its permissions. read, to find the workload:
    list what lies between it and its pods, get the workload (whose name the pods' owners may give). change, for the
    purge's preconditions and the restart: list what lies between; with `restart` (the target's restart) of strategy
    OnDelete, delete pods (the restart deletes them one by one). Both empty for a kind not supported."""
    spec = KINDS.get(kind)
    if spec is None:
        return {'read': [], 'change': []}
    between = [{'verb': 'list', 'resource': spec.between.resource, 'group': _group(spec.between.api_version)}] \
        if spec.between else []
    deletes = [{'verb': 'delete', 'resource': 'pods'}] if (restart or {}).get('strategy') == 'OnDelete' else []
    return {'read': between + [{'verb': 'get', 'resource': spec.resource, 'group': _group(spec.api_version)}],
            'change': between + deletes}


def pod_kind(pod: dict) -> tuple[str | None, str]:
    """(the workload kind that runs the pod, as its labels and controller name it, or none; what runs it, in words)."""
    labels = _meta(pod).get('labels') or {}
    for kind, spec in KINDS.items():
        if spec.pod_label and spec.pod_label in labels:
            return kind, f'{kind} {labels[spec.pod_label]}'
    owner = controller(pod)
    if owner is None:
        return None, 'no controller (a bare pod)'
    for kind, spec in KINDS.items():
        if not spec.pod_label and owner.get('kind') == spec.pod_controller:
            return kind, f"{owner.get('kind')} {owner.get('name')}"
    return None, f"{owner.get('kind')} {owner.get('name')}"


def kind_of(pods: list, *, namespace: str) -> dict:
    """{kind, problem}: the workload kind of the running pods, read from their owner chain, or the one line why none
    is (a kind not supported, or pods of several kinds)."""
    running = running_pods(pods)
    kinds, unsupported = {}, []
    for pod in running:
        kind, what = pod_kind(pod)
        if kind is None:
            unsupported.append(f'pod {_meta(pod).get("name")} is run by {what}')
        else:
            kinds.setdefault(kind, []).append(_meta(pod).get('name'))
    if unsupported:
        return {'kind': None, 'problem': f'{unsupported[0]} in namespace {namespace}, not a workload the runbook '
                                         f'restarts; supported kinds: {_supported()}'}
    if len(kinds) > 1:
        named = '; '.join(f'{kind}: {", ".join(names)}' for kind, names in sorted(kinds.items()))
        return {'kind': None, 'problem': f'the running pods in namespace {namespace} belong to workloads of several '
                                         f'kinds ({named}); narrow vllm_dr_k8s_selector or set vllm_dr_k8s_kind'}
    return {'kind': next(iter(kinds), None), 'problem': None}


def managed_problem(workload: dict, kind: str, namespace: str) -> str | None:
    """The one line that refuses a workload whose controller is another resource (an operator's, such as KServe's
    InferenceService): the operator owns its pod template and would undo a change of it."""
    owner = controller(workload)
    if owner is None:
        return None
    return (f"{kind} {_meta(workload).get('name')} in namespace {namespace} is controlled by {owner.get('kind')} "
            f"{owner.get('name')} ({owner.get('apiVersion')}), which would undo a change of it; the runbook restarts "
            f'workloads no other resource controls, of kinds: {_supported()}')


def _reads(read, owners, pods) -> tuple:
    """(the workload's read, owners, pods), from `read` as the roles hand it: the registered result of module
    vllm_k8s_read whose reads target_reads named (its resources keyed workload, owners and pods; a failed one, its
    error alone), or the workload's read with `owners` and `pods` apart."""
    if isinstance(read, dict) and isinstance(read.get('resources'), dict):
        resources = read['resources']
        return ({'resources': resources['workload']} if 'workload' in resources else None,
                resources.get('owners', owners), resources.get('pods', pods))
    return read, owners, pods


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
    it and its pods (`owners`) and the pods the selector or the namespace lists (`pods`); or from `read` alone, the
    registered result of module vllm_k8s_read taking target_reads (a failed one finds the workload's read an error).

    Returns {kind, api_version, resource, group, name, namespace, found, selected, workloads, refused, pods, pod_uids,
    stable_pod_names, rollout, restart, cache_reach, preconditions}:
    - kind: `kind`, or with `kind` auto the kind the running pods' owner chain names (none when it names none);
      api_version, resource (plural) and group (the API group, '' for the core one) of that kind, none when it is
      not supported;
    - found: 'found', 'gone' (the read answered with nothing) or 'error' (the read failed, or nothing was read:
      `read` none finds the workload's name in `workloads`);
    - selected: how many of `pods` there are, and the names of the running ones (the selector's, before the owner
      chain narrows them); workloads: the names of the workloads of `kind` that own the running ones;
    - refused: none, or the one line why the runbook does not act on this workload (its kind is not supported, or
      another resource controls it); it is among the preconditions too;
    - pods: the names of the workload's own running pods (phase Running, not being deleted), in the order the kind
      visits them (name order; ordinal order for a StatefulSet); pod_uids: name -> uid of each; stable_pod_names:
      whether a pod replaced comes back under its name (a StatefulSet's, a LeaderWorkerSet's), so that only its uid
      tells the replacement;
    - rollout: finished (complete, and no pod of an older revision among `pods`, terminating ones included),
      complete (the workload's status alone), old_pods (their names), paused, unfinished (a rollout to wait for
      before the pods are taken: not paused, and not complete or one of the running pods of an older revision),
      wait ('complete', 'progressing', 'gone' or 'error': what this read of the workload tells a rollout wait),
      status (why not finished, in words), lagging (the workload's status counts fewer of its pods ready or updated
      than `pods` show: its controller has not judged them since they changed; a LeaderWorkerSet's);
    - restart: how the kind's restart rolls: strategy, partition (a StatefulSet's, or none), stay_old (the pods it
      leaves at their revision);
    - cache_reach: where the token cache is and which pods hold a copy (None unless cache_path is given);
    - preconditions: every reason a change of the workload cannot run to its end, one line each.
    """
    read, owners, pods = _reads(read, owners, pods)
    found, workload = _workload(read)
    selected = running_pods(pods)
    refused = None
    if kind == 'auto':
        detected = kind_of(pods, namespace=namespace)
        kind, refused = detected['kind'], detected['problem']
    spec = KINDS.get(kind)
    decided = {'kind': kind, 'api_version': spec.api_version if spec else None,
               'resource': spec.resource if spec else None,
               'group': _group(spec.api_version) if spec else None, 'name': None, 'namespace': namespace,
               'found': found,
               'selected': {'count': len(pods or []), 'running': [_meta(pod).get('name') for pod in selected]},
               'workloads': [], 'refused': refused, 'pods': [], 'pod_uids': {},
               'stable_pod_names': bool(spec) and spec.pod_controller == 'StatefulSet',
               'rollout': {'finished': False, 'complete': False, 'old_pods': [], 'paused': False, 'unfinished': False,
                           'wait': found if found != 'found' else 'progressing', 'status': '', 'lagging': False},
               'restart': dict(RESTART),
               'cache_reach': None, 'preconditions': []}
    if refused is None and kind is not None and spec is None:
        decided['refused'] = f'workload kind {kind} is not supported; supported: {_supported()}'
    if decided['refused'] or spec is None:
        decided['preconditions'] = [decided['refused']] if decided['refused'] else []
        return decided
    decided['workloads'] = spec.owners(list(owners or []), selected)
    if workload is None:
        decided['preconditions'].append(f'the {kind} is gone from namespace {namespace}; re-run to find the workload '
                                        'again')
        return decided
    name = _meta(workload).get('name')
    decided['refused'] = managed_problem(workload, kind, namespace)
    facts = spec.facts(workload, list(owners or []), list(pods or []), namespace=namespace, quotas=quotas,
                       limit_ranges=limit_ranges)
    running = running_pods(facts['pods'])
    finished = facts['complete'] and not facts['old_pods']
    decided.update(name=name, pods=[_meta(pod).get('name') for pod in running],
                   pod_uids={_meta(pod).get('name'): _meta(pod).get('uid') for pod in running},
                   restart=dict(RESTART, **facts['restart']))
    old_running = [pod for pod in facts['old_pods'] if pod in decided['pod_uids']]
    decided['rollout'] = {'finished': finished, 'complete': facts['complete'], 'old_pods': facts['old_pods'],
                          'paused': facts['paused'],
                          'unfinished': not facts['paused'] and (not facts['complete'] or bool(old_running)),
                          'wait': 'complete' if facts['complete'] else 'progressing', 'status': facts['status'],
                          'lagging': facts.get('lagging', False)}
    if cache_path is not None:
        decided['cache_reach'] = (spec.reach or cache_reach)(workload, running, cache_path, container, method=method,
                                                             pod_backup_dir=pod_backup_dir or '',
                                                             mode=cache_reach_mode, kind=kind)
    problems = [decided['refused']] if decided['refused'] else []
    problems.extend(facts['restart_problems'])
    where = f'{kind} {name} in namespace {namespace}'
    if not running:
        problems.append(f'{where} has no running pod; the cache cannot be reached, start the workload, then re-run')
    gone = [pod for pod in expected_pods or [] if pod not in decided['pods']]
    if running and gone:
        problems.append(f'pod{"s" if len(gone) > 1 else ""} {", ".join(gone)} of {kind} {name} '
                        f'{"are" if len(gone) > 1 else "is"} no longer running (replaced since the diagnosis); '
                        're-run to reach the pods running now')
    decided['preconditions'] = problems
    return decided


def purge_preconditions(target: dict, config_maps: list, *, namespace: str, config_map: str, config_key: str,
                        edit_path: str, edit_value) -> list:
    """Every reason the purge cannot run to its end, one line each, judged before it changes anything: the
    configuration edit's (`config_maps`, what reading the ConfigMap by name returned), then the target's own
    (`target`, the k8s_target model of the reads the purge took, with the pods the diagnosis reached as its
    expected_pods: the purge runs in them)."""
    return config_map_problems(config_maps, namespace=namespace, config_map=config_map, config_key=config_key,
                               edit_path=edit_path, edit_value=edit_value) + list(target['preconditions'])
