# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filters the collection's own roles and playbooks call: not a public interface.

A filter file whose name starts with ``__`` is loaded by its filters' full names on every supported ansible-core, but
ansible-doc does not list it, so neither does the documentation. Each name here starts with ``_``
(``inferops.vllm_dr._store_sweeper``): what they take and return follows the roles and may change in any release.
The decisions are made in ``plugin_utils`` and ``module_utils`` (each function below says where); this file only hands
the roles' arguments to them and turns their errors into one filter error. The filters a user writes in a playbook are
the documented ones (``ansible-doc -t filter -l inferops.vllm_dr``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils import _detection, _dr_audit, _velero
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils import _fleet_report, _validation_metrics
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._http_args import endpoint_args
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_objects import pod_hosts
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_statefulset import replacement_ready
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._k8s_target import kind_access, purge_preconditions, target_reads
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollback import rollback_plan, target_mismatch
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import api_error, purge_failures
from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._store_identity import store_sweeper as _sweeper


def _judged(decide, error, *args, prefix='', **kwargs):
    """``decide(*args, **kwargs)``; its own error class becomes a filter error with its one line."""
    try:
        return decide(*args, **kwargs)
    except error as exc:
        raise AnsibleFilterError(prefix + str(exc)) from None


def store_sweeper(hosts, hostvars, host):
    """The host of the play that sweeps the store of ``host`` (``plugin_utils/_store_identity.py``)."""
    stores = {}
    for name in hosts:
        store = hostvars[name].get('_vllm_dr_sweep_store')
        if store is not None:
            stores[name] = store
    return _sweeper(list(hosts), stores, host)


_FLEET_MARK = '_vllm_dr_fleet_started_at'
_FLEET_FORMATS = {'data': lambda fleet: fleet, 'junit': _fleet_report.fleet_junit,
                  'markdown': _fleet_report.fleet_markdown}


def _left_behind(host, facts) -> dict:
    return {'host': host, 'started_at': facts.get(_FLEET_MARK), 'validation': facts.get('vllm_dr_validation'),
            'diagnosis': facts.get('vllm_dr_diagnosis'), 'failure': facts.get('vllm_dr_failure'),
            'report': facts.get('_vllm_dr_report_file'), 'platform': facts.get('vllm_dr_platform'),
            'report_dir': facts.get('_vllm_dr_report_dir')}


def fleet_report(hosts, hostvars, generated_at=None, validated=True,
                 format='data'):  # pylint: disable=redefined-builtin
    """The fleet's report from what each target left behind (``plugin_utils/_fleet_report.py``); ``format`` data,
    junit or markdown; given a report made before (a mapping), that report in another format."""
    if format not in _FLEET_FORMATS:
        raise AnsibleFilterError(f"fleet_report: format {format!r} is none of {', '.join(_FLEET_FORMATS)}; choose one")
    if isinstance(hosts, Mapping):  # a report made before, rendered in another format
        try:
            return _FLEET_FORMATS[format](hosts)
        except (KeyError, TypeError) as exc:
            raise AnsibleFilterError(f'fleet_report: the report given lacks or mistypes {exc}; pass what this '
                                     'filter returned with format=data') from None
    if generated_at is None:
        raise AnsibleFilterError('fleet_report: generated_at is missing; pass the time the report is made')
    targets = [_left_behind(host, hostvars[host]) for host in hosts or []
               if hostvars[host].get(_FLEET_MARK) is not None]
    return _FLEET_FORMATS[format](_fleet_report.fleet_report(targets, validated=bool(validated),
                                                             generated_at=str(generated_at)))


def validation_metrics(validation, now, previous=''):
    """The validation verdict as a node-exporter textfile (``plugin_utils/_validation_metrics.py``)."""
    return _judged(_validation_metrics.render, _validation_metrics.MetricsError, validation, now, previous,
                   prefix='validation_metrics: ')


def detection_verdict(diagnosis, auto_repair=False):
    """A detection run's verdict (``module_utils/_detection.py``)."""
    return _judged(_detection.verdict, _detection.DetectionError, diagnosis, auto_repair)


def detection_metrics(result, now):
    """A detection run's verdict as a node-exporter textfile (``module_utils/_detection.py``)."""
    return _judged(_detection.render, _detection.DetectionError, result, now)


def dr_audit(facts, fail_below=0):
    """The readiness audit's score and findings (``module_utils/_dr_audit.py``)."""
    return _judged(_dr_audit.verdict, _dr_audit.AuditError, facts, fail_below, prefix='dr_audit: ')


def rollback_target(recorded, current, files, backup_dir):
    """Why a run directory does not belong to this target, or '' (``plugin_utils/_rollback.py``)."""
    return target_mismatch(recorded or None, current, files, backup_dir=backup_dir) or ''


def velero_exclusion(deployments, pvcs=None, config_maps=None, container='vllm', cache_path='', present=True,
                     exclusions=('annotation', 'resource_policy'), policy_name='vllm-dr-token-cache',
                     velero_namespace='velero', selector='app=vllm', deployment='', kind='Deployment'):
    """What keeps the token cache out of Velero's backups (``module_utils/_velero.py``): the workloads of `kind`."""
    return _judged(_velero.exclusion_plan, _velero.VeleroError, deployments, pvcs or [], config_maps or [],
                   container, cache_path, present, list(exclusions), policy_name, velero_namespace, selector,
                   deployment, kind, prefix='velero_exclusion: ')


def http_args(options, target):
    """The arguments of vllm_dr_http that `target` (probe, uri) takes, under its names (``plugin_utils/_http_args.py``)."""
    return _judged(endpoint_args, ValueError, options, target)


class FilterModule:
    def filters(self):
        return {
            '_store_sweeper': store_sweeper,
            '_http_args': http_args,
            '_fleet_report': fleet_report,
            '_validation_metrics': validation_metrics,
            '_detection_verdict': detection_verdict,
            '_detection_metrics': detection_metrics,
            '_dr_audit': dr_audit,
            '_rollback_plan': rollback_plan,
            '_rollback_target': rollback_target,
            '_pod_hosts': pod_hosts,
            '_rollout_api_error': api_error,
            '_purge_preconditions': purge_preconditions,
            '_k8s_target_reads': target_reads,
            '_k8s_kind_access': kind_access,
            '_replacement_ready': replacement_ready,
            '_rollout_purge_failures': purge_failures,
            '_velero_exclusion': velero_exclusion,
            '_velero_restored_at': _velero.restored_at,
        }
