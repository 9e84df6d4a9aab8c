"""Every playbook on the host platform, at -v, -vvv and --diff, leaves no token or secret the lab ever issued or
holds in its output, ansible.log, reports, fact cache, set_stats data or the files beside its backups."""

from __future__ import annotations

import base64
import json
import os
import stat
import time

import pytest
import yaml

from harness.playbooks import playbook
from harness.reports import report_path
from harness.secret_scan import cache_tokens, files_under, find_leaks, idp_tokens, store_tokens
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
    """Every token the provider issued (rotated ones too), every token in the store and in the token cache (and the
    snapshot's copy), and every secret the lab holds: the store's password, the clients' secrets."""
    with open(lab.config_path, encoding='utf-8') as handle:
        config = yaml.safe_load(handle)
    inventory_host = lab.inventory()['all']['children']['vllm']['hosts']['lab']
    secrets = idp_tokens(lab.path('idp', 'idp.db'))
    secrets |= store_tokens(lab._redis())  # pylint: disable=protected-access
    secrets |= cache_tokens(lab.cache_path, lab.path('snapshot', 'token_cache.db'))
    secrets |= set(DEFAULT_CLIENTS.values())
    secrets |= {config['oauth']['client_secret'], config['session_state_store']['password'],
                inventory_host['vllm_dr_store']['login_password'], inventory_host['vllm_dr_introspection']['client_secret']}
    return secrets


def is_backup_file(path: str) -> bool:
    return path.endswith(BACKUP_FILE_SUFFIXES)


def test_scan_finds_a_secret_at_any_offset_of_a_slurped_file():
    secret = DEFAULT_CLIENTS['svc-vllm']
    for offset in range(3):
        slurped = base64.b64encode(b'#' * offset + f'client_secret: {secret}\n'.encode()).decode()
        assert find_leaks({secret}, {'slurp': slurped}) == ['slurp: svc-... (19 characters)']


def test_audit_at_v_prints_no_secret_of_the_configuration(secret_lab):
    """dr_audit reads vllm.yaml on the target to judge refresh_on_startup: its text (the provider's client secret,
    the store's password) is judged, never printed, at -v as at -vvv."""
    rc, output = playbook(secret_lab.inventory_path, 'dr_audit.yml', '-v')
    assert rc == 0, output[-3000:]
    assert 'refresh_on_startup' in output, 'the audit judged the configuration it read'
    assert find_leaks(lab_secrets(secret_lab), {'audit -v': output}) == []


def scan_env(tmp_path) -> dict:
    """ansible-playbook's environment that leaves everything a run can write where the scan reads it: ansible.log,
    the fact cache (jsonfile), and the set_stats data (shown in the recap, as an AWX job's artifacts hold it)."""
    return dict(os.environ, ANSIBLE_LOG_PATH=str(tmp_path / 'ansible.log'), ANSIBLE_CACHE_PLUGIN='jsonfile',
                ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / 'facts'), ANSIBLE_SHOW_CUSTOM_STATS='1')


def run_outputs(lab, tmp_path, backup_dirs) -> list:
    """The files a run leaves that must hold no secret: ansible.log, the reports, the fact cache, and the files of
    the backup directories other than the backups themselves (which hold tokens by design, mode 0600)."""
    paths = [str(tmp_path / 'ansible.log')] + list(files_under(lab.reports))
    if (tmp_path / 'facts').exists():
        paths += list(files_under(str(tmp_path / 'facts')))
    for backup_dir in backup_dirs:
        paths += [path for path in files_under(backup_dir) if not is_backup_file(path)]
    return paths


def test_every_playbook_at_v_vvv_and_diff_leaves_no_secret_anywhere(secret_lab, tmp_path):
    """dr_drill, dr_rollback, dr_detect (repairing), dr_restore, dr_audit and dr_harden in turn on one lab; -vvv
    prints every result -v prints, and more; dr_restore runs at -v as well (dr_audit at -v: the test above)."""
    env = scan_env(tmp_path)
    outputs, took = {}, {}

    def run(name, *args, expect=(0,)):
        started = time.monotonic()
        rc, output = playbook(secret_lab.inventory_path, name, *args, env=env)
        took[name + ' ' + ' '.join(args)] = round(time.monotonic() - started)
        assert rc in expect, f'{name} {args}: rc {rc}\n{output[-3000:]}'
        outputs[f'{name} {" ".join(args)}'] = output
        return output

    drill = run('dr_drill.yml', '-vvv', '--diff')
    report = json.loads(report_path(tmp_path / 'reports', 'lab.json').read_text())
    assert report['passed'] is True and report['diagnosis']['probe']['classification'] == 'stale_token'
    assert report['diagnosis']['probe']['error_description'] == 'Refresh token ******** has been revoked', \
        'the gateway echoed the stale token and the probe masked it'
    backup_dirs = [report['purge']['backup_dir']]
    assert report['purge']['config_changed'] is True, 'the drill must edit vllm.yaml, or its diff is not scanned'
    assert f'{secret_lab.config_path}: session_state_store.refresh_on_startup false -> true' in drill, \
        'diff mode shows what the config edit changes'
    # the rollback puts the stale cache back whole (replacing the rows the restarted service wrote since, its own
    # session's too) and the stale sessions: detection finds them and repairs (purge, sweep, restart, validate)
    run('dr_rollback.yml', '-vvv', '--diff', '-e', f'vllm_dr_rollback_dir={backup_dirs[0]}',
        '-e', 'vllm_dr_rollback_replace_cache=true')
    detect = run('dr_detect.yml', '-vvv', '--diff', '-e', 'vllm_dr_auto_repair=true')
    assert 'vllm_dr_rollback_dirs' in detect, 'the repair published its backup directory (set_stats, shown)'
    backup_dirs += [path for path in (os.path.join(secret_lab.path('backups'), name)
                                      for name in os.listdir(secret_lab.path('backups'))) if path not in backup_dirs]
    run('dr_restore.yml', '-v')
    run('dr_audit.yml', '-vvv', '--diff')
    # Velero exclusions are for Kubernetes: on a host the playbook refuses, and says so without a secret either
    harden = run('dr_harden.yml', '-vvv', '--diff', expect=(2,))
    assert 'on vllm_dr_platform=kubernetes only' in harden

    secrets = lab_secrets(secret_lab)
    assert len(secrets) > 10 and REDIS_PASSWORD in secrets
    backups = [path for backup_dir in backup_dirs for path in files_under(backup_dir) if is_backup_file(path)]
    assert any(path.endswith('sessions.jsonl') for path in backups) and any(path.endswith('.bak') for path in backups)
    assert {oct(stat.S_IMODE(os.stat(path).st_mode)) for path in backups} == {'0o600'}
    scanned = run_outputs(secret_lab, tmp_path, backup_dirs)
    assert str(tmp_path / 'ansible.log') in scanned and any(path.endswith('lab.audit.json') for path in scanned)
    assert find_leaks(secrets, outputs, scanned) == []
    print(f'secret scan: {len(outputs)} runs, {len(scanned)} files, {len(secrets)} secrets; seconds per run {took}')


def test_the_scan_fails_on_a_secret_left_in_any_place_it_reads(secret_lab, tmp_path):
    """The scan is able to fail: each kind of secret the lab holds, planted in each place a run writes, is found."""
    with open(secret_lab.config_path, encoding='utf-8') as handle:
        config = yaml.safe_load(handle)
    kinds = {'store password': REDIS_PASSWORD, 'client secret': config['oauth']['client_secret'],
             'refresh token in the store': sorted(store_tokens(secret_lab._redis()))[0],  # pylint: disable=protected-access
             'token in the cache': sorted(cache_tokens(secret_lab.cache_path))[0]}
    secrets = lab_secrets(secret_lab)
    assert set(kinds.values()) <= secrets, 'the scan knows every kind of secret the lab holds'
    backup_dir = tmp_path / 'backups' / 'run-1'
    places = {'ansible.log': tmp_path / 'ansible.log', 'report': tmp_path / 'reports' / 'lab.md',
              'fact cache': tmp_path / 'facts' / 'lab', 'backup directory': backup_dir / 'notes.txt'}
    for kind, secret in kinds.items():
        for place, path in places.items():
            for existing in places.values():
                existing.parent.mkdir(parents=True, exist_ok=True)
                existing.write_text('clean\n')
            path.write_text(f'some line\n{secret}\n' if place != 'fact cache' else
                            json.dumps({'x': base64.b64encode(f'pw: {secret}'.encode()).decode()}))
            leaks = find_leaks(secrets, {}, run_outputs(secret_lab, tmp_path, [str(backup_dir)]))
            assert leaks == [f'{path}: {secret[:4]}... ({len(secret)} characters)'], (kind, place)
