"""The vllm_token_cache module shell: arguments in, one result or one failure line out."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_token_cache
from harness.modules import run_module as harness_run_module


def run_module(capsys, args, check_mode=False, diff=False):
    return harness_run_module(vllm_token_cache, args, capsys, check_mode=check_mode, diff=diff)


def test_inspection_is_the_default_and_reports_staleness(capsys, cache):
    result = run_module(capsys, {'path': cache, 'restored_at': '2024-07-15T03:00:00Z'})
    assert result['_rc'] == 0 and result['changed'] is False
    assert result['stale'] is True and result['rows'] == 8 and result['expired_rows'] == 5
    assert 'diff' not in result


def test_result_never_contains_a_token(capsys, cache):
    result = run_module(capsys, {'path': cache, 'state': 'pruned'}, diff=True)
    assert 'SECRET' not in json.dumps(result)


def test_check_mode_with_diff_shows_what_a_purge_would_remove(capsys, cache):
    result = run_module(capsys, {'path': cache, 'state': 'absent'}, check_mode=True, diff=True)
    assert result['changed'] is True and result['removed_files'] == [cache]
    assert result['diff'] == {'before': {'files': [cache], 'rows': 8, 'expired_rows': 5},
                              'after': {'files': [], 'rows': None, 'expired_rows': None}}
    assert os.path.exists(cache)


def test_second_purge_reports_no_change(capsys, cache):
    assert run_module(capsys, {'path': cache, 'state': 'absent'})['changed'] is True
    assert run_module(capsys, {'path': cache, 'state': 'absent'})['changed'] is False


@pytest.mark.parametrize('args, message', [
    ({'restored_at': 'yesterday'}, "restored_at: 'yesterday' is not ISO 8601 or epoch seconds; give e.g."),
    ({'cutoff': 'soon', 'state': 'pruned'}, "cutoff: 'soon' is not ISO 8601"),
    ({'table': 'nope'}, "table 'nope' not found"),
    ({'state': 'restored'}, 'state is restored but all of the following are missing: restore_from'),
])
def test_bad_input_fails_with_one_line(capsys, cache, args, message):
    result = run_module(capsys, dict(args, path=cache))
    assert result['_rc'] == 1 and result['failed'] is True
    assert message in result['msg'] and '\n' not in result['msg']
    assert 'Traceback' not in json.dumps(result)


def test_directory_path_fails_with_one_line(capsys, tmp_path):
    result = run_module(capsys, {'path': str(tmp_path)})
    assert result['failed'] is True and 'is a directory, not a token cache file' in result['msg']
