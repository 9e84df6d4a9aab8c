# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: velero_restored_at
short_description: When Velero last restored the workload
version_added: 0.1.0
description:
  - The latest C(status.completionTimestamp) of the Velero Restores in a terminal phase (C(Completed),
    C(PartiallyFailed), C(Failed)); an empty string when none finished.
options:
  _input:
    description: The Velero Restores, as kubernetes.core.k8s_info returns them.
    type: list
    elements: dict
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The restore time
  ansible.builtin.set_fact:
    restored_at: "{{ restores.resources | inferops.vllm_dr.velero_restored_at }}"
"""

RETURN = r"""
_value:
  description: The time, RFC 3339, or an empty string.
  type: str
"""

from ansible_collections.inferops.vllm_dr.plugins.module_utils._velero import restored_at


class FilterModule:
    def filters(self):
        return {'velero_restored_at': restored_at}
