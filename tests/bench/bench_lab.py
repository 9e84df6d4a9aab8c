"""Benchmark: seconds from lab start to the first healthy refresh probe (make bench-lab).

Starts the lab (redis-server, the identity provider, the gateway) in a temporary
directory, then runs vllm_refresh_probe through ansible with expect=healthy, and
reports both durations; the lab is stopped afterwards. Target: under 5 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tests'))

from lab.labctl import Lab  # noqa: E402  pylint: disable=wrong-import-position


def main() -> int:
    work = tempfile.mkdtemp(prefix='vllm-dr-bench-lab-')
    lab = Lab(os.path.join(work, 'lab'))
    env = dict(os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_STDOUT_CALLBACK='minimal',
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, 'build', 'collections'),
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    try:
        start = time.monotonic()
        lab.up()
        up = time.monotonic() - start
        args = (f'url={lab.gateway_url}/api/v1/refresh_token health_url={lab.gateway_url}/healthz session_id=svc '
                f'login_host=127.0.0.1 login_port={lab.state["ports"]["redis"]} expect=healthy')
        out = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'ansible'), 'localhost', '-m',
                              'inferops.vllm_dr.vllm_refresh_probe', '-a', args],
                             capture_output=True, text=True, env=env, check=False)
        total = time.monotonic() - start
        result = json.loads(out.stdout.split('=>', 1)[1]) if '=>' in out.stdout else {}
        print(f'lab up: {up:.2f}s; first probe: {result.get("classification")} after {total:.2f}s from lab start '
              f'(probe itself {total - up:.2f}s, refresh {result.get("elapsed_ms")} ms)')
        return 0 if result.get('classification') == 'healthy' and total < 5 else 1
    finally:
        lab.down()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
