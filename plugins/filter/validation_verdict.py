# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: validation_verdict
short_description: Whether the recovery of a vLLM service worked, check by check
version_added: 0.1.0
description:
  - The verdict of the P(inferops.vllm_dr.validate#role) role, from the proofs it gathered. Four checks, each with a
    name, whether it passed and a one-line detail.
  - The service answers C(/healthz) with 200 (a run without a health URL fails this check). No token error line was
    logged since the restart. No session expires in the past. The refresh probe is healthy.
options:
  _input:
    description:
      - The proofs, a dict with C(health) (the result of the C(/healthz) wait, possibly skipped), C(health_url) (the
        health endpoint, empty when none), C(logs) (what P(inferops.vllm_dr.log_evidence#filter) found since the
        restart), C(sessions) (the report of M(inferops.vllm_dr.vllm_session_sweep) with
        O(inferops.vllm_dr.vllm_session_sweep#module:select=expired)) and C(probe) (the result of
        M(inferops.vllm_dr.vllm_refresh_probe), a skipped task's result, or V(null)).
    type: dict
    required: true
  check_mode:
    description: Whether the run is a dry run; recorded in the verdict.
    type: bool
    default: false
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Judge the checks
  ansible.builtin.set_fact:
    validation: >-
      {{ {'health': health, 'health_url': 'http://127.0.0.1:8000/healthz', 'logs': logs, 'sessions': fresh,
          'probe': probe} | inferops.vllm_dr.validation_verdict(check_mode=ansible_check_mode) }}
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    checks:
      description: Each check as C(name), C(ok) and C(detail).
      type: list
      elements: dict
    failed:
      description: The names of the checks that did not pass; empty when the recovery worked.
      type: list
      elements: str
    check_mode:
      description: Whether the run was a dry run.
      type: bool
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._validation_verdict import validation_verdict as _verdict


def validation_verdict(evidence, check_mode=False):
    try:
        return _verdict(evidence, check_mode)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError(f'validation_verdict: the proofs lack or mistype {exc}; pass the registered results '
                                 'of the health wait, the log evidence, the session report and the probe') from None


class FilterModule:
    def filters(self):
        return {'validation_verdict': validation_verdict}
