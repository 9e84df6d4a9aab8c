# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The validation verdict as Prometheus metrics: a node-exporter textfile (and a Pushgateway body).

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import math
import re

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_verdict import run_verdict

SUCCESS = 'vllm_dr_validation_success'
CHECK_SUCCESS = 'vllm_dr_validation_check_success'
LAST_RUN = 'vllm_dr_validation_last_run_timestamp_seconds'
LAST_SUCCESS = 'vllm_dr_validation_last_success_timestamp_seconds'

HELP = {
    SUCCESS: '1 when the last validation of the vLLM token recovery passed, 0 when a check failed.',
    CHECK_SUCCESS: 'Result of each check of the last validation: 1 passed, 0 failed.',
    LAST_RUN: 'Unix time the last validation ran.',
    LAST_SUCCESS: 'Unix time of the last validation that passed (kept from the previous file when this one failed).',
}


class MetricsError(ValueError):
    """The validation result cannot be written as metrics."""


def check_label(name: str) -> str:
    """A check's name as a short label value: 'service answers /healthz' -> 'service_answers_healthz'."""
    return re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')


def _escape(value: str) -> str:
    return value.replace('\\', '\\\\').replace('\n', '\\n').replace('"', '\\"')


def _number(value) -> str:
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


def previous_last_success(text):
    """The last-success time a previous textfile recorded, or None (no file, no such sample, or not a number)."""
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == LAST_SUCCESS:
            try:
                value = float(parts[1])
            except ValueError:
                return None
            return value if math.isfinite(value) and value > 0 else None
    return None


def _checks(validation) -> list:
    if not isinstance(validation, dict) or not isinstance(validation.get('checks'), list):
        raise MetricsError('the validation result has no list of checks; pass vllm_dr_validation as the validate role set it')
    checks = []
    for check in validation['checks']:
        if not isinstance(check, dict) or not isinstance(check.get('name'), str) or 'ok' not in check:
            raise MetricsError('every check needs a name and an ok; pass vllm_dr_validation as the validate role set it')
        checks.append((check_label(check['name']), bool(check['ok'])))
    labels = [label for label, _ok in checks]
    if len(set(labels)) != len(labels):
        raise MetricsError('two checks have the same name once written as a label: %s' % ', '.join(sorted(labels)))
    return checks


def render(validation, now, previous_text=None) -> str:
    """The node-exporter textfile for one validation run at ``now`` (Unix seconds).

    Passed (the run's verdict): success 1 and last success ``now``. Otherwise (a check failed, none was made, the
    run stopped before validation): success 0, and the last success a previous
    file recorded is carried over, so an alert on "no successful drill for N days" survives failed runs.
    """
    checks = _checks(validation)
    try:
        now = float(now)
    except (TypeError, ValueError) as exc:
        raise MetricsError('the run time must be Unix seconds, got %r' % (now,)) from exc
    passed = run_verdict(validation)['passed']
    last_success = now if passed else previous_last_success(previous_text)
    samples = [(SUCCESS, [('', int(passed))]),
               (CHECK_SUCCESS, [('{check="%s"}' % _escape(label), int(ok)) for label, ok in checks]),
               (LAST_RUN, [('', now)])]
    if last_success is not None:
        samples.append((LAST_SUCCESS, [('', last_success)]))
    lines = []
    for name, values in samples:
        if not values:
            continue
        lines += ['# HELP %s %s' % (name, HELP[name]), '# TYPE %s gauge' % name]
        lines += ['%s%s %s' % (name, labels, _number(value)) for labels, value in values]
    return '\n'.join(lines) + '\n'
