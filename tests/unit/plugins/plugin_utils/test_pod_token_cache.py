"""The purge in many pods at once: bounded, in order, every backup copied whole and checked or named as not copied."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

import pytest

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._pod_token_cache import module_result, run_in_pods, unwritable


class Pods:
    """Pods whose volumes are directories here: `purge` writes a backup in the pod's directory and answers as the
    module does; `copy` copies a file out of it. Counts how many purges run at once."""

    def __init__(self, root, names, seconds=0.0):
        self.root, self.seconds, self.lock = str(root), seconds, threading.Lock()
        self.running = self.most = 0
        self.order = []
        for name in names:
            os.makedirs(os.path.join(self.root, name))

    def purge(self, pod):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.order.append(pod)
        try:
            time.sleep(self.seconds)
            backup = os.path.join(self.root, pod, 'token_cache.db.bak')
            with open(backup, 'wb') as handle:
                handle.write(f'tokens of {pod}'.encode())
            with open(backup, 'rb') as handle:
                checksum = hashlib.sha256(handle.read()).hexdigest()
            answer = {'changed': True, 'backup_files': [backup], 'backup_checksums': {backup: checksum},
                      'removed_files': [f'/cache/{pod}']}
            return 0, json.dumps(answer).encode(), b''
        finally:
            with self.lock:
                self.running -= 1

    @staticmethod
    def copy(pod, source, target):
        del pod
        with open(source, 'rb') as read, open(target, 'wb') as write:
            write.write(read.read())


def destination(root):
    return lambda pod, path: os.path.join(str(root), f'ns_{pod}', os.path.basename(path))


def test_no_more_pods_than_the_limit_are_purged_at_once_and_the_results_keep_the_pods_order(tmp_path):
    names = [f'vllm-{index}' for index in range(9)]
    pods = Pods(tmp_path / 'pods', names, seconds=0.2)
    started = time.monotonic()
    results, copies = run_in_pods(names, pods.purge, pods.copy, destination(tmp_path / 'run'), limit=3)
    assert pods.most == 3
    assert time.monotonic() - started < 9 * 0.2  # side by side, not one after the other
    assert [result['item'] for result in results] == names
    assert [copy['item'][0]['item'] for copy in copies] == names
    for name, copy in zip(names, copies):
        assert copy['dest'] == str(tmp_path / 'run' / f'ns_{name}' / 'token_cache.db.bak')
        with open(copy['dest'], 'rb') as handle:
            assert handle.read() == f'tokens of {name}'.encode()
        assert oct(os.stat(copy['dest']).st_mode & 0o777) == '0o600'
        assert oct(os.stat(os.path.dirname(copy['dest'])).st_mode & 0o777) == '0o700'


def test_a_limit_of_one_purges_the_pods_one_after_the_other_in_order(tmp_path):
    names = ['vllm-2', 'vllm-0', 'vllm-1']
    pods = Pods(tmp_path / 'pods', names, seconds=0.05)
    run_in_pods(names, pods.purge, pods.copy, destination(tmp_path / 'run'), limit=1)
    assert pods.most == 1 and pods.order == names


def test_a_copy_that_differs_from_what_the_pod_wrote_is_tried_again_then_named_and_never_kept(tmp_path):
    pods = Pods(tmp_path / 'pods', ['vllm-0', 'vllm-1'])
    tries = []

    def torn(pod, source, target):
        Pods.copy(pod, source, target)
        if pod == 'vllm-1':
            tries.append(target)
            with open(target, 'ab') as handle:
                handle.write(b'!')
    results, copies = run_in_pods(['vllm-0', 'vllm-1'], pods.purge, torn, destination(tmp_path / 'run'), limit=2)
    assert [result['failed'] for result in results] == [False, False]
    assert copies[0]['attempts'] == 1 and copies[1]['failed'] is True
    assert len(tries) == 3
    assert copies[1]['msg'].startswith(f"the copy of {results[1]['backup_files'][0]} has sha256 ")
    assert copies[1]['item'] == [results[1], results[1]['backup_files'][0]]
    # nothing half-copied is left beside the good copies, not even the tries' own directories
    assert os.listdir(tmp_path / 'run' / 'ns_vllm-1') == []


def test_a_copy_cut_on_its_way_once_is_kept_on_the_second_try(tmp_path):
    pods = Pods(tmp_path / 'pods', ['vllm-0'])
    tries = []

    def cut_once(pod, source, target):
        tries.append(target)
        Pods.copy(pod, source, target)
        if len(tries) == 1:
            with open(target, 'r+b') as handle:
                handle.truncate(3)
    results, copies = run_in_pods(['vllm-0'], pods.purge, cut_once, destination(tmp_path / 'run'), limit=1)
    assert copies[0]['attempts'] == 2 and copies[0]['dest'] == str(tmp_path / 'run' / 'ns_vllm-0' / 'token_cache.db.bak')
    assert os.listdir(tmp_path / 'run' / 'ns_vllm-0') == ['token_cache.db.bak']
    with open(copies[0]['dest'], 'rb') as handle:
        assert handle.read() == b'tokens of vllm-0'
    assert results[0]['item'] == 'vllm-0'


def test_a_pod_that_gives_no_result_has_its_output_kept_and_its_copies_are_not_tried(tmp_path):
    pods = Pods(tmp_path / 'pods', ['vllm-0'])

    def gone(pod):
        if pod == 'vllm-1':
            return 1, b'', b'Error from server (NotFound): pods "vllm-1" not found\n'
        return pods.purge(pod)
    results, copies = run_in_pods(['vllm-0', 'vllm-1'], gone, pods.copy, destination(tmp_path / 'run'), limit=2)
    assert results[1]['item'] == 'vllm-1' and results[1]['failed'] is True
    assert results[1]['module_stderr'].startswith('Error from server (NotFound)')
    assert 'pods "vllm-1" not found' in results[1]['msg']
    assert [copy['item'][0]['item'] for copy in copies] == ['vllm-0']


def test_a_copy_that_fails_names_its_first_line_and_the_connection_error_does_not_stop_the_others(tmp_path):
    pods = Pods(tmp_path / 'pods', ['vllm-0', 'vllm-1'])

    def refused(pod, source, target):
        if pod == 'vllm-0':
            raise RuntimeError('failed to transfer file to /x\nmore')
        Pods.copy(pod, source, target)
    dummy, copies = run_in_pods(['vllm-0', 'vllm-1'], pods.purge, refused, destination(tmp_path / 'run'), limit=2)
    assert copies[0] == {'item': copies[0]['item'], 'failed': True, 'msg': 'failed to transfer file to /x'}
    assert os.listdir(tmp_path / 'run' / 'ns_vllm-0') == []
    assert 'dest' in copies[1]


def test_a_connection_that_cannot_run_the_module_counts_as_no_result(tmp_path):
    def broken(pod):
        raise ValueError(f'no kubectl for {pod}')
    results, copies = run_in_pods(['vllm-0'], broken, Pods.copy, destination(tmp_path), limit=1)
    assert results[0]['failed'] is True and 'no kubectl for vllm-0' in results[0]['module_stderr'] and copies == []


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match='give 1 or more'):
        run_in_pods(['vllm-0'], None, None, None, limit=0)


@pytest.mark.parametrize(('stdout', 'expected', 'junk'), [
    (b'{"changed": true}\n', {'changed': True}, None),
    (b'node/kwok-node-0 cordoned\n{"changed": false}\n', {'changed': False}, 'node/kwok-node-0 cordoned'),
    (b'{"changed": false}\ntrailing\n', {'changed': False}, 'trailing'),
])
def test_the_module_result_is_the_json_object_on_a_line_of_its_own_and_junk_is_a_warning(stdout, expected, junk):
    result = module_result(0, stdout, b'')
    warnings = result.pop('warnings', [])
    assert result == expected
    assert warnings == ([f'Module invocation had junk around the JSON data: {junk}'] if junk else [])


def test_no_json_is_a_failure_with_the_last_line_of_stderr():
    result = module_result(127, b'', b'sh: 1: python3: not found\n')
    assert result == {'failed': True, 'rc': 127, 'module_stdout': '', 'module_stderr': 'sh: 1: python3: not found\n',
                      'msg': 'MODULE FAILURE: no result came back (rc 127): sh: 1: python3: not found'}


def test_a_destination_that_is_missing_is_made_private_and_one_that_cannot_be_written_is_named(tmp_path):
    made = tmp_path / 'run' / 'backups'
    assert unwritable(str(made)) == ''
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o700 and not list(made.iterdir())
    blocked = tmp_path / 'a-file'
    blocked.write_text('not a directory')
    problem = unwritable(str(blocked / 'backups'))
    assert problem.startswith(f'{blocked / "backups"} cannot hold the backups: ') and 'directory' in problem.lower()
    if os.geteuid() != 0:
        locked = tmp_path / 'locked'
        locked.mkdir(mode=0o500)
        assert 'Permission denied' in unwritable(str(locked))
