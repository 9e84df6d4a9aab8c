# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollout_purge_failures
short_description: Why the purge inside the pods did not reach every pod
version_added: 0.1.0
description:
  - Judges the results of the loop that purges the token cache inside each pod. A pod that is no longer running
    (deleted, being deleted or replaced while the loop ran) is named as gone; any other failure keeps the module's
    own message. A last line says what was done and that a re-run purges the pods running now.
  - Returns an empty list when every pod was purged.
  - Its companions are P(inferops.vllm_dr.k8s_target#filter) and P(inferops.vllm_dr.rollout_preconditions#filter).
options:
  _input:
    description: The purge loop's results; each item is the pod's inventory host, C(<target>/<namespace>/<pod>).
    type: list
    elements: dict
    required: true
  pods:
    description: The pods of the namespace, read after the loop.
    type: list
    elements: dict
    required: true
  deployment:
    description: The workload's name, for the messages.
    type: str
    required: true
  kind:
    description: The workload's kind, for the messages.
    type: str
    default: Deployment
  uids:
    description:
      - The pods' uids when the purge began, by name, for a kind whose pods keep their names when replaced (a
        StatefulSet's); a pod purged that now runs with another uid, or not at all, was replaced during the purge.
    type: dict
  namespace:
    description: The namespace, for the messages.
    type: str
    required: true
  backup_dir:
    description: Where the backups of the pods purged are, for the messages.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Fail when a pod went away during the purge
  ansible.builtin.fail:
    msg: "{{ problems | join('\n') }}"
  vars:
    problems: >-
      {{ purge.results | inferops.vllm_dr.rollout_purge_failures(pods.resources, deployment='vllm', namespace='vllm',
                                                                  backup_dir='/var/backups/vllm_dr') }}
  when: problems | length > 0
"""

RETURN = r"""
_value:
  description: One line per pod not purged, then one line on what was done; empty when every pod was purged.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollout import purge_failures


class FilterModule:
    def filters(self):
        return {'rollout_purge_failures': purge_failures}
