# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollback_target
short_description: Whether a run's backup directory belongs to the target a rollback runs on
version_added: 0.2.0
description:
  - A run on Kubernetes records its target in C(<run backup dir>/target.json) (the cluster's API server, the
    namespace, the Deployment, each pod's name and uid). C(dr_rollback.yml) puts a run's backups back only on that
    target; a run directory made for another cluster, namespace or Deployment is refused in one line before any
    change.
  - A run directory made before runs recorded their target is judged by the namespaces its pod directories
    (C(<namespace>_<pod>)) name.
options:
  _input:
    description: The contents of the run's C(target.json), or none when it has none.
    type: raw
    required: true
  current:
    description: The target now, C(cluster), C(namespace) and C(deployment).
    type: dict
    required: true
  files:
    description: The backup files found under O(backup_dir) (C(ansible.builtin.find)'s C(files)).
    type: list
    elements: dict
    required: true
  backup_dir:
    description: The run's backup directory on the controller.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Refuse a run directory made for another target
  ansible.builtin.fail:
    msg: "{{ mismatch }}"
  vars:
    mismatch: >-
      {{ recorded | inferops.vllm_dr.rollback_target({'cluster': 'https://10.0.0.1:6443', 'namespace': 'vllm',
                                                      'deployment': 'vllm'}, found.files,
                                                     backup_dir='/var/backups/vllm_dr/run-42') }}
  when: mismatch | length > 0
"""

RETURN = r"""
_value:
  description: Empty when the directory belongs to the target; else the one line that names both targets and the fix.
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollback import target_mismatch


def rollback_target(recorded, current, files, backup_dir):
    return target_mismatch(recorded or None, current, files, backup_dir=backup_dir) or ''


class FilterModule:
    def filters(self):
        return {'rollback_target': rollback_target}
