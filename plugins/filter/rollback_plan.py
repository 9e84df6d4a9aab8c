# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: rollback_plan
short_description: Which token cache backup of a run goes back into which pod
version_added: 0.1.0
description:
  - Decides, before anything is changed, what C(dr_rollback.yml) puts back into each pod running now on Kubernetes,
    from the backups a run kept on the controller in C(<run backup dir>/<namespace>_<pod>/) (main file
    C(<cache file>.<stamp>.bak) and the sidecars C(.bak-wal), C(.bak-shm), C(.bak-journal)).
  - A pod of the run still running gets its own backup set back, the newest in its directory.
  - A pod with no backup of its own (it replaced a pod of the run, as the restart does with all of them) gets the
    backup of the pods gone when they all held one cache content (the same files, byte for byte), or the one named by
    O(pod_dir). When they held different caches, it gets a line in RV(_value.problems) naming the directories to
    choose from, and nothing may be restored.
  - With no backup of a pod gone, a pod with none of its own is left as it is (a line in RV(_value.summary) says so).
options:
  _input:
    description: The backup files under O(backup_dir), as C(ansible.builtin.find) returns them with C(get_checksum).
    type: list
    elements: dict
    required: true
  pods:
    description: The names of the pods running now.
    type: list
    elements: str
    required: true
  namespace:
    description: Their namespace.
    type: str
    required: true
  backup_dir:
    description: The run's backup directory on the controller.
    type: str
    required: true
  pod_dir:
    description: The pod directory (C(<namespace>_<pod>)) whose backup goes into every pod without one of its own.
    type: str
    default: ''
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Decide which backup goes into which pod
  ansible.builtin.set_fact:
    plan: >-
      {{ found.files | inferops.vllm_dr.rollback_plan(['vllm-7d9c-abcde', 'vllm-7d9c-fghij'], namespace='vllm',
                                                       backup_dir='/var/backups/vllm_dr/run-42') }}
"""

RETURN = r"""
_value:
  description: What goes where, or why it cannot.
  type: dict
  contains:
    restores:
      description: >-
        One per pod served: C(target) (C(<namespace>/<pod>)), C(pod), C(source) (the pod directory), C(files) (the
        backup files to copy in), C(restore_from) (the C(.bak) file's name) and C(why).
      type: list
      elements: dict
    summary:
      description: One line per pod served or left as it is.
      type: list
      elements: str
    problems:
      description: One line per pod that cannot be served, with the fix; none may be restored when there is one.
      type: list
      elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._rollback import rollback_plan


class FilterModule:
    def filters(self):
        return {'rollback_plan': rollback_plan}
