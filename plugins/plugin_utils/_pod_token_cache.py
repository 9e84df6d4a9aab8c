# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The token cache in many pods at once (the vllm_pod_token_cache action): in each pod one of the collection's token
cache modules runs (vllm_token_cache_info reads the cache; vllm_token_cache purges it, writing its backup on the pod's
volume first), then each backup the module wrote is copied to the run's directory on the controller and checked against
the checksum the module reported. At most `limit` pods are worked on at a time.

Nothing here knows Ansible or kubectl. The caller gives two functions: `run(pod)`, which runs the module in a pod and
returns (rc, stdout, stderr), and `copy(pod, source, destination)`, which copies one file out of a pod and raises on
failure. Each pod's result has the shape a loop over the pods gives (`item`: the pod's inventory host, `failed`, and
`module_stderr` when no module result came back), and each copy's the shape of a fetch loop over the backups (`item`:
the pod's result and the backup's path), so that _rollout.purge_failures judges them as it judged those loops."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import file_digest


def module_result(rc: int, stdout, stderr) -> dict:
    """A module's result from its raw output, as Ansible reads it: the JSON object that starts a line of stdout (text
    before or after it is kept as a warning). No JSON object (the pod went away, kubectl exec failed, the interpreter is
    missing): a failure with the output kept in module_stdout and module_stderr."""
    out = stdout.decode('utf-8', 'replace') if isinstance(stdout, bytes) else str(stdout or '')
    err = stderr.decode('utf-8', 'replace') if isinstance(stderr, bytes) else str(stderr or '')
    decoder = json.JSONDecoder()
    offset = 0
    for line in out.splitlines(keepends=True):
        if line.lstrip().startswith('{'):
            start = offset + len(line) - len(line.lstrip())
            try:
                result, end = decoder.raw_decode(out, start)
            except ValueError:
                result = None
            if isinstance(result, dict):
                junk = (out[:start] + out[end:]).strip()
                if junk:
                    result.setdefault('warnings', []).append(f'Module invocation had junk around the JSON data: {junk}')
                return result
        offset += len(line)
    first = (err.strip().splitlines() or out.strip().splitlines() or [''])[-1]
    return {'failed': True, 'rc': rc, 'module_stdout': out, 'module_stderr': err,
            'msg': f'MODULE FAILURE: no result came back (rc {rc}){": " + first if first else ""}'}


def unwritable(directory: str) -> str:
    """Why the backups cannot be copied into `directory` on the controller ('' when they can): it is made (mode 0700)
    when missing, and a file is written in it and removed, before any pod's cache is purged."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix='.probe-'):
            pass
    except OSError as error:
        return f'{directory} cannot hold the backups: {error.strerror or error}'
    return ''


def copy_checked(copy, pod: str, source: str, destination: str, checksum: str | None, attempts: int = 3) -> int:
    """Copy `source` out of `pod` to `destination` (mode 0600, in a directory of mode 0700), whole or not at all, and
    return how many tries it took: a try that fails or differs from what the pod wrote (a stream cut or garbled on its
    way) is made again, up to `attempts` in all, and the last one's error is raised."""
    if checksum is None:
        raise ValueError(f'the module reported no checksum for {source}')
    os.makedirs(os.path.dirname(destination), mode=0o700, exist_ok=True)
    for attempt in range(1, attempts):
        try:
            _copy_once(copy, pod, source, destination, checksum)
            return attempt
        except Exception:  # pylint: disable=broad-exception-caught
            continue
    _copy_once(copy, pod, source, destination, checksum)
    return attempts


def _copy_once(copy, pod: str, source: str, destination: str, checksum: str) -> None:
    """One try: into a private directory beside `destination`, renamed into place only once its sha256 is `checksum`;
    the directory goes whatever happens."""
    scratch = tempfile.mkdtemp(prefix='.copy-', dir=os.path.dirname(destination))
    try:
        # kubernetes.core's kubectl connection writes <its directory>/<the source's name>, then renames it
        partial = os.path.join(scratch, os.path.basename(destination))
        copy(pod, source, partial)
        os.chmod(partial, 0o600)
        copied = file_digest(partial)
        if copied != checksum:
            raise ValueError(f'the copy of {source} has sha256 {copied}, the pod wrote {checksum}')
        os.replace(partial, destination)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_in_pods(pods: list, run, copy, destination, limit: int) -> tuple:
    """(the pods' results, in the order of `pods`; the copies of the backups they wrote, pod by pod, backup by backup).
    `destination(pod, path)` is where a backup goes on the controller. A pod's copies start as soon as its module
    returns, while other pods still run theirs. A copy that fails is a result with `failed` and `msg`; the backup stays
    on the pod's volume."""
    if limit < 1:
        raise ValueError(f'at most {limit} pods at a time: give 1 or more')

    def one(pod: str) -> tuple:
        try:
            output = run(pod)
        except Exception as error:  # pylint: disable=broad-exception-caught
            # the connection could not even run the module (an option it refused): no module result, as for a pod gone
            output = (None, b'', str(error).encode('utf-8', 'replace'))
        result = dict(module_result(*output), item=pod)
        result['failed'] = bool(result.get('failed'))
        copies = []
        if result.get('failed') or 'module_stderr' in result:
            return result, copies
        checksums = result.get('backup_checksums') or {}
        for path in result.get('backup_files') or []:
            target = destination(pod, path)
            try:
                tries = copy_checked(copy, pod, path, target, checksums.get(path))
            except Exception as error:  # pylint: disable=broad-exception-caught
                # the kubectl connection raises AnsibleError, a local write OSError, a mismatch ValueError
                message = (str(error).strip().splitlines() or [type(error).__name__])[0]
                copies.append({'item': [result, path], 'failed': True, 'msg': message})
            else:
                copies.append({'item': [result, path], 'changed': True, 'dest': target, 'checksum': checksums[path],
                               'attempts': tries})
        return result, copies

    with ThreadPoolExecutor(max_workers=min(limit, max(len(pods), 1))) as pool:
        done = list(pool.map(one, pods))
    return [pair[0] for pair in done], [copy for pair in done for copy in pair[1]]
