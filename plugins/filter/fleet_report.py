# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet_report
short_description: Every target of a runbook run with its verdict, for the one fleet report
version_added: 0.2.0
description:
  - The aggregate of a run over many targets (hosts, Kubernetes namespaces or clusters) - one line per target that
    the runbook's play started on, with its status, the reason and where its own report is, and the fleet's verdict.
  - A target is V(passed) when its validation passed, V(failed) when a check failed, a step failed before validation
    (the rescued run recorded it) or it left no verdict at all (it became unreachable or the run was interrupted),
    V(not judged) in check mode, and V(not validated) when the run's tags left the validation out.
  - Reads what each target left behind, from O(hostvars) - C(vllm_dr_validation), C(vllm_dr_diagnosis),
    C(vllm_dr_failure), C(_vllm_dr_report_file) and C(_vllm_dr_fleet_started_at) (the mark of a target of the run);
    neither tokens nor passwords are among them.
options:
  _input:
    description:
      - The inventory hosts to look at (C(groups['all'])); those without the mark are no target of the run.
      - Or a report this filter made, to render it in another O(format).
    type: raw
    required: true
  hostvars:
    description: C(hostvars).
    type: dict
    required: true
  validated:
    description: Whether the run's tags included the validation; without it a target leaves no verdict.
    type: bool
    default: true
  generated_at:
    description: When the report is made (ISO 8601); required unless O(_input) is a report already made.
    type: str
  format:
    description: V(data) for the report as a dict, V(junit) for JUnit XML, V(markdown) for Markdown.
    type: str
    choices: [data, junit, markdown]
    default: data
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Sum up the fleet
  ansible.builtin.set_fact:
    vllm_dr_fleet: >-
      {{ groups['all'] | inferops.vllm_dr.fleet_report(hostvars, generated_at=now(utc=true).isoformat()) }}

- name: Write its JUnit XML
  ansible.builtin.copy:
    content: "{{ vllm_dr_fleet | inferops.vllm_dr.fleet_report(hostvars, format='junit') }}"
    dest: /var/lib/vllm_dr/reports/fleet/fleet.junit.xml
    mode: "0640"
"""

RETURN = r"""
_value:
  description: With O(format=data), the report; otherwise its text.
  type: raw
  contains:
    passed:
      description: Whether no target failed.
      type: bool
    total:
      description: How many targets the run had.
      type: int
    counts:
      description: How many targets are V(passed), V(failed), V(not judged), V(not validated).
      type: dict
    failed:
      description: The names of the targets that failed.
      type: list
      elements: str
    targets:
      description: >-
        One per target, in inventory order - C(host), C(status), C(reason), C(platform), C(recovery_needed),
        C(started_at) and C(report) (its JSON report, V(null) when it wrote none).
      type: list
      elements: dict
    report_dir:
      description: >-
        The directory of the first target's report; when none was written, the directory the first target's report
        was to go to; V(null) when no target came that far.
      type: str
    generated_at:
      description: O(generated_at).
      type: str
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._fleet_report import (
    fleet_junit, fleet_markdown, fleet_report as _fleet)

_MARK = '_vllm_dr_fleet_started_at'
_FORMATS = {'data': lambda fleet: fleet, 'junit': fleet_junit, 'markdown': fleet_markdown}


def _left_behind(host, facts) -> dict:
    return {'host': host, 'started_at': facts.get(_MARK), 'validation': facts.get('vllm_dr_validation'),
            'diagnosis': facts.get('vllm_dr_diagnosis'), 'failure': facts.get('vllm_dr_failure'),
            'report': facts.get('_vllm_dr_report_file'), 'platform': facts.get('vllm_dr_platform'),
            'report_dir': facts.get('_vllm_dr_report_dir')}


def fleet_report(hosts, hostvars, generated_at=None, validated=True,
                 format='data'):  # pylint: disable=redefined-builtin
    if format not in _FORMATS:
        raise AnsibleFilterError(f"fleet_report: format {format!r} is none of {', '.join(_FORMATS)}; choose one")
    if isinstance(hosts, Mapping):  # a report made before, rendered in another format
        try:
            return _FORMATS[format](hosts)
        except (KeyError, TypeError) as exc:
            raise AnsibleFilterError(f'fleet_report: the report given lacks or mistypes {exc}; pass what this '
                                     'filter returned with format=data') from None
    if generated_at is None:
        raise AnsibleFilterError('fleet_report: generated_at is missing; pass the time the report is made')
    targets = [_left_behind(host, hostvars[host]) for host in hosts or [] if hostvars[host].get(_MARK) is not None]
    return _FORMATS[format](_fleet(targets, validated=bool(validated), generated_at=str(generated_at)))


class FilterModule:
    def filters(self):
        return {'fleet_report': fleet_report}
