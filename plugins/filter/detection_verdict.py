# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: detection_verdict
short_description: What a scheduled, diagnose-only run concludes from the diagnosis
version_added: 0.1.0
description:
  - The refresh probe decides. C(healthy) means the refresh path works and nothing is to be done.
    C(stale) means the probe answered C(stale_token) every time it asked (the restore role asks again with
    backoff, and presents the session's new token when the service refreshed it meanwhile); the run fails.
  - It repairs, when O(auto_repair) is on, only on evidence independent of the probe, the diagnosis's C(evidence),
    a stale or damaged cache, sessions to sweep beyond the probe's own, token error lines from the service that
    are about other sessions. The probe session alone rejected is not repaired; the run fails and says so.
    C(inconclusive) means the probe gave no usable answer (unreachable, a server or TLS error, ...); the run fails
    with the probe's words, since it cannot tell either way.
  - Used by the playbook C(inferops.vllm_dr.dr_detect).
options:
  _input:
    description: The diagnosis the restore role publishes (C(vllm_dr_diagnosis)).
    type: dict
    required: true
  auto_repair:
    description: Whether the operator lets the run repair stale tokens (C(vllm_dr_auto_repair)).
    type: bool
    default: false
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Judge the detection
  ansible.builtin.set_fact:
    detection: "{{ vllm_dr_diagnosis | inferops.vllm_dr.detection_verdict(auto_repair=false) }}"
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    outcome:
      description: One of C(healthy), C(stale), C(inconclusive).
      type: str
    repair:
      description: Whether to run the purge, the restart and the validation now.
      type: bool
    failed:
      description: Whether the run ends non-zero.
      type: bool
    message:
      description: One line for the operator, with what to do.
      type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._detection import DetectionError, verdict


def detection_verdict(diagnosis, auto_repair=False):
    try:
        return verdict(diagnosis, auto_repair)
    except DetectionError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {'detection_verdict': detection_verdict}
