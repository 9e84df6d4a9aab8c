"""After the restore role: a diagnosis that calls for recovery, and nothing on the machine changed."""

from __future__ import annotations

import json
import os


def test_diagnosis_calls_for_recovery_with_its_reasons(host, lab_dir):
    diagnosis = json.loads(host.file(os.path.join(lab_dir, 'diagnosis.json')).content_string)
    assert diagnosis['recovery_needed'] is True
    assert diagnosis['cache']['stale'] is True
    assert diagnosis['probe']['classification'] == 'stale_token'
    assert diagnosis['logs']['patterns']['TokenRefreshError']['count'] >= 1


def test_token_cache_is_still_in_place(host, lab_vars):
    cache = host.file(lab_vars['vllm_dr_cache_path'])
    assert cache.exists and cache.is_file and cache.size > 0


def test_no_backup_was_written_and_the_config_is_untouched(host, lab_vars):
    assert not host.file(lab_vars['vllm_dr_backup_dir']).exists
    assert 'refresh_on_startup: false' in host.file(lab_vars['vllm_dr_config_path']).content_string


def test_the_gateway_still_listens(host, lab_vars):
    port = lab_vars['vllm_dr_refresh_url'].split(':')[2].split('/')[0]
    assert host.socket(f'tcp://127.0.0.1:{port}').is_listening
