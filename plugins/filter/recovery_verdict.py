# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: recovery_verdict
short_description: Whether a restored vLLM service needs the recovery, and why
version_added: 0.1.0
description:
  - The diagnosis verdict of the P(inferops.vllm_dr.restore#role) role, from the evidence it gathered.
  - Recovery is needed when the token cache is stale or damaged, when sessions match the sweep's selection rule, or
    when the refresh probe is not healthy.
  - Error lines in the service log since the restore count only when no live probe was made (no probe, or a skipped
    one), since they describe the past, which a healthy probe overrules.
options:
  _input:
    description:
      - The evidence, a dict with C(cache) (the worst result of M(inferops.vllm_dr.vllm_token_cache) inspecting the
        cache), C(sessions) (the report of M(inferops.vllm_dr.vllm_session_sweep)), C(probe) (the result of
        M(inferops.vllm_dr.vllm_refresh_probe), or a skipped task's result, or V(null)) and C(logs) (what
        P(inferops.vllm_dr.log_evidence#filter) found in the service log since the restore).
      - Optionally C(restart_pending), the text of the record a run leaves on the target before its first change and
        removes once the service restarted (V(null) when there is none). A record left behind by a run that was
        stopped between the two needs the recovery, whose restart then runs even when nothing else is left to purge.
    type: dict
    required: true
  select:
    description: The sweep's selection rule, named in the reason that counts the sessions to sweep.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Decide whether to purge
  ansible.builtin.set_fact:
    verdict: >-
      {{ {'cache': cache, 'sessions': sessions, 'probe': probe, 'logs': logs}
         | inferops.vllm_dr.recovery_verdict(select='expired') }}
"""

RETURN = r"""
_value:
  description: The verdict.
  type: dict
  contains:
    recovery_needed:
      description: Whether the recovery (purge, sweep, restart) is needed.
      type: bool
    reasons:
      description: Every reason it is needed, one line each; empty when it is not.
      type: list
      elements: str
    evidence:
      description:
        - The reasons the refresh probe did not make itself, one line each (what auto-repair rests on), a stale or
          damaged cache, sessions to sweep beyond the probe's own (C(sessions.watched_matched)), token error lines
          that are about other sessions than the probe's (C(logs.other_session_lines)).
      type: list
      elements: str
    probe_classification:
      description: The probe's classification, V(not probed) when no probe ran.
      type: str
    probe_refusal:
      description:
        - One line naming why the probe could not judge the refresh path and the setting to fix, when its answer was
          about the run's own setup (V(tls_error); V(unauthorized) with C(invalid_client) or C(unauthorized_client);
          V(unexpected) with HTTP 404 or 405). Such an answer is no reason for the recovery, and the purge role
          refuses before any change. V(null) otherwise (a probe whose module failed counts as not probed).
      type: str
    restart_pending:
      description:
        - The restart an earlier run left undone (C(run), C(since)), from the C(restart_pending) record; V(null) when
          there is none. C(unknown) where a damaged record does not say.
      type: dict
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.module_utils._recovery_verdict import recovery_verdict as _verdict


def recovery_verdict(evidence, select):
    try:
        return _verdict(evidence, select)
    except (KeyError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError(f'recovery_verdict: the evidence lacks or mistypes {exc}; pass the registered results '
                                 'of the cache inspection, the session report, the probe and the log evidence') from None


class FilterModule:
    def filters(self):
        return {'recovery_verdict': recovery_verdict}
