# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The readiness audit's verdict: for each prevention item of the incident write-up, has the target got it.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._cache_path import holds
from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import (
    CLAIM_TEMPLATE, EXCLUDES, CLAIMED, VeleroError, claim_pvcs, deployment_for, excludes, named, policy_skips,
    restore_purge, template_annotations, template_name, template_volumes)

# The alerts of extensions/observability/prometheus/vllm-dr.rules.yml on the incident's log lines (P4).
REQUIRED_ALERTS = ('VllmTokenRefreshErrors', 'VllmInvalidSessionToken')

PASS, FAIL, ADVICE, SKIP = 'pass', 'fail', 'advice', 'skip'
BACKUP_MODES = ('file_system', 'snapshot')


class AuditError(ValueError):
    """The facts the audit gathered are not what it needs."""


def _item(key, prevention, name, ok, detail, fix, status=None) -> dict:
    return {'id': key, 'prevention': prevention, 'name': name, 'status': status or (PASS if ok else FAIL),
            'detail': detail, 'fix': '' if ok and status is None else fix}


def cache_outside_snapshots(cache: dict, snapshot: dict) -> dict:
    name = 'token cache is kept out of snapshots'
    fix = ('exclude the token cache from snapshots (a snapshot policy that leaves %s out), or move it to a path '
           'the snapshot does not include; list that path in vllm_dr_audit_snapshot_excludes' % cache['path'])
    if not cache['exists']:
        return _item('cache_outside_snapshots', 'P3', name, True, 'no token cache on disk at %s' % cache['path'], fix)
    excluded = [p for p in snapshot['excludes'] if holds(p, cache['path'])]
    included = [p for p in snapshot['includes'] if holds(p, cache['path'])]
    if excluded or not included:
        why = ('excluded by %s' % excluded[0]) if excluded else 'not under a snapshotted path'
        return _item('cache_outside_snapshots', 'P3', name, True, '%s on disk, %s' % (cache['path'], why), fix)
    return _item('cache_outside_snapshots', 'P3', name, False,
                 '%s is on disk under %s, which snapshots include' % (cache['path'], included[0]), fix)


def _yaml(text):
    """The YAML document in text, or None when there is no text or it does not parse."""
    if not isinstance(text, str):
        return None
    # Imported here: only the dr_audit filter, on the controller (which has PyYAML), calls this; module_utils must
    # import on targets without it.
    import yaml  # pylint: disable=import-outside-toplevel
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def refresh_on_startup(config: dict) -> dict:
    name = 'refresh_on_startup is set'
    fix = ('set session_state_store.refresh_on_startup: true in %s (the purge role does it: '
           'playbooks/dr_restore.yml --tags purge)' % config['path'])
    document = _yaml(config.get('text'))
    if not isinstance(document, dict):
        problem = 'not readable' if config.get('text') is None else 'not a YAML mapping'
        return _item('refresh_on_startup', 'P2', name, False, 'configuration %s %s' % (config['path'], problem),
                     'make %s readable, or set vllm_dr_config_path to the service configuration' % config['path'])
    store = document.get('session_state_store')
    value = store.get('refresh_on_startup') if isinstance(store, dict) else None
    return _item('refresh_on_startup', 'P2', name, value is True,
                 'session_state_store.refresh_on_startup is %s in %s'
                 % ('not set' if value is None else repr(value).lower(), config['path']), fix)


def rule_file_alerts(text) -> list:
    """The alert names of a Prometheus rule file (or of a PrometheusRule manifest's spec)."""
    return rule_alerts(_yaml(text))


def rule_alerts(document) -> list:
    """The alert names of a parsed rule file or PrometheusRule."""
    if isinstance(document, dict) and isinstance(document.get('spec'), dict):
        document = document['spec']
    groups = document.get('groups') if isinstance(document, dict) else None
    return [rule['alert'] for group in groups or [] if isinstance(group, dict)
            for rule in group.get('rules') or [] if isinstance(rule, dict) and isinstance(rule.get('alert'), str)]


def alert_rules(rules: list) -> dict:
    name = 'alert rules on the incident\'s log lines are installed'
    fix = ('install extensions/observability/prometheus/vllm-dr.rules.yml where Prometheus loads rules, and list '
           'that file in vllm_dr_audit_rules_files')
    if not rules:
        return _item('alert_rules', 'P4', name, False, 'no rules file named (vllm_dr_audit_rules_files)', fix)
    found = {alert for entry in rules for alert in rule_file_alerts(entry.get('text'))}
    missing = [alert for alert in REQUIRED_ALERTS if alert not in found]
    unread = [entry['path'] for entry in rules if entry.get('text') is None]
    detail = ('%s in %s' % (', '.join(REQUIRED_ALERTS), ', '.join(entry['path'] for entry in rules)) if not missing
              else 'missing %s%s' % (', '.join(missing), ('; not readable: %s' % ', '.join(unread)) if unread else ''))
    return _item('alert_rules', 'P4', name, not missing, detail, fix)


def probe_session(probe: dict) -> dict:
    name = 'the probe session exists in the store'
    if not probe.get('refresh_url'):
        return _item('probe_session', 'FAQ3', name, False, 'no refresh endpoint configured (vllm_dr_refresh_url)',
                     'set vllm_dr_refresh_url and vllm_dr_probe_session so a stale cache can be found without a restart')
    found = probe.get('found')
    detail = {True: 'session %s found', False: 'session %s not in the store',
              None: 'session %s not looked up: the store was not reachable'}[found] % probe['session']
    return _item('probe_session', 'FAQ3', name, found is True, detail,
                 'create a long-lived service session %s for the refresh probe (vllm_dr_probe_session), or name one '
                 'that exists' % probe['session'])


def cache_external(cache: dict, store: dict) -> dict:
    """P1 is advice, not a failure: the audit never migrates and the on-disk cache is supported."""
    name = 'token cache is external (stateless service)'
    if not cache['exists']:
        return _item('cache_external', 'P1', name, True, 'no token cache on disk at %s' % cache['path'], '')
    backend = store.get('backend') or ''
    if not backend:
        return _item('cache_external', 'P1', name, True, '%s on disk; no external store configured' % cache['path'],
                     '', status=ADVICE)
    return _item('cache_external', 'P1', name, False,
                 'the token cache is on disk (%s) while the session store is external (%s)' % (cache['path'], backend),
                 'prefer an external token cache in the same %s store when snapshots are part of disaster recovery: '
                 'the on-disk SQLite file is frozen by every snapshot and must be purged after each restore (see the '
                 'operator guide, "P1: a stateless token cache"); until then keep refresh_on_startup and the purge'
                 % backend, status=ADVICE)


def _need(facts, key, kind):
    value = facts.get(key) if isinstance(facts, dict) else None
    if not isinstance(value, kind):
        raise AuditError('the audit facts have no %s %s; pass the facts the audit role gathered' % (kind.__name__, key))
    return value


def host_items(facts) -> list:
    cache = _need(facts, 'cache', dict)
    return [
        cache_external(cache, _need(facts, 'store', dict)),
        refresh_on_startup(_need(facts, 'config', dict)),
        cache_outside_snapshots(cache, _need(facts, 'snapshot', dict)),
        alert_rules(_need(facts, 'rules', list)),
        probe_session(_need(facts, 'probe', dict)),
    ]


def _where(workload, kind, keys, several) -> str:
    return '%s %s%s' % (kind, workload['metadata']['name'], (' ' + template_name(keys)) if several else '')


def restore_hook(deployment, cache_path: str, kind: str = 'Deployment', held=None) -> dict:
    """Every pod template that holds the cache on a volume (`held`: [(keys, volume)]) purges it at a restore."""
    name = 'a restore purges the token cache before vLLM starts'
    held = held or [(None, None)]
    several = len(held) > 1
    found, missing = [], []
    for keys in [entry[0] for entry in held]:
        purges = restore_purge(deployment, cache_path, kind, keys)
        where = _where(deployment, kind, keys or (), several)
        if purges:
            found.append(('%s: found %s' % (where, ', '.join(purges))) if several else 'found %s' % ', '.join(purges))
        else:
            missing.append('%s has no init container purge and no Velero restore hook' % where)
    return _item('restore_hook', 'P2', name, not missing, '; '.join(missing or found),
                 'add one: playbooks/dr_restore.yml -e vllm_dr_k8s_purge_method=velero_hook (a Velero init restore '
                 'hook, run on restores only) or =init_container (a purge at every start)')


def kubernetes_cache_outside_backups(deployment, volume, pvc, policies, modes, kind='Deployment', held=None,
                                     pvcs=None) -> dict:
    """P3 on Kubernetes: each Velero backup mode in use leaves the cache's volume out. `held`: [(keys, volume)] of
    every pod template that holds the cache on a volume (the first template alone when not given); `pvcs`: those of
    the namespace, which a volumeClaimTemplates claim's (one per pod, <claim>-<pod>) are found among."""
    name = 'token cache is kept out of snapshots'
    fix = 'run playbooks/dr_harden.yml (the %s annotation for file-system backups, a resource policy for snapshot ' \
          'backups)' % EXCLUDES
    if volume is None:
        return _item('cache_outside_snapshots', 'P3', name, True,
                     'the token cache is on the container\'s own file system, which no backup includes', fix)
    if volume['type'] == 'hostPath':
        return _item('cache_outside_snapshots', 'P3', name, False,
                     'the token cache is on hostPath volume %s, which snapshots of the node\'s disk include and Velero '
                     'cannot exclude' % volume['name'],
                     'move the token cache to an emptyDir or a PVC of its own, then run playbooks/dr_harden.yml')
    held = held or [(None, volume)]
    several = len(held) > 1
    missing, found = [], []
    if 'file_system' in modes:
        for keys, held_volume in held:
            listed = held_volume['name'] in excludes(template_annotations(deployment, kind, keys).get(EXCLUDES))
            where = (' (%s)' % _where(deployment, kind, keys, True)) if several else ''
            if listed:
                found.append('file-system backups: %s lists %s%s' % (EXCLUDES, held_volume['name'], where))
            else:
                missing.append('file-system backups include volume %s (%s)%s; %s does not list it'
                               % (held_volume['name'], held_volume['type'], where, EXCLUDES))
    if 'snapshot' in modes and volume['type'] in CLAIMED:
        if volume['type'] == CLAIM_TEMPLATE:
            claims = claim_pvcs(pvcs, volume['claim'], deployment['metadata']['name'], kind)
            if not claims:
                missing.append('snapshot backups: no PersistentVolumeClaim of volumeClaimTemplates claim %s was found '
                               '(%s-<pod>), so whether a resource policy skips them cannot be judged'
                               % (volume['claim'], volume['claim']))
        else:
            claims = [pvc] if pvc else [None]
        for claim in claims:
            claim_name = claim['metadata']['name'] if claim else (volume['claim'] or volume['name'])
            skipped = policy_skips(policies, claim) if claim else []
            if skipped:
                found.append('snapshot backups: resource policy %s skips PVC %s' % (', '.join(skipped), claim_name))
            else:
                missing.append('snapshot backups include PVC %s; no resource-policy ConfigMap skips it' % claim_name)
    unused = 'volume %s (%s) is in no backup mode in use' % (volume['name'], volume['type'])
    detail = '; '.join(missing or found) or unused
    return _item('cache_outside_snapshots', 'P3', name, not missing, detail, fix)


def kubernetes_alert_rules(rules) -> dict:
    """P4 on Kubernetes: the PrometheusRule objects of the namespace; None when the PrometheusRule CRD is absent."""
    if rules is None:
        return _item('alert_rules', 'P4', 'alert rules on the incident\'s log lines are installed', True,
                     'not checked: the cluster has no PrometheusRule CRD (monitoring.coreos.com)', '', status=SKIP)
    found = {alert for rule in rules for alert in rule_alerts(rule)}
    missing = [alert for alert in REQUIRED_ALERTS if alert not in found]
    return _item('alert_rules', 'P4', 'alert rules on the incident\'s log lines are installed', not missing,
                 'missing %s in the namespace\'s PrometheusRules' % ', '.join(missing) if missing else
                 '%s in PrometheusRule %s' % (', '.join(REQUIRED_ALERTS),
                                              ', '.join(rule['metadata']['name'] for rule in rules)),
                 'apply the collection\'s PrometheusRule manifest (extensions/observability) in the workload\'s namespace')


def kubernetes_items(facts) -> list:
    """The items for a workload of kind (facts kind: Deployment, StatefulSet or LeaderWorkerSet; Deployment when not
    given). facts: workloads (or deployments: those of the kind read), pvcs and config_maps (of the workload's
    namespace), velero_config_maps, selector, workload (or deployment: a name, or empty), container, cache (path),
    config_map and config_key (vllm.yaml), backup_modes, rules (PrometheusRules, None without the CRD), store, probe."""
    cache_path = _need(facts, 'cache', dict).get('path', '')
    modes = facts.get('backup_modes', list(BACKUP_MODES))
    if not isinstance(modes, list) or not set(modes) <= set(BACKUP_MODES):
        raise AuditError('backup_modes must be a list of %s, got %r' % (', '.join(BACKUP_MODES), modes))
    config_maps = facts.get('config_maps') or []
    kind = facts.get('kind') or 'Deployment'
    workloads = facts.get('workloads') if 'workloads' in facts else facts.get('deployments')
    if not isinstance(workloads, list):
        raise AuditError('the audit facts have no list workloads; pass the facts the audit role gathered')
    try:
        deployment = deployment_for(workloads, facts.get('selector', ''),
                                    facts.get('workload') or facts.get('deployment') or '', kind)
        volumes = template_volumes(deployment, facts.get('container', 'vllm'), cache_path, kind)
    except VeleroError as exc:
        raise AuditError(str(exc)) from exc
    held = [(keys, volume) for keys, volume in volumes if volume]
    volume = held[0][1] if held else None
    pvc = named(facts.get('pvcs'), volume['claim']) if volume and volume['claim'] else None
    config_map, key = facts.get('config_map', 'vllm-config'), facts.get('config_key', 'vllm.yaml')
    config = {'path': 'ConfigMap %s key %s' % (config_map, key),
              'text': ((named(config_maps, config_map) or {}).get('data') or {}).get(key)}
    return [
        cache_external({'path': cache_path, 'exists': volume is not None}, _need(facts, 'store', dict)),
        refresh_on_startup(config),
        restore_hook(deployment, cache_path, kind, held or [(volumes[0][0], None)]),
        kubernetes_cache_outside_backups(deployment, volume, pvc,
                                         (facts.get('velero_config_maps') or []) + config_maps, modes, kind, held,
                                         facts.get('pvcs') or []),
        kubernetes_alert_rules(facts.get('rules')),
        probe_session(_need(facts, 'probe', dict)),
    ]


def verdict(facts, fail_below=0) -> dict:
    """Every item, the score (percent of judged items that pass; advice is not judged) and the verdict."""
    try:
        fail_below = int(fail_below)
    except (TypeError, ValueError) as exc:
        raise AuditError('fail_below must be a percentage from 0 to 100, got %r' % (fail_below,)) from exc
    if not 0 <= fail_below <= 100:
        raise AuditError('fail_below must be a percentage from 0 to 100, got %d' % fail_below)
    on_kubernetes = isinstance(facts, dict) and facts.get('platform') == 'kubernetes'
    items = kubernetes_items(facts) if on_kubernetes else host_items(facts)
    judged = [item for item in items if item['status'] not in (ADVICE, SKIP)]
    passed = [item for item in judged if item['status'] == PASS]
    score = round(100 * len(passed) / len(judged)) if judged else 100
    failed = [item['name'] for item in judged if item['status'] == FAIL]
    return {'items': items, 'failed': failed, 'advice': [item['name'] for item in items if item['status'] == ADVICE],
            'skipped': [item['name'] for item in items if item['status'] == SKIP],
            'score': score, 'fail_below': fail_below, 'below_threshold': score < fail_below,
            'verdict': 'ready' if not failed else 'not ready',
            'counts': {'items': len(items), 'failed': len(failed),
                       'skipped': sum(1 for item in items if item['status'] == SKIP)}}
