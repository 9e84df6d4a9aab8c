# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: pod_log_lines
short_description: One pod's lines in the output of kubectl logs --prefix
version_added: 0.2.0
description:
  - The lines C(kubectl logs --prefix) marked C([pod/<pod>/<container>]) for the pod given, without the mark.
options:
  _input:
    description: The output's lines.
    type: list
    elements: str
    required: true
  pod:
    description: The pod's name; without it, the lines of every pod.
    type: str
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The lines of one pod
  ansible.builtin.set_fact:
    lines: "{{ logs.stdout_lines | inferops.vllm_dr.pod_log_lines('vllm-7d9c-abcde') }}"
"""

RETURN = r"""
_value:
  description: The pod's lines, in order.
  type: list
  elements: str
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._kubectl_logs import pod_log_lines as _lines


def pod_log_lines(lines, pod=None):
    return _lines(lines, pod)


class FilterModule:
    def filters(self):
        return {'pod_log_lines': pod_log_lines}
