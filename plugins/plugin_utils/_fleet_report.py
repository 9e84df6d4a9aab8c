# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The fleet report: every target of one run with its verdict, as data, JUnit XML and Markdown.

Private helper of the inferops.vllm_dr collection; not a public API.
"""

from __future__ import annotations

import os
from xml.sax.saxutils import escape, quoteattr

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._validation_verdict import (
    FAILED, NOT_JUDGED, PASSED, STOPPED, run_verdict)

NOT_VALIDATED = 'not validated'  # the run's tags left the validation out

NO_REPORT = ('stopped before writing its report (the target became unreachable, or the run was interrupted); '
             'see the run\'s output for this target')


def target_verdict(target: dict, *, validated: bool) -> dict:
    """One target's line of the fleet report.

    `target`: `host`, and what the target left behind: `validation` (the validate role's verdict, also written by
    its stopped_run entry point when a step failed before validation), `diagnosis`, `platform`, `report` (the path of
    its JSON report), `report_dir` (where its report was to go), `failure` (the step that failed and why, recorded
    when the run was rescued; it fails the target also after a passing validation), `started_at`.
    `validated`: whether the run's tags included the validation (a diagnosis-only run leaves no verdict).
    """
    validation = target.get('validation')
    failure = target.get('failure')
    diagnosis = target.get('diagnosis') or {}
    verdict = run_verdict(validation) if isinstance(validation, dict) else None
    if verdict and verdict['outcome'] in (FAILED, STOPPED):
        status, reason = FAILED, verdict['reason']
    elif failure:
        # a step that failed after a passing validation (its report not written, its metrics not exported) fails
        # the target too: the run did not do all it was asked
        status, reason = FAILED, f"failed at step '{failure.get('step')}': {failure.get('reason')}"
    elif verdict:
        status, reason = verdict['outcome'], verdict['reason']
    elif validated:
        status, reason = FAILED, NO_REPORT
    else:
        status, reason = NOT_VALIDATED, "the run's tags left the validation out"
    return {
        'host': str(target['host']),
        'status': status,
        'reason': reason,
        'platform': diagnosis.get('platform') or target.get('platform') or 'host',
        'recovery_needed': diagnosis.get('recovery_needed'),
        'started_at': target.get('started_at'),
        'report': target.get('report'),
    }


def fleet_report(targets: list, *, validated: bool, generated_at: str) -> dict:
    """The verdict of every target of the run, in the order given, and of the fleet: passed when no target failed."""
    lines = [target_verdict(target, validated=validated) for target in targets or []]
    counts = {status: sum(1 for line in lines if line['status'] == status)
              for status in (PASSED, FAILED, NOT_JUDGED, NOT_VALIDATED)}
    reports = [line['report'] for line in lines if line['report']]
    report_dirs = [target.get('report_dir') for target in targets or [] if target.get('report_dir')]
    return {
        'generated_at': generated_at,
        'passed': counts[FAILED] == 0,
        'total': len(lines),
        'counts': counts,
        'failed': [line['host'] for line in lines if line['status'] == FAILED],
        'targets': lines,
        # where the targets' reports went (the first one's directory), else where they were to go: the fleet report
        # goes beside them by default
        'report_dir': os.path.dirname(reports[0]) if reports else (report_dirs[0] if report_dirs else None),
    }


def fleet_junit(fleet: dict) -> str:
    """One test case per target; a failed target is a failure, one not judged or not validated is skipped."""
    counts = fleet['counts']
    skipped = counts[NOT_JUDGED] + counts[NOT_VALIDATED]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f'<testsuites name="vllm_dr.fleet" tests="{fleet["total"]}" failures="{counts[FAILED]}">',
             f'  <testsuite name="vllm_dr.fleet" tests="{fleet["total"]}" failures="{counts[FAILED]}" errors="0" '
             f'skipped="{skipped}" timestamp={quoteattr(str(fleet["generated_at"]))}>']
    for line in fleet['targets']:
        lines.append(f'    <testcase classname="vllm_dr.fleet" name={quoteattr(line["host"])}>')
        if line['status'] == FAILED:
            lines.append(f'      <failure message={quoteattr(line["reason"])}>{escape(line["reason"])}</failure>')
        elif line['status'] != PASSED:
            lines.append(f'      <skipped message={quoteattr(line["status"] + ": " + line["reason"])}/>')
        report = f'; report: {line["report"]}' if line['report'] else ''
        lines.append(f'      <system-out>{escape(line["status"] + ": " + line["reason"] + report)}</system-out>')
        lines.append('    </testcase>')
    lines += ['  </testsuite>', '</testsuites>', '']
    return '\n'.join(lines)


def _cell(text) -> str:
    return str('' if text is None else text).replace('\\', '\\\\').replace('|', '\\|').replace('\n', ' ')


def fleet_markdown(fleet: dict) -> str:
    counts = fleet['counts']
    title = 'PASSED' if fleet['passed'] else 'FAILED'
    lines = [f'# vLLM token recovery, fleet of {fleet["total"]}: {title}', '',
             f'{counts[PASSED]} passed, {counts[FAILED]} failed, {counts[NOT_JUDGED]} not judged (check mode), '
             f'{counts[NOT_VALIDATED]} not validated; generated at {fleet["generated_at"]}.', '',
             '| Target | Platform | Result | Reason | Report |', '| --- | --- | --- | --- | --- |']
    for line in fleet['targets']:
        result = 'FAIL' if line['status'] == FAILED else line['status']
        lines.append(f'| {_cell(line["host"])} | {_cell(line["platform"])} | {result} | {_cell(line["reason"])} | '
                     f'{_cell(line["report"] or "none")} |')
    return '\n'.join(lines) + '\n'
