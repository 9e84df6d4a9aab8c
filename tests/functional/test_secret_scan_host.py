"""A `-vvv --diff` drill and rollback on the host platform print no token or secret the lab ever issued or holds."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest
import yaml

from harness.playbooks import playbook
from harness.secret_scan import files_under, find_leaks, idp_tokens
from lab.idp import DEFAULT_CLIENTS
from lab.labctl import Lab

REDIS_PASSWORD = 'lab-redis-requirepass-7f3a9c'
# Files that hold tokens by design (what a rollback puts back): never printed, only readable by their owner.
BACKUP_FILE_SUFFIXES = ('sessions.jsonl', '.bak')


@pytest.fixture
def secret_lab(tmp_path):
    """The lab with every kind of secret the runbook handles: a Redis password, client secrets in vllm.yaml
    and in the inventory (introspection), and the tokens of its provider, which its gateway echoes when it
    rejects one."""
    lab = Lab(str(tmp_path / 'lab'))
    lab.up(sessions=2, redis_password=REDIS_PASSWORD, echo_token=True)
    try:
        inventory = tmp_path / 'inventory.yml'
        inventory.write_text(yaml.safe_dump(lab.inventory(str(tmp_path / 'reports'))))
        lab.inventory_path = str(inventory)
        lab.reports = str(tmp_path / 'reports')
        yield lab
    finally:
        lab.down()


def lab_secrets(lab) -> set:
    """Every token the provider issued (rotated ones too) and every secret the lab holds."""
    with open(lab.config_path, encoding='utf-8') as handle:
        config = yaml.safe_load(handle)
    inventory_host = lab.inventory()['all']['children']['vllm']['hosts']['lab']
    secrets = idp_tokens(lab.path('idp', 'idp.db'))
    secrets |= set(DEFAULT_CLIENTS.values())
    secrets |= {config['oauth']['client_secret'], config['session_state_store']['password'],
                inventory_host['vllm_dr_store']['login_password'], inventory_host['vllm_dr_introspection']['client_secret']}
    return secrets


def is_backup_file(path: str) -> bool:
    return path.endswith(BACKUP_FILE_SUFFIXES)


def test_vvv_diff_drill_and_rollback_print_no_secret(secret_lab, tmp_path):
    log_path = tmp_path / 'ansible.log'
    env = dict(os.environ, ANSIBLE_LOG_PATH=str(log_path))
    rc, drill = playbook(secret_lab.inventory_path, 'dr_drill.yml', '-vvv', '--diff', env=env)
    assert rc == 0, drill[-3000:]
    report = json.loads((tmp_path / 'reports' / 'lab.json').read_text())
    assert report['passed'] is True and report['diagnosis']['probe']['classification'] == 'stale_token'
    assert report['diagnosis']['probe']['error_description'] == 'Refresh token ******** has been revoked', \
        'the gateway echoed the stale token and the probe masked it'
    backup_dir = report['purge']['backup_dir']
    assert report['purge']['config_changed'] is True, 'the drill must edit vllm.yaml, or its diff is not scanned'
    assert f'{secret_lab.config_path}: session_state_store.refresh_on_startup false -> true' in drill, \
        'diff mode shows what the config edit changes'
    rc, rollback = playbook(secret_lab.inventory_path, 'dr_rollback.yml', '-vvv', '--diff',
                            '-e', f'vllm_dr_rollback_dir={backup_dir}', env=env)
    assert rc == 0, rollback[-3000:]

    secrets = lab_secrets(secret_lab)
    assert len(secrets) > 10 and REDIS_PASSWORD in secrets
    backups = [path for path in files_under(backup_dir) if is_backup_file(path)]
    assert any(path.endswith('sessions.jsonl') for path in backups) and any(path.endswith('.bak') for path in backups)
    assert {oct(stat.S_IMODE(os.stat(path).st_mode)) for path in backups} == {'0o600'}
    scanned = [str(log_path)] + list(files_under(secret_lab.reports))
    scanned += [path for path in files_under(backup_dir) if not is_backup_file(path)]
    assert find_leaks(secrets, {'drill output': drill, 'rollback output': rollback}, scanned) == []


def test_scan_finds_a_secret_at_any_offset_of_a_slurped_file():
    secret = DEFAULT_CLIENTS['svc-vllm']
    for offset in range(3):
        slurped = base64.b64encode(b'#' * offset + f'client_secret: {secret}\n'.encode()).decode()
        assert find_leaks({secret}, {'slurp': slurped}) == ['slurp: svc-... (19 characters)']


def test_audit_at_v_prints_no_secret_of_the_configuration(secret_lab):
    """dr_audit reads vllm.yaml on the target to judge refresh_on_startup: its text (the provider's client secret,
    the store's password) is judged, never printed, at -v as at -vvv."""
    for verbosity in ('-v', '-vvv'):
        rc, output = playbook(secret_lab.inventory_path, 'dr_audit.yml', verbosity, '--diff')
        assert rc == 0, output[-3000:]
        assert 'refresh_on_startup' in output, 'the audit judged the configuration it read'
        assert find_leaks(lab_secrets(secret_lab), {f'audit {verbosity}': output}) == []
