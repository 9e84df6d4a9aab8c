# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Keeping the token cache out of Velero backups (P3): which volume holds it, the pod-template annotation for
file-system backups, the resource policy for snapshot backups, and whether an existing policy already skips it.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.inferops.vllm_dr.plugins.module_utils._cache_path import CachePathError, resolve
from ansible_collections.inferops.vllm_dr.plugins.module_utils._k8s_kinds import (
    POD_TEMPLATES, claims_of, dig, present_templates)

EXCLUDES = 'backup.velero.io/backup-volumes-excludes'
# The volumes this collection added to EXCLUDES, so that removing the exclusion takes out only those and never an
# entry the operator listed.
OURS = 'vllm-dr.inferops.io/backup-volumes-excludes'
# The label that marks the cache's PVC, which the resource policy's pvcLabels condition matches.
CACHE_LABEL = 'vllm-dr.inferops.io/token-cache'
MANAGED_BY = {'app.kubernetes.io/managed-by': 'inferops.vllm_dr'}
POLICY_KEY = 'policy.yaml'
RESTORE_HOOKS = ('init.hook.restore.velero.io/', 'post.hook.restore.velero.io/')
# The init container the purge role adds (vllm_dr_k8s_purge_method=init_container).
PURGE_CONTAINER = 'purge-token-cache'
# Pod volume types a PersistentVolume backs: volume snapshots take them; the others are never snapshotted.
CLAIMED = ('persistentVolumeClaim', 'ephemeral', 'volumeClaimTemplate')


class VeleroError(ValueError):
    """The workload or an option is not what the exclusion needs."""


def skip_rule() -> dict:
    """The resource-policy rule that skips the cache's PVC, matched by the label this collection puts on it."""
    return {'conditions': {'pvcLabels': {CACHE_LABEL: 'true'}}, 'action': {'type': 'skip'}}


def _has_labels(labels, wanted) -> bool:
    labels = labels or {}
    return all(labels.get(key) == value for key, value in (wanted or {}).items())


# A volumeClaimTemplates claim, as the pod's volume list names it: a PersistentVolumeClaim <claim>-<pod> per pod.
CLAIM_TEMPLATE = 'volumeClaimTemplate'


def _kind(kind: str) -> str:
    if kind not in POD_TEMPLATES:
        raise VeleroError('workload kind %s is not supported; supported: %s' % (kind, ', '.join(sorted(POD_TEMPLATES))))
    return kind


def pod_templates(workload, kind: str = 'Deployment') -> list:
    """[(keys from spec down, the pod template)] of the workload: one, or a LeaderWorkerSet's worker template and its
    leader template when it has one."""
    if not isinstance(workload, dict) or not isinstance(workload.get('spec'), dict):
        raise VeleroError('no %s was read; check vllm_dr_k8s_namespace and vllm_dr_k8s_workload' % _kind(kind))
    return present_templates(workload, _kind(kind))


def _template(deployment, kind: str = 'Deployment') -> dict:
    return pod_templates(deployment, kind)[0][1] or {}


def template_name(keys) -> str:
    return '.'.join(('spec',) + tuple(keys))


def template_annotations(deployment, kind: str = 'Deployment', keys=None) -> dict:
    template = dig(deployment.get('spec') or {}, keys) if keys else _template(deployment, kind)
    return dict(((template or {}).get('metadata') or {}).get('annotations') or {})


def claim_templates(workload, kind: str = 'Deployment') -> list:
    """The names of the workload's volumeClaimTemplates (a StatefulSet's, a LeaderWorkerSet's), none for a Deployment."""
    return [(claim.get('metadata') or {}).get('name') for claim in claims_of(workload, _kind(kind))]


def claim_pvcs(pvcs, claim: str, workload: str, kind: str) -> list:
    """The PersistentVolumeClaims made from a volumeClaimTemplates claim, <claim>-<pod>: a StatefulSet's pod is
    <workload>-<ordinal>, a LeaderWorkerSet's leader <workload>-<group> and its workers <workload>-<group>-<index>."""
    pod = r'\d+' if kind == 'StatefulSet' else r'\d+(-\d+)?'
    pattern = re.compile('^%s-%s-%s$' % (re.escape(claim), re.escape(workload), pod))
    return sorted((item for item in pvcs or [] if pattern.match((item.get('metadata') or {}).get('name') or '')),
                  key=lambda item: item['metadata']['name'])


def deployment_for(deployments, selector: str, name: str = '', kind: str = 'Deployment') -> dict:
    """The workload of `kind` named, or else the one whose pods the selector (k=v,k2=v2) selects; VeleroError when
    none or several do."""
    deployments = [deployments] if isinstance(deployments, dict) else list(deployments or [])
    named_by = 'vllm_dr_k8s_deployment' if kind == 'Deployment' else 'vllm_dr_k8s_workload'
    if name:
        found = [item for item in deployments if (item.get('metadata') or {}).get('name') == name]
        if not found:
            raise VeleroError('%s %s not found; check vllm_dr_k8s_namespace, vllm_dr_k8s_kind and %s'
                              % (kind, name, named_by))
        return found[0]
    wanted = dict(part.strip().split('=', 1) for part in selector.split(',') if '=' in part)
    if not wanted or '!' in selector or ' in ' in selector:
        raise VeleroError('vllm_dr_k8s_selector %r is not of the form key=value[,key=value]; set it, or name the '
                          '%s with %s' % (selector, kind, named_by))
    found = [item for item in deployments
             if any(_has_labels(((template or {}).get('metadata') or {}).get('labels'), wanted)
                    for template in [entry[1] for entry in pod_templates(item, kind)])]
    if len(found) != 1:
        other = ('' if found or kind != 'Deployment' else
                 '; for a StatefulSet or a LeaderWorkerSet set vllm_dr_k8s_kind')
        raise VeleroError('%d %ss run pods that match %s (%s); name the one with %s%s'
                          % (len(found), kind, selector, ', '.join(item['metadata']['name'] for item in found)
                             or 'none', named_by, other))
    return found[0]


def _pod_spec(workload, template, kind: str) -> dict:
    """The pod template's spec, with the workload's volumeClaimTemplates as the volumes its pods get (each pod its own
    PersistentVolumeClaim, which takes the place of a template volume of the same name)."""
    spec = dict((template or {}).get('spec') or {})
    claims = claim_templates(workload, kind)
    if claims:
        spec['volumes'] = ([{'name': name, CLAIM_TEMPLATE: {}} for name in claims]
                           + [volume for volume in spec.get('volumes') or [] if volume.get('name') not in claims])
    return spec


def _volume(resolved: dict):
    if resolved['mount'] is None:
        return None
    claim = resolved['source'].get('claimName') if resolved['kind'] == 'persistentVolumeClaim' else None
    if resolved['kind'] == CLAIM_TEMPLATE:
        claim = resolved['volume']
    return {'name': resolved['volume'], 'type': resolved['kind'], 'mount_path': resolved['mount']['mountPath'],
            'claim': claim, 'sub_path': resolved['sub_path_expr'] or resolved['sub_path'],
            'path_in_volume': resolved['path_in_volume'], 'location': resolved['location']}


def template_volumes(workload, container: str, cache_path: str, kind: str = 'Deployment') -> list:
    """[(keys of the pod template, the volume that holds cache_path there or None)] for each pod template of the
    workload whose pods run the container; VeleroError when none does, or the place cannot be resolved."""
    name = '%s %s' % (_kind(kind), (workload.get('metadata') or {}).get('name') if isinstance(workload, dict) else '')
    found, missing = [], None
    for keys, template in pod_templates(workload, kind):
        owner = name if len(POD_TEMPLATES[kind]) == 1 else '%s %s' % (name, template_name(keys))
        try:
            resolved = resolve(_pod_spec(workload, template, kind), container, cache_path, owner)
        except CachePathError as exc:
            # a LeaderWorkerSet template without the container runs no vLLM (a leader that only coordinates)
            if 'has no container' in str(exc) and len(POD_TEMPLATES[kind]) > 1:
                missing = missing or exc
                continue
            raise VeleroError(str(exc)) from exc
        found.append((keys, _volume(resolved)))
    if not found:
        raise VeleroError(str(missing))
    return found


def cache_volume(deployment, container: str, cache_path: str, kind: str = 'Deployment'):
    """The pod volume that holds cache_path in the container (module_utils/_cache_path.py resolves it): name, type,
    mount path, claim (the claim's name; for a volumeClaimTemplates claim, type volumeClaimTemplate, the template's),
    sub_path and the path inside the volume; None when the cache is on the container's own file system in every pod
    template. VeleroError when the place cannot be resolved."""
    volumes = [entry[1] for entry in template_volumes(deployment, container, cache_path, kind)]
    return next((volume for volume in volumes if volume), None)


def excludes(value) -> list:
    return [part.strip() for part in (value or '').split(',') if part.strip()]


def annotation_patch(annotations: dict, volume: str, present: bool) -> dict:
    """The change to the pod template's annotations that lists (or unlists) the cache's volume in EXCLUDES.

    The operator's entries stay, in their order; a volume the operator listed is left alone both ways. Returns
    patch (annotation -> value, None deletes), before and after (EXCLUDES), changed.
    """
    listed = excludes(annotations.get(EXCLUDES))
    ours = excludes(annotations.get(OURS))
    if present:
        add = [] if volume in listed else [volume]
        new_listed, new_ours = listed + add, ours + [name for name in add if name not in ours]
    else:
        new_listed = [name for name in listed if name not in ours]
        new_ours = []
    patch = {}
    for key, old, new in ((EXCLUDES, listed, new_listed), (OURS, ours, new_ours)):
        if old != new or (key in annotations and not new):
            patch[key] = ','.join(new) if new else None
    return {'patch': patch, 'before': ','.join(listed) or None, 'after': ','.join(new_listed) or None,
            'changed': bool(patch)}


def _policy_key(config_map) -> str:
    data = (config_map or {}).get('data') or {}
    return next(iter(data)) if len(data) == 1 else POLICY_KEY


def _yaml():
    # Imported here: only filters on the controller (which has PyYAML) call the functions that need it.
    import yaml  # pylint: disable=import-outside-toplevel
    return yaml


def policy_document(config_map):
    """The resource policy a ConfigMap carries (its one data key), or None when it carries none."""
    data = (config_map or {}).get('data') or {}
    if len(data) != 1:
        return None
    yaml = _yaml()
    try:
        document = yaml.safe_load(next(iter(data.values())))
    except yaml.YAMLError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get('volumePolicies', []), list):
        return None
    return document if 'version' in document and ('volumePolicies' in document or 'includeExcludePolicy' in document) \
        else None


def policy_plan(config_map, name: str, namespace: str, present: bool) -> dict:
    """What to do to the resource-policy ConfigMap: the skip rule first (Velero applies the first rule a volume
    matches), the operator's rules after it untouched; removing takes out only the skip rule, and deletes the
    ConfigMap only when this collection created it and nothing else is left in it.

    Returns action (none, create, replace, delete), definition (for create and replace), before, after, changed.
    """
    rule = skip_rule()
    exists = bool(config_map)
    document = policy_document(config_map) if exists else {'version': 'v1', 'volumePolicies': []}
    if document is None:
        raise VeleroError('ConfigMap %s/%s exists but holds no Velero resource policy (one data key with version: v1); '
                          'set vllm_dr_k8s_velero_policy to a ConfigMap of its own' % (namespace, name))
    rules = list(document.get('volumePolicies') or [])
    others = [item for item in rules if item != rule]
    new_rules = [rule] + others if present else others
    before = [describe_rule(item) for item in rules]
    after = [describe_rule(item) for item in new_rules]
    if new_rules == rules and exists:
        return {'action': 'none', 'definition': None, 'before': before, 'after': after, 'changed': False}
    if not present:
        if not exists:
            return {'action': 'none', 'definition': None, 'before': before, 'after': after, 'changed': False}
        labels = (config_map.get('metadata') or {}).get('labels') or {}
        rest = dict(document, volumePolicies=new_rules)
        if not new_rules:
            rest.pop('volumePolicies')
        if _has_labels(labels, MANAGED_BY) and set(rest) == {'version'}:
            return {'action': 'delete', 'definition': None, 'before': before, 'after': [], 'changed': True}
        document = rest
    else:
        document = dict(document, volumePolicies=new_rules)
    metadata = {'name': name, 'namespace': namespace}
    metadata['labels'] = dict((config_map.get('metadata') or {}).get('labels') or {}) if exists else dict(MANAGED_BY)
    definition = {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': metadata,
                  'data': {_policy_key(config_map): _yaml().safe_dump(document, sort_keys=False)}}
    return {'action': 'replace' if exists else 'create', 'definition': definition, 'before': before, 'after': after,
            'changed': True}


def describe_rule(rule) -> str:
    if not isinstance(rule, dict):
        return repr(rule)
    conditions = ', '.join('%s=%s' % (key, value) for key, value in sorted((rule.get('conditions') or {}).items()))
    return '%s if %s' % ((rule.get('action') or {}).get('type'), conditions or 'always')


def label_patch(pvc, present: bool) -> dict:
    labels = ((pvc or {}).get('metadata') or {}).get('labels') or {}
    if present and labels.get(CACHE_LABEL) != 'true':
        return {'patch': {CACHE_LABEL: 'true'}, 'changed': True}
    if not present and CACHE_LABEL in labels:
        return {'patch': {CACHE_LABEL: None}, 'changed': True}
    return {'patch': {}, 'changed': False}


def named(objects, name):
    """The object of that name in a list the API server returned, or None."""
    return next((item for item in objects or [] if (item.get('metadata') or {}).get('name') == name), None)


def _nested(keys, value) -> dict:
    for key in reversed(keys):
        value = {key: value}
    return value


def _merge(into: dict, patch: dict) -> dict:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def exclusion_plan(deployments, pvcs=(), config_maps=(), container='vllm', cache_path='', present=True,
                   exclusions=('annotation', 'resource_policy'), policy_name='vllm-dr-token-cache',
                   velero_namespace='velero', selector='app=vllm', name='', kind='Deployment') -> dict:
    """Every change that keeps the cache's volume out of (or lets it back into) Velero backups, decided before any
    is made; VeleroError names what stops it. deployments: the workloads of `kind` (Deployment, StatefulSet,
    LeaderWorkerSet), pvcs: those of the workload's namespace; config_maps: those of Velero's namespace.

    Returns deployment (the workload's name), volume, annotation (the first pod template's change), annotations (one
    per pod template that holds the cache on a volume: template, the change), workload_patch (the one merge patch of
    the workload, {} when nothing changes), claims (each PersistentVolumeClaim to label: name, patch, changed; a
    volumeClaimTemplates claim has one per pod), label (the first claim's), policy, notes, diff, changed."""
    unknown = [item for item in exclusions if item not in ('annotation', 'resource_policy')]
    if unknown or not exclusions:
        raise VeleroError('vllm_dr_harden_exclusions %s: choose annotation, resource_policy or both' % list(exclusions))
    deployment = deployment_for(deployments, selector, name, kind)
    workload_name = deployment['metadata']['name']
    config_map = named(config_maps, policy_name)
    held = [(keys, volume) for keys, volume in template_volumes(deployment, container, cache_path, kind) if volume]
    volume = held[0][1] if held else None
    where = '%s %s' % (kind, workload_name)
    if volume is None:
        raise VeleroError('container %s of %s mounts no volume that holds %s, so no backup includes it and there is '
                          'nothing to exclude; check vllm_dr_cache_path and vllm_dr_k8s_container'
                          % (container, where, cache_path))
    if volume['type'] == 'hostPath':
        raise VeleroError('the token cache %s is on hostPath volume %s of %s: Velero never backs up hostPath volumes, '
                          'but snapshots of the node\'s disk do; move the cache to an emptyDir or a PVC of its own'
                          % (cache_path, volume['name'], where))
    plan = {'deployment': workload_name, 'kind': kind, 'volume': volume, 'annotation': None, 'annotations': [],
            'workload_patch': {}, 'claims': [], 'label': None, 'policy': None, 'notes': [], 'diff': []}
    if 'annotation' in exclusions:
        several = len(POD_TEMPLATES[kind]) > 1
        for keys, held_volume in held:
            change = annotation_patch(template_annotations(deployment, kind, keys), held_volume['name'], present)
            plan['annotations'].append({'template': template_name(keys), 'change': change})
            if change['changed']:
                _merge(plan['workload_patch'], {'spec': _nested(keys, {'metadata': {'annotations': change['patch']}})})
                plan['diff'].append('%s %s, %s: %s -> %s (the pod template changed: this starts a rollout)'
                                    % (where, template_name(keys) if several else 'pod template', EXCLUDES,
                                       change['before'], change['after']))
        plan['annotation'] = plan['annotations'][0]['change']
    if 'resource_policy' in exclusions:
        if volume['type'] == CLAIM_TEMPLATE:
            claims = claim_pvcs(pvcs, volume['claim'], workload_name, kind)
            missing = ('no PersistentVolumeClaim of volumeClaimTemplates claim %s (%s-%s-<ordinal>) was found: no '
                       'resource policy applied' % (volume['claim'], volume['claim'], workload_name))
        else:
            claims = [named(pvcs, volume['claim'])] if volume['claim'] and named(pvcs, volume['claim']) else []
            missing = 'PersistentVolumeClaim %s was not found: no resource policy applied' % volume['claim']
        if volume['type'] not in CLAIMED:
            plan['notes'].append('volume %s is %s, which volume snapshots never take: no resource policy needed'
                                 % (volume['name'], volume['type']))
        elif volume['type'] == 'ephemeral':
            plan['notes'].append('volume %s is a generic ephemeral volume, whose PVC gets no label from here: label its '
                                 'volumeClaimTemplate with %s=true for the resource policy' % (volume['name'], CACHE_LABEL))
        elif not claims:
            plan['notes'].append(missing)
        else:
            for pvc in claims:
                label = label_patch(pvc, present)
                plan['claims'].append(dict(label, name=pvc['metadata']['name']))
                if label['changed']:
                    plan['diff'].append('PersistentVolumeClaim %s, label %s: %s' % (
                        pvc['metadata']['name'], CACHE_LABEL, 'added' if present else 'removed'))
            plan['label'] = {key: plan['claims'][0][key] for key in ('patch', 'changed')}
            plan['policy'] = policy_plan(config_map, policy_name, velero_namespace, present)
            if volume['type'] == CLAIM_TEMPLATE and present:
                plan['notes'].append('the PersistentVolumeClaim of a pod added later gets no label: run dr_harden.yml '
                                     'again after a scale-up')
            if plan['policy']['changed']:
                plan['diff'].append('ConfigMap %s/%s volumePolicies: %s -> %s' % (
                    velero_namespace, policy_name, plan['policy']['before'] or '[]', plan['policy']['after'] or
                    ('deleted' if plan['policy']['action'] == 'delete' else '[]')))
    plan['changed'] = bool(plan['diff'])
    return plan


def _conditions_match(conditions: dict, pvc: dict):
    """True, False, or None when a condition needs what the audit does not read (the PV: capacity, csi, nfs...)."""
    labels = (pvc.get('metadata') or {}).get('labels') or {}
    spec, status = pvc.get('spec') or {}, pvc.get('status') or {}
    known = {
        'pvcLabels': lambda want: _has_labels(labels, want),
        'storageClass': lambda want: spec.get('storageClassName') in (want or []),
        'pvcPhase': lambda want: status.get('phase') in (want or []),
    }
    results = [known[key](value) if key in known else None for key, value in (conditions or {}).items()]
    if False in results:
        return False
    return None if None in results else True


def policy_skips(config_maps, pvc) -> list:
    """The names of the resource-policy ConfigMaps under which the first rule the PVC matches is skip."""
    found = []
    for config_map in config_maps or []:
        document = policy_document(config_map)
        for rule in (document or {}).get('volumePolicies') or []:
            matched = _conditions_match(rule.get('conditions') or {}, pvc) if isinstance(rule, dict) else False
            if matched:
                if (rule.get('action') or {}).get('type') == 'skip':
                    meta = config_map.get('metadata') or {}
                    found.append('%s/%s' % (meta.get('namespace'), meta.get('name')))
                break
    return found


def restore_purge(deployment, cache_path: str, kind: str = 'Deployment', keys=None) -> list:
    """What purges the cache when a restored pod starts: Velero restore-hook annotations, or an init container that
    is the purge role's or names the cache file; in the pod template at `keys` (from spec down), or the first."""
    template = (dig(deployment.get('spec') or {}, keys) if keys else _template(deployment, kind)) or {}
    found = ['annotation %s' % key for key in sorted(template_annotations(deployment, kind, keys))
             if key.startswith(RESTORE_HOOKS)]
    for init in (template.get('spec') or {}).get('initContainers') or []:
        words = ' '.join(str(part) for part in (init.get('command') or []) + (init.get('args') or []))
        if init.get('name') == PURGE_CONTAINER or posixpath.basename(cache_path) in words:
            found.append('init container %s' % init.get('name'))
    return found


# Velero's terminal phases of a Restore
FINISHED_RESTORE_PHASES = ('Completed', 'PartiallyFailed', 'Failed')


def restored_at(restores) -> str:
    """When the workload was last restored: the latest completionTimestamp of the Restores that finished (a terminal
    phase), '' when none did. RFC 3339 times in UTC, as the API server writes them, sort as strings."""
    times = [(restore.get('status') or {}).get('completionTimestamp') for restore in restores or []
             if (restore.get('status') or {}).get('phase') in FINISHED_RESTORE_PHASES]
    return max((time for time in times if time), default='')
