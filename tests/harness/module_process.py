"""vllm_session_sweep run as Ansible runs it, in a process of its own (a file-size limit or a kill hits the module alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE = os.path.join(ROOT, 'plugins', 'modules', 'vllm_session_sweep.py')
COLLECTIONS = os.path.join(ROOT, 'build', 'collections')


def run_sweep(tmp_path, server, prefix=(), **args):
    """The module's result (with ``_rc``) from a process of its own; ``prefix`` wraps the command (prlimit)."""
    return wait_sweep(start_sweep(tmp_path, server, prefix, **args))


def start_sweep(tmp_path, server, prefix=(), **args):
    if server is not None and args.get('backend', 'redis') in ('redis', 'redis_cluster'):
        args.setdefault('login_host', '127.0.0.1')
        args.setdefault('login_port', server.port)
    args_file = tmp_path / f'args-{time.monotonic_ns()}.json'
    args_file.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': args}))
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    return subprocess.Popen(list(prefix) + [sys.executable, MODULE, str(args_file)], env=env,  # pylint: disable=consider-using-with
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_sweep(process):
    out, err = process.communicate(timeout=600)
    try:
        result = json.loads(out)
    except ValueError:
        pytest.fail(f'the module printed no result (rc {process.returncode}): {out[-2000:]!r} {err[-2000:]!r}')
    result['_rc'] = process.returncode
    return result
