"""The systemd units that schedule dr_detect.yml on a host pass `systemd-analyze verify` without a warning."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNITS = os.path.join(ROOT, 'extensions', 'detection', 'systemd')
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')


def unit(name) -> str:
    with open(os.path.join(UNITS, name), encoding='utf-8') as handle:
        return handle.read()


def verify(tmp_path, service: str, timer: str) -> subprocess.CompletedProcess:
    (tmp_path / 'vllm-dr-detect.service').write_text(service)
    (tmp_path / 'vllm-dr-detect.timer').write_text(timer)
    return subprocess.run(['systemd-analyze', 'verify', str(tmp_path / 'vllm-dr-detect.timer'),
                           str(tmp_path / 'vllm-dr-detect.service')],
                          capture_output=True, text=True, timeout=60, check=False)


def installed(service: str) -> str:
    """The service as installed here: ansible-playbook where this machine has it (verify checks it is executable)."""
    assert 'ExecStart=/usr/bin/ansible-playbook inferops.vllm_dr.dr_detect ' in service
    return service.replace('/usr/bin/ansible-playbook', ANSIBLE_PLAYBOOK)


def test_the_timer_and_the_service_verify_cleanly(tmp_path):
    checked = verify(tmp_path, installed(unit('vllm-dr-detect.service')), unit('vllm-dr-detect.timer'))
    assert checked.returncode == 0 and checked.stdout + checked.stderr == '', checked.stdout + checked.stderr
    assert os.path.exists(os.path.join(ROOT, 'playbooks', 'dr_detect.yml'))


def test_the_timer_schedule_parses(tmp_path):
    schedule = re.search(r'^OnCalendar=(.+)$', unit('vllm-dr-detect.timer'), re.MULTILINE).group(1)
    parsed = subprocess.run(['systemd-analyze', 'calendar', schedule], capture_output=True, text=True, timeout=60,
                            check=False)
    assert parsed.returncode == 0 and 'Normalized form: *-*-* *:00/15:00' in parsed.stdout, parsed.stdout


@pytest.mark.parametrize('broken, expected', [
    (('Type=oneshot', 'Type=oneshoot'), 'Failed to parse service type'),
    (('OnCalendar=*:0/15', 'OnCalendar=every quarter'), 'Failed to parse calendar specification'),
])
def test_the_check_sees_a_broken_unit(tmp_path, broken, expected):
    service, timer = installed(unit('vllm-dr-detect.service')), unit('vllm-dr-detect.timer')
    service, timer = service.replace(*broken), timer.replace(*broken)
    checked = verify(tmp_path, service, timer)
    assert expected in checked.stdout + checked.stderr
