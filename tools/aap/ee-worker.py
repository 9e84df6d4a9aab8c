"""receptor's work-command for the AWX test, in place of the execution environment's container.

AWX 24 runs every job as `ansible-runner worker` inside its execution environment's image (podman): the first line
of the job's stream asks ansible-runner for process isolation in that image, and the command line and the injected
files name the image's paths (/runner/...). This machine cannot run containers, so this wrapper, run by the Python
of the environment the EE definition installs (the one thing the test changes from a real AAP):
  - turns process isolation off in that first line (process_isolation and the container_* kwargs);
  - runs the worker in a mount namespace of its own, where /runner is the job's private data directory;
  - puts that environment's bin directory first on PATH, so ansible-playbook and its modules are the EE's.
Everything else (the stream, the events, the artifacts, the status) is ansible-runner's own.
    python ee-worker.py worker --private-data-dir=DIR      (as receptor calls it)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

CONTAINER_KWARGS = ('process_isolation_executable', 'container_image', 'container_options',
                    'container_volume_mounts', 'container_auth_data')
NAMESPACE_MARK = 'VLLM_DR_EE_WORKER_NAMESPACE'


def private_data_dir(argv: list) -> str:
    for index, arg in enumerate(argv):
        if arg.startswith('--private-data-dir='):
            return arg.split('=', 1)[1]
        if arg == '--private-data-dir' and index + 1 < len(argv):
            return argv[index + 1]
    raise SystemExit('ee-worker: no --private-data-dir in the worker command line')


def without_isolation(line: bytes) -> bytes:
    """The stream's first line with process isolation off; any other line unchanged."""
    try:
        data = json.loads(line)
    except ValueError:
        return line
    if not isinstance(data, dict) or not isinstance(data.get('kwargs'), dict):
        return line
    data['kwargs']['process_isolation'] = False
    for name in CONTAINER_KWARGS:
        data['kwargs'].pop(name, None)
    return (json.dumps(data) + '\n').encode()


def main() -> int:
    argv = sys.argv[1:]
    if os.environ.get(NAMESPACE_MARK) != '1':
        # the mount point the EE image has; empty outside the job's namespace
        os.makedirs('/runner', exist_ok=True)
        env = dict(os.environ, **{NAMESPACE_MARK: '1'})
        os.execvpe('unshare', ['unshare', '--mount', '--propagation', 'private', sys.executable,
                               os.path.abspath(__file__)] + argv, env)
    directory = private_data_dir(argv)
    os.makedirs(directory, exist_ok=True)
    subprocess.run(['mount', '--bind', directory, '/runner'], check=True)
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=f'{bindir}:{os.environ.get("PATH", "/usr/bin:/bin")}')
    env.pop(NAMESPACE_MARK, None)
    stdin = sys.stdin.buffer
    with subprocess.Popen([os.path.join(bindir, 'ansible-runner')] + argv, stdin=subprocess.PIPE, env=env) as worker:
        try:
            worker.stdin.write(without_isolation(stdin.readline()))
            shutil.copyfileobj(stdin, worker.stdin)
        except BrokenPipeError:
            pass
        finally:
            try:
                worker.stdin.close()
            except BrokenPipeError:
                pass
        return worker.wait()


if __name__ == '__main__':
    sys.exit(main())
