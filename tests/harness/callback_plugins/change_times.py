"""A test-only callback: when each task starts and ends on each host, one JSON line per event, appended to the file
named by CHANGE_TIMES_PATH and tagged with CHANGE_TIMES_RUN, so that tests can tell when runs changed the target."""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: change_times
type: aggregate
short_description: Record when each task starts and ends (tests only)
description:
  - Appends one JSON line per task start and end to the file named by the environment variable CHANGE_TIMES_PATH.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'change_times'
    CALLBACK_NEEDS_ENABLED = True

    def _write(self, event: str, host, task, result=None) -> None:
        path = os.environ.get('CHANGE_TIMES_PATH')
        if not path:
            return
        line = {'run': os.environ.get('CHANGE_TIMES_RUN', ''), 'event': event, 't': time.time(),
                'host': host.get_name(), 'task': task.get_name(), 'action': task.action}
        if result is not None:
            line['changed'] = bool(result._result.get('changed'))  # pylint: disable=protected-access
        with open(path, 'a', encoding='utf-8') as handle:
            handle.write(json.dumps(line) + '\n')
            handle.flush()
            os.fsync(handle.fileno())

    def v2_runner_on_start(self, host, task):
        self._write('start', host, task)

    def v2_runner_on_ok(self, result):
        self._write('ok', result._host, result._task, result)  # pylint: disable=protected-access

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._write('failed', result._host, result._task, result)  # pylint: disable=protected-access

    def v2_runner_on_skipped(self, result):
        self._write('skipped', result._host, result._task, result)  # pylint: disable=protected-access
