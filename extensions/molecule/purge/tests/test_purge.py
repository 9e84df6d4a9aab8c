"""After the purge role and its restart: private backups, the new config, a rebuilt cache, a listening service."""

from __future__ import annotations

import json


def backup_dir(host, lab_vars):
    runs = host.run(f'ls -1 {lab_vars["vllm_dr_backup_dir"]}').stdout.split()
    assert len(runs) == 1, 'one run, one backup directory'
    return f'{lab_vars["vllm_dr_backup_dir"]}/{runs[0]}'


def test_backups_are_private_files(host, lab_vars):
    directory = backup_dir(host, lab_vars)
    assert host.file(directory).mode == 0o700
    cache_backups = host.run(f'ls -1 {directory}/token_cache.db.*.bak').stdout.split()
    assert cache_backups
    for name in cache_backups + [f'{directory}/sessions.jsonl']:
        backup = host.file(name)
        assert backup.is_file and backup.mode == 0o600 and backup.size > 0


def test_session_backup_holds_the_swept_sessions(host, lab_vars):
    lines = host.file(f'{backup_dir(host, lab_vars)}/sessions.jsonl').content_string.splitlines()
    entries = [json.loads(line) for line in lines if '"key"' in line]
    assert {entry['key'] for entry in entries} >= {'vllm:session:svc', 'vllm:session:probe'}


def test_config_asks_for_the_startup_sweep(host, lab_vars):
    config = host.file(lab_vars['vllm_dr_config_path'])
    assert 'refresh_on_startup: true' in config.content_string
    assert host.run(f'ls {lab_vars["vllm_dr_config_path"]}.*~').rc == 0, 'the old config was kept'


def test_restarted_service_rebuilt_its_cache_and_listens(host, lab_vars):
    assert host.file(lab_vars['vllm_dr_cache_path']).exists
    port = lab_vars['vllm_dr_refresh_url'].split(':')[2].split('/')[0]
    assert host.socket(f'tcp://127.0.0.1:{port}').is_listening
    assert 'Service session svc regenerated' in host.file(lab_vars['vllm_dr_log_path']).content_string
