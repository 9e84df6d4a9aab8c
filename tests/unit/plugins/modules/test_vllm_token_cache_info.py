"""The vllm_token_cache_info module shell: the cache read as vllm_token_cache's inspection reads it, nothing written."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.inferops.vllm_dr.plugins.modules import vllm_token_cache, vllm_token_cache_info
from harness.modules import run_module


def tree(folder):
    """Every file under folder with its size and mtime: what a write would change."""
    return {name: (os.stat(os.path.join(folder, name)).st_size, os.stat(os.path.join(folder, name)).st_mtime_ns)
            for name in sorted(os.listdir(folder))}


def test_info_reports_a_stale_cache_and_its_rows_without_writing(capsys, cache):
    before = tree(os.path.dirname(cache))
    result = run_module(vllm_token_cache_info, {'path': cache, 'restored_at': '2024-07-15T03:00:00Z'}, capsys)
    assert result['_rc'] == 0 and result['changed'] is False
    assert result['stale'] is True and 'before the restore' in result['stale_reason']
    assert (result['rows'], result['expired_rows'], result['malformed_rows']) == (8, 5, 0)
    assert result['integrity'] == 'ok' and result['files'] == [cache]
    assert tree(os.path.dirname(cache)) == before


def test_info_returns_what_the_inspection_of_vllm_token_cache_returns(capsys, cache):
    args = {'path': cache, 'restored_at': '2024-07-15T03:00:00Z', 'cutoff': '2030-01-01T00:00:00Z'}
    info = run_module(vllm_token_cache_info, args, capsys)
    inspected = run_module(vllm_token_cache, args, capsys)
    info.pop('invocation')
    assert {key: inspected[key] for key in info} == info


def test_info_runs_the_same_in_check_mode_and_never_returns_a_token(capsys, cache):
    args = {'path': cache, 'restored_at': '2024-07-15T03:00:00Z'}
    assert run_module(vllm_token_cache_info, args, capsys, check_mode=True) == run_module(vllm_token_cache_info, args, capsys)
    assert 'SECRET' not in json.dumps(run_module(vllm_token_cache_info, args, capsys, check_mode=True, diff=True))


def test_info_takes_no_option_that_changes_the_cache(capsys, cache):
    result = run_module(vllm_token_cache_info, {'path': cache, 'state': 'absent'}, capsys)
    assert result['_rc'] == 1 and 'Unsupported parameters' in result['msg'] and 'state' in result['msg']
    assert os.path.exists(cache)


def test_info_on_a_missing_cache_reports_it_absent(capsys, tmp_path):
    result = run_module(vllm_token_cache_info, {'path': str(tmp_path / 'none.db'), 'restored_at': '1720612800'}, capsys)
    assert result['_rc'] == 0 and result['exists'] is False and result['files'] == []
    assert result['stale_reason'] == 'no cache file: the service rebuilds it from fresh credentials'
    assert not os.listdir(tmp_path)


def test_info_reports_a_damaged_file_instead_of_failing(capsys, tmp_path):
    path = tmp_path / 'token_cache.db'
    path.write_bytes(b'SQLite format 3\x00' + b'\xff' * 4000)
    result = run_module(vllm_token_cache_info, {'path': str(path)}, capsys)
    assert result['_rc'] == 0 and result['integrity'] != 'ok' and result['rows'] is None


@pytest.mark.parametrize('args, message', [
    ({'restored_at': 'yesterday'}, "restored_at: 'yesterday' is not ISO 8601 or epoch seconds; give e.g."),
    ({'cutoff': 'soon'}, "cutoff: 'soon' is not ISO 8601"),
    ({'table': 'nope'}, "table 'nope' not found"),
])
def test_bad_input_fails_with_one_line(capsys, cache, args, message):
    result = run_module(vllm_token_cache_info, dict(args, path=cache), capsys)
    assert result['_rc'] == 1 and result['failed'] is True
    assert message in result['msg'] and '\n' not in result['msg'] and 'Traceback' not in result['msg']


def test_a_symbolic_link_is_refused_in_one_line(capsys, cache, tmp_path):
    link = tmp_path / 'link.db'
    link.symlink_to(cache)
    result = run_module(vllm_token_cache_info, {'path': str(link)}, capsys)
    assert result['_rc'] == 1 and str(link) in result['msg'] and '\n' not in result['msg']
