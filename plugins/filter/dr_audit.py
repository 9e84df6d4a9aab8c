# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: dr_audit
short_description: The readiness audit's verdict from the facts it gathered
version_added: 0.1.0
description:
  - For each prevention item of the incident write-up, whether the target has it, and what to change when not.
    P1 (a stateless token cache) is advice, never a failure. P2 C(refresh_on_startup) is set. P3 the on-disk cache
    is outside the paths snapshots include. P4 the alert rules on C(TokenRefreshError) and
    C(Invalid token in session state) are installed. FAQ 3 the refresh probe's session exists.
  - The score is the percentage of judged items (advice left out) that pass; the verdict is C(ready) when none
    failed. RV(_value.below_threshold) is true when the score is below O(fail_below).
options:
  _input:
    description:
      - The facts, a dict with C(cache) (C(path), C(exists)), C(store) (C(backend)), C(config) (C(path), C(text),
        the configuration file's content or V(null) when it could not be read), C(snapshot) (C(includes),
        C(excludes), lists of paths), C(rules) (a list of C(path), C(text), each a Prometheus rule file or
        PrometheusRule manifest, V(null) when unreadable) and C(probe) (C(refresh_url), C(session), C(found),
        V(null) when the store was not reached).
    type: dict
    required: true
  fail_below:
    description: The lowest score, a percentage, that passes.
    type: int
    default: 0
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Judge the target
  ansible.builtin.set_fact:
    vllm_dr_audit: "{{ facts | inferops.vllm_dr.dr_audit(fail_below=80) }}"
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    items:
      description: One per prevention item, with C(id), C(prevention), C(name), C(status) (V(pass), V(fail) or
        V(advice)), C(detail) and C(fix) (empty when nothing needs to change).
      type: list
      elements: dict
    failed:
      description: The names of the items that failed.
      type: list
      elements: str
    advice:
      description: The names of the items with advice.
      type: list
      elements: str
    score:
      description: Percentage of judged items that pass.
      type: int
    fail_below:
      description: The threshold given.
      type: int
    below_threshold:
      description: Whether the score is below the threshold.
      type: bool
    verdict:
      description: V(ready) or V(not ready).
      type: str
    counts:
      description: How many items there are (C(items)), how many failed (C(failed)) and were skipped (C(skipped)).
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._dr_audit import AuditError, verdict


def dr_audit(facts, fail_below=0):
    try:
        return verdict(facts, fail_below)
    except AuditError as exc:
        raise AnsibleFilterError('dr_audit: %s' % exc) from exc


class FilterModule:
    def filters(self):
        return {'dr_audit': dr_audit}
