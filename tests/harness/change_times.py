"""Runs of the runbook started in the background, and when each of them changed the target: the change_times
callback (callback_plugins/change_times.py) records when every task started and ended, and a change is a task of a
module that changes the target (the cache, the configuration, the sessions, the restart) that changed it, failed, or
never ended (its run was killed)."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess

from harness.playbooks import BIN, ROOT

CALLBACKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'callback_plugins')
# the modules that change a target (the lock's own module and the reports are no change to it)
CHANGING = {'vllm_token_cache', 'copy', 'yaml_set', 'vllm_session_sweep', 'command', 'systemd_service'}


class Run:
    """ansible-playbook started in a process group of its own (so that kill() ends it all, as a kill -9 of the
    controller would), its events recorded as run `name` in `times_path`."""

    def __init__(self, name: str, inventory: str, times_path: str, playbook: str, *extra: str):
        self.name, self.times_path = name, times_path
        env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_FORCE_COLOR='0',
                   ANSIBLE_CALLBACK_PLUGINS=CALLBACKS, ANSIBLE_CALLBACKS_ENABLED='change_times',
                   CHANGE_TIMES_PATH=times_path, CHANGE_TIMES_RUN=name)
        self.log_path = f'{times_path}.{name}.log'
        self._log = open(self.log_path, 'w', encoding='utf-8')  # pylint: disable=consider-using-with
        self.process = subprocess.Popen(  # pylint: disable=consider-using-with
            [os.path.join(BIN, 'ansible-playbook'), '-i', inventory, os.path.join(ROOT, 'playbooks', playbook),
             *extra], stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.killed_at = None

    def wait(self, timeout: float = 600) -> tuple:
        rc = self.process.wait(timeout=timeout)
        self._log.close()
        with open(self.log_path, encoding='utf-8') as handle:
            return rc, handle.read()

    def kill(self) -> None:
        """kill -9 of the whole run: ansible-playbook, its workers and the modules they run."""
        self.killed_at = datetime.datetime.now(datetime.timezone.utc).timestamp()
        os.killpg(self.process.pid, signal.SIGKILL)
        self.wait()

    def events(self) -> list:
        return [event for event in read_events(self.times_path) if event['run'] == self.name]

    def changes(self) -> list:
        """[(start, end, task)] of each change this run made to the target, in order."""
        starts, changes = {}, []
        for event in self.events():
            if event['action'].split('.')[-1] not in CHANGING:
                continue
            key = (event['host'], event['task'])
            if event['event'] == 'start':
                starts[key] = event['t']
            elif key in starts:
                begun = starts.pop(key)
                if event['event'] == 'failed' or event.get('changed'):
                    changes.append((begun, event['t'], event['task']))
        # a change under way when the run was killed lasted until the kill
        changes += [(begun, self.killed_at, key[1]) for key, begun in starts.items() if self.killed_at]
        return sorted(changes)


def read_events(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as handle:
        return [json.loads(line) for line in handle if line.strip()]


def moment(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime('%H:%M:%S.%f')[:-3]


def overlaps(runs) -> list:
    """Pairs of changes of two different runs whose times overlap."""
    found = []
    for index, first in enumerate(runs):
        for second in runs[index + 1:]:
            for a in first.changes():
                for b in second.changes():
                    if a[0] < b[1] and b[0] < a[1]:
                        found.append((first.name, a, second.name, b))
    return found
