# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Deployment kind's rules, which the target model (_k8s_target.py, the one place the roles ask) composes: when its
rollout is complete (as `kubectl rollout status` judges it) and what to say when not, which pods are its own (by the
owner chain), which of them are of an older ReplicaSet, and the room its restart needs; the ConfigMap edit's own
preconditions, the purge's failures per pod, and an API error in words."""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._yaml_edit import YamlEditError, set_key

REVISION = 'deployment.kubernetes.io/revision'


def _counts(deployment: dict) -> dict:
    spec = deployment.get('spec') or {}
    status = deployment.get('status') or {}
    return {
        'generation': (deployment.get('metadata') or {}).get('generation', 0),
        'observed': status.get('observedGeneration', 0),
        'wanted': spec.get('replicas', 1),
        'replicas': status.get('replicas', 0),
        'updated': status.get('updatedReplicas', 0),
        'available': status.get('availableReplicas', 0),
    }


def rollout_complete(deployment: dict) -> bool:
    """The controller saw the latest spec, every wanted replica is updated and available, and no older one runs."""
    c = _counts(deployment)
    return (c['observed'] >= c['generation'] and c['updated'] == c['wanted']
            and c['replicas'] == c['updated'] and c['available'] == c['updated'])


def rollout_status(deployment: dict) -> str:
    c = _counts(deployment)
    parts = [f"updated {c['updated']}/{c['wanted']}", f"available {c['available']}/{c['wanted']}",
             f"replicas {c['replicas']} (old ones included)"]
    if c['observed'] < c['generation']:
        parts.append(f"generation {c['generation']} not yet observed (controller at {c['observed']})")
    conditions = (deployment.get('status') or {}).get('conditions') or []
    described = [f"{cond.get('type')}={cond.get('status')} ({cond.get('reason', '')}: {cond.get('message', '')})"
                 for cond in conditions]
    return ', '.join(parts) + '; conditions: ' + ('; '.join(described) if described else 'none reported')


def new_replicaset_hash(replicasets: list, deployment: dict) -> str | None:
    """The pod-template-hash of the Deployment's current ReplicaSet (the one at the Deployment's revision)."""
    meta = deployment.get('metadata') or {}
    revision = (meta.get('annotations') or {}).get(REVISION)
    for replicaset in replicasets or []:
        rs_meta = replicaset.get('metadata') or {}
        owners = [owner for owner in rs_meta.get('ownerReferences') or []
                  if owner.get('kind') == 'Deployment' and owner.get('uid') == meta.get('uid')]
        if owners and (rs_meta.get('annotations') or {}).get(REVISION) == revision:
            return (rs_meta.get('labels') or {}).get('pod-template-hash')
    return None


def _meta(obj: dict) -> dict:
    return (obj or {}).get('metadata') or {}


def _owned_by(obj: dict, kind: str, uids: set) -> bool:
    return any(owner.get('kind') == kind and owner.get('uid') in uids for owner in _meta(obj).get('ownerReferences') or [])


def deployment_pods(pods: list, replicasets: list, deployment: dict) -> list:
    """The pods of this Deployment: owned by one of its ReplicaSets (matched by uid), not merely matching its selector.

    Two Deployments may share a selector (a canary); only the ownership chain tells their pods apart.
    They come in name order, whatever order the API server listed them in: the purge visits them in that order, so
    what a run did first is the same from one run to the next.
    """
    uid = _meta(deployment).get('uid')
    owned = {_meta(rs).get('uid') for rs in replicasets or [] if _owned_by(rs, 'Deployment', {uid})}
    return sorted((pod for pod in pods or [] if _owned_by(pod, 'ReplicaSet', owned)),
                  key=lambda pod: _meta(pod).get('name') or '')


def old_pods(pods: list, replicasets: list, deployment: dict) -> list:
    """The names of the Deployment's pods that are not of its current ReplicaSet (a rollout has yet to replace them)."""
    current = new_replicaset_hash(replicasets, deployment)
    return [_meta(pod).get('name') for pod in deployment_pods(pods, replicasets, deployment)
            if (_meta(pod).get('labels') or {}).get('pod-template-hash') != current]


def running_pods(pods: list) -> list:
    """Pods in phase Running and not being deleted."""
    return [pod for pod in pods or []
            if (pod.get('status') or {}).get('phase') == 'Running' and not _meta(pod).get('deletionTimestamp')]


def config_map_problems(config_maps: list, *, namespace: str, config_map: str, config_key: str, edit_path: str,
                        edit_value) -> list:
    """Why the configuration edit cannot run, one line each: `config_maps` is what reading the ConfigMap by name
    returned; the document under `config_key` must be there, parseable, editable, and the ConfigMap mutable when the
    edit changes it."""
    problems = []
    where = f'in namespace {namespace}'
    if not config_maps:
        problems.append(f'ConfigMap {config_map} not found {where}; set vllm_dr_k8s_config_map to the ConfigMap '
                        'that carries vllm.yaml')
    else:
        data = config_maps[0].get('data') or {}
        if config_key not in data:
            problems.append(f'ConfigMap {config_map} {where} has no key {config_key} (keys: '
                            f'{", ".join(sorted(data)) or "none"}); set vllm_dr_k8s_config_key to the key that holds '
                            'vllm.yaml')
        else:
            try:
                edit = set_key(data[config_key], edit_path, edit_value)
            except YamlEditError as exc:
                problems.append(f'{config_key} in ConfigMap {config_map} {where}: {exc}')
            else:
                if edit['changed'] and config_maps[0].get('immutable'):
                    problems.append(f'ConfigMap {config_map} {where} is immutable, so {edit_path} cannot be set; '
                                    f'recreate it with {edit_path}: {str(edit_value).lower()} (or without '
                                    'immutable: true), then re-run')
    return problems


_SUFFIXES = {'n': 1e-9, 'u': 1e-6, 'm': 1e-3, '': 1, 'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12, 'P': 1e15, 'E': 1e18,
             'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40, 'Pi': 2 ** 50, 'Ei': 2 ** 60}
# what one pod of the Deployment counts against each quota resource, from its containers' requests and limits
_POD_RESOURCES = {'pods': None, 'count/pods': None,
                  'cpu': ('requests', 'cpu'), 'requests.cpu': ('requests', 'cpu'), 'limits.cpu': ('limits', 'cpu'),
                  'memory': ('requests', 'memory'), 'requests.memory': ('requests', 'memory'),
                  'limits.memory': ('limits', 'memory'),
                  'ephemeral-storage': ('requests', 'ephemeral-storage'),
                  'requests.ephemeral-storage': ('requests', 'ephemeral-storage'),
                  'limits.ephemeral-storage': ('limits', 'ephemeral-storage')}


def quantity(value) -> float:
    """A Kubernetes quantity (100m, 1Gi, 2, 1e3) as a number."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            return float(text[:-len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def _scaled(value, replicas: int, round_up: bool) -> int:
    """maxSurge / maxUnavailable: an integer, or a percentage of the replicas (surge rounds up, unavailable down)."""
    text = str(value)
    if text.endswith('%'):
        exact = replicas * int(text[:-1]) / 100
        return int(-(-exact // 1)) if round_up else int(exact // 1)
    return int(text)


def rollout_surge(deployment: dict) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of the Deployment's restart, in pods (a Recreate strategy surges none)."""
    spec = deployment.get('spec') or {}
    replicas = int(spec.get('replicas', 1))
    strategy = spec.get('strategy') or {}
    if strategy.get('type') == 'Recreate':
        return 0, replicas
    rolling = strategy.get('rollingUpdate') or {}
    return (_scaled(rolling.get('maxSurge', '25%'), replicas, True),
            _scaled(rolling.get('maxUnavailable', '25%'), replicas, False))


def _pod_amount(containers: list, limit_ranges: list, kind: str, resource: str) -> float:
    """What one pod asks of `resource` (requests or limits): each container's own, or the LimitRange's default."""
    defaults = {}
    for limit_range in limit_ranges or []:
        for limit in (limit_range.get('spec') or {}).get('limits') or []:
            if limit.get('type') == 'Container':
                given = limit.get('defaultRequest' if kind == 'requests' else 'default') or {}
                if kind == 'requests' and resource not in given:
                    given = limit.get('default') or {}  # a default limit is the request when none is set
                if resource in given:
                    defaults.setdefault(resource, quantity(given[resource]))
    total = 0.0
    for container in containers:
        own = ((container.get('resources') or {}).get(kind) or {})
        if kind == 'requests' and resource not in own:
            own = ((container.get('resources') or {}).get('limits') or {})
        total += quantity(own[resource]) if resource in own else defaults.get(resource, 0.0)
    return total


def restart_room(deployment: dict, quotas: list, limit_ranges: list, *, namespace: str) -> list:
    """Why the restart could not finish for lack of room, one line per ResourceQuota that has none: the rollout
    creates up to maxSurge new pods before it removes old ones, and each must fit in what the quota has left
    (status.hard minus status.used). A quota with scopes counts only some pods and is not judged. PodDisruptionBudgets
    play no part: a Deployment's rollout scales its ReplicaSets, it evicts nothing; maxUnavailable is its only bound."""
    name = _meta(deployment).get('name')
    surge, unavailable = rollout_surge(deployment)
    if surge == 0:
        return []
    containers = (((deployment.get('spec') or {}).get('template') or {}).get('spec') or {}).get('containers') or []
    problems = []
    for quota in quotas or []:
        spec, status = quota.get('spec') or {}, quota.get('status') or {}
        if spec.get('scopes') or spec.get('scopeSelector'):
            continue
        hard, used = status.get('hard') or {}, status.get('used') or {}
        short = []
        for resource, limit in sorted(hard.items()):
            if resource not in _POD_RESOURCES:
                continue
            counted = _POD_RESOURCES[resource]
            per_pod = 1.0 if counted is None else _pod_amount(containers, limit_ranges, *counted)
            needed, left = surge * per_pod, quantity(limit) - quantity(used.get(resource, 0))
            if per_pod and needed > left + 1e-9:
                short.append(f'{resource}: used {used.get(resource, 0)} of {limit}, the surge needs '
                             f'{_shown(needed, resource)} more')
        if short:
            problems.append(
                f'ResourceQuota {_meta(quota).get("name")} in namespace {namespace} has no room for the {surge} new '
                f'pod{"s" if surge > 1 else ""} the restart of Deployment {name} starts before it stops old ones '
                f'(maxSurge {surge}): {"; ".join(short)}; raise the quota by that much, or set the Deployment\'s '
                f'rollingUpdate to maxSurge: 0 and maxUnavailable: {max(unavailable, 1)}, then re-run')
    return problems


def _shown(amount: float, resource: str) -> str:
    if resource.endswith('cpu'):
        return f'{round(amount * 1000)}m'
    if resource.endswith('memory') or resource.endswith('storage'):
        return f'{round(amount / 2 ** 20)}Mi' if amount >= 2 ** 20 else f'{round(amount)}'
    return str(round(amount))


def _loop_pod(result: dict) -> str:
    """The pod of a purge loop's result: its item is the pod's inventory host, `<target>/<namespace>/<pod>`."""
    return str(result.get('item', '')).rsplit('/', 1)[-1]


def purge_failures(results: list, pods: list, *, deployment: str, namespace: str, backup_dir: str,
                   kind: str = 'Deployment', uids: dict | None = None, fetched: list | None = None) -> list:
    """Why the purge inside the pods did not reach every pod, or did not bring every backup to the controller, one
    line per pod, then what was done: [] when it did.

    `results` are the purge's results per pod (vllm_pod_token_cache's `pods`, each with `item`, the pod's inventory
    host), `pods` the pods of the namespace read after the purge. A pod no longer running (deleted, being deleted or
    replaced while the purge ran) is named as such; any other failure keeps the module's own message. `deployment` is
    the workload's name, `kind` its kind.
    `uids` (name -> uid when the purge began) is given for a kind whose pods keep their names when replaced (a
    StatefulSet's, a LeaderWorkerSet's): a pod purged whose name now runs with another uid, or not at all, was replaced
    during the purge, and whether its replacement started on the purged cache cannot be told.
    `fetched` are the copies of each backup from its pod to `backup_dir` (vllm_pod_token_cache's `copies`; item: the
    pod's result and the backup's path on the pod): a copy that failed names the backup, which stays on the pod's
    volume.
    """
    # no module result from the pod (kubectl exec found no pod) leaves only module_stderr behind
    failed = [result for result in results or []
              if result.get('failed') or result.get('unreachable') or 'module_stderr' in result]
    now = {_meta(pod).get('name'): _meta(pod).get('uid') for pod in running_pods(pods)}
    replaced = [result for result in results or [] if result not in failed and uids and _loop_pod(result) in uids
                and now.get(_loop_pod(result)) != uids[_loop_pod(result)]]
    not_copied = {}
    for fetch in fetched or []:
        if fetch.get('failed') or fetch.get('unreachable'):
            purge, path = (list(fetch.get('item') or []) + [{}, ''])[:2]
            message = (str(fetch.get('msg') or 'no message').splitlines() or [''])[0]
            not_copied.setdefault(_loop_pod(purge if isinstance(purge, dict) else {}), []).append((path, message))
    if not failed and not replaced and not not_copied:
        return []
    lines = []
    for result in replaced:
        pod = _loop_pod(result)
        line = (f'pod {pod} of {kind} {deployment} in namespace {namespace} was replaced during the purge (a new pod '
                'of that name, or none, runs now), so whether the new one started on the purged cache cannot be told')
        if pod in not_copied:
            paths = ', '.join(copy[0] for copy in not_copied[pod])
            line += f"; its backup was not copied and stays on the pod's volume: {paths}"
        lines.append(line)
    for result in failed:
        pod = _loop_pod(result)
        if pod not in now:
            lines.append(f'pod {pod} of {kind} {deployment} in namespace {namespace} went away during the purge '
                         '(deleted or replaced), so its cache was not purged')
        else:
            message = str(result.get('msg') or 'no message').splitlines()[0]
            lines.append(f'purging the token cache in pod {pod} of {kind} {deployment} failed: {message}')
    judged = {_loop_pod(result) for result in failed + replaced}
    for pod, copies in not_copied.items():
        if pod in judged:
            continue
        paths = ', '.join(copy[0] for copy in copies)
        if pod not in now:
            lines.append(f'pod {pod} of {kind} {deployment} in namespace {namespace} went away after its cache was '
                         f"purged, before its backup was copied: the backup stays on the pod's volume: {paths}")
        else:
            lines.append(f'copying the backup of pod {pod} of {kind} {deployment} to {backup_dir} failed: '
                         f"{copies[0][1]}; the backup stays on the pod's volume: {paths}")
    purged = len([result for result in results or [] if _loop_pod(result) not in judged | set(not_copied)])
    lines.append(f'the cache was purged in {purged} other pod{"" if purged == 1 else "s"} (backups in {backup_dir}); '
                 f'sessions, the configuration and the {kind} were left as they were: re-run to purge the pods '
                 'running now')
    return lines


def api_error(result: dict) -> str:
    """What a failed kubernetes.core call says, without the body it sent or got back (a pod template's env values).

    The HTTP status and reason when the API server answered, else the first line of the error (a connection refused).
    """
    result = result if isinstance(result, dict) else {}
    if result.get('status') is not None and result.get('reason') is not None:
        return f"the API server answered HTTP {result['status']} ({result['reason']})"
    line = (str(result.get('msg') or 'no answer').splitlines() or [''])[0]
    return line if len(line) <= 200 else line[:197] + '...'
