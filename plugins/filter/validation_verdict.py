# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: validation_verdict
short_description: Whether the recovery of a vLLM service worked, check by check, and the run's verdict
version_added: 0.1.0
description:
  - The verdict of the P(inferops.vllm_dr.validate#role) role, from the proofs it gathered. Four checks, each with a
    name, whether it passed and a one-line detail.
  - The service answers C(/healthz) with 200 (a run without a health URL fails this check). No token error line was
    logged since the restart. No session expires in the past. The refresh probe is healthy.
  - The run's verdict, the one the reports, the summary, C(set_stats), the metrics and the fleet report print - V(passed),
    V(failed) (a check failed), V(not judged) (check mode) or V(stopped) (a step failed before the validation, see
    O(stopped)) - with its reason.
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
    description: Whether the run is a dry run; its verdict is then V(not judged).
    type: bool
    default: false
  stopped:
    description:
      - The step that stopped the run before the validation, a dict with C(step) (the failed task's name) and
        C(reason) (why it failed). The verdict is then V(stopped), with one failed check, V(the runbook reached
        validation), that names the step; the proofs are not read (pass V({})).
    type: dict
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
    stopped:
      description: Whether a step failed before the validation (only with O(stopped)).
      type: bool
    outcome:
      description: The run's verdict, one of V(passed), V(failed), V(not judged), V(stopped).
      type: str
    passed:
      description: Whether the outcome is V(passed).
      type: bool
    reason:
      description: Why, in one line (each failed check with its detail, or how many checks passed).
      type: str
    result:
      description: >-
        What the reports print as the result, V(PASSED), V(FAILED), V(check mode, not judged) or
        V(FAILED, stopped before validation).
      type: str
    counts:
      description: How many checks were made (C(checks)) and how many of them failed (C(failed)).
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_verdict import (
    run_verdict, stopped_validation, validation_verdict as _verdict)


def validation_verdict(evidence, check_mode=False, stopped=None):
    if stopped is not None:
        if not isinstance(stopped, dict) or not stopped.get('step'):
            raise AnsibleFilterError('validation_verdict: stopped needs the step that failed; pass '
                                     "{'step': ansible_failed_task.name, 'reason': ansible_failed_result.msg}")
        validation = stopped_validation(stopped['step'], stopped.get('reason') or 'failed', check_mode)
    else:
        try:
            validation = _verdict(evidence, check_mode)
        except (KeyError, TypeError, AttributeError) as exc:
            raise AnsibleFilterError(f'validation_verdict: the proofs lack or mistype {exc}; pass the registered '
                                     'results of the health wait, the log evidence, the session report and the '
                                     'probe') from None
    validation.update(run_verdict(validation))
    return validation


class FilterModule:
    def filters(self):
        return {'validation_verdict': validation_verdict}
