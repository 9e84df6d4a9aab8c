"""Run the collection's playbooks the way an operator does: ansible-playbook in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def playbook(inventory: str, name: str = 'dr_restore.yml', *extra: str, env: dict | None = None) -> tuple:
    """(exit code, stdout + stderr) of ansible-playbook playbooks/<name> -i inventory extra..."""
    env = dict(env or os.environ, ANSIBLE_NOCOLOR='1', ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_FORCE_COLOR='0')
    out = subprocess.run([os.path.join(BIN, 'ansible-playbook'), '-i', inventory,
                          os.path.join(ROOT, 'playbooks', name)] + list(extra),
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    return out.returncode, out.stdout + out.stderr


def recap(output: str, host: str = 'lab') -> dict:
    match = re.search(rf'^{re.escape(host)}\s+:\s+(.*)$', output, re.MULTILINE)
    return {key: int(value) for key, value in re.findall(r'(\w+)=(\d+)', match.group(1))}
