"""A run's report files on real files: written whole, side by side, modes kept, nothing written in check mode."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.inferops.vllm_dr.plugins.module_utils._report_files import (
    ReportError, as_text, parse_mode, write_report)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_writes_every_file_into_a_new_private_directory(tmp_path):
    directory = str(tmp_path / 'reports' / 'run-1')
    result = write_report(directory, {'a.json': '{}', 'a.md': '# a\n'}, 0o640, 0o700)
    assert result == {'changed': True, 'created_directory': True, 'unchanged': [], 'latest': None,
                      'written': [os.path.join(directory, 'a.json'), os.path.join(directory, 'a.md')]}
    assert mode_of(directory) == 0o700
    assert (tmp_path / 'reports' / 'run-1' / 'a.md').read_text() == '# a\n'
    assert mode_of(os.path.join(directory, 'a.json')) == 0o640
    assert sorted(os.listdir(directory)) == ['a.json', 'a.md']  # no temporary file left beside them


def test_the_umask_narrows_no_mode(tmp_path):
    previous = os.umask(0o077)
    try:
        write_report(str(tmp_path / 'r'), {'a.md': 'x'}, 0o644, 0o755)
    finally:
        os.umask(previous)
    assert mode_of(str(tmp_path / 'r')) == 0o755
    assert mode_of(str(tmp_path / 'r' / 'a.md')) == 0o644


def test_a_second_run_with_the_same_text_changes_nothing(tmp_path):
    directory = str(tmp_path)
    write_report(directory, {'a.md': 'same'}, 0o640, 0o700)
    before = os.stat(os.path.join(directory, 'a.md')).st_ino
    result = write_report(directory, {'a.md': 'same'}, 0o640, 0o700)
    assert result['changed'] is False and result['unchanged'] == [os.path.join(directory, 'a.md')]
    assert os.stat(os.path.join(directory, 'a.md')).st_ino == before


def test_new_text_or_another_mode_replaces_the_file_whole(tmp_path):
    path = tmp_path / 'a.md'
    path.write_text('old')
    os.chmod(path, 0o600)
    assert write_report(str(tmp_path), {'a.md': 'old'}, 0o640, 0o700)['written'] == [str(path)]
    assert mode_of(str(path)) == 0o640
    old_inode = os.stat(path).st_ino  # still linked while the new file is written: its number cannot be reused
    assert write_report(str(tmp_path), {'a.md': 'new'}, 0o640, 0o700)['changed'] is True
    assert path.read_text() == 'new'
    assert os.stat(path).st_ino != old_inode  # renamed over, never rewritten in place


def test_an_existing_directory_keeps_its_own_mode(tmp_path):
    os.chmod(tmp_path, 0o750)
    write_report(str(tmp_path), {'a.md': 'x'}, 0o640, 0o700)
    assert mode_of(str(tmp_path)) == 0o750


def test_a_link_in_place_of_a_report_is_replaced_not_followed(tmp_path):
    target = tmp_path / 'elsewhere'
    target.write_text('keep')
    (tmp_path / 'r').mkdir()
    os.symlink(target, tmp_path / 'r' / 'a.md')
    write_report(str(tmp_path / 'r'), {'a.md': 'keep'}, 0o640, 0o700)
    assert target.read_text() == 'keep'
    assert not os.path.islink(tmp_path / 'r' / 'a.md')
    assert (tmp_path / 'r' / 'a.md').read_text() == 'keep'


def test_check_mode_writes_nothing_and_says_what_it_would(tmp_path):
    directory = str(tmp_path / 'new')
    result = write_report(directory, {'a.md': 'x'}, 0o640, 0o700, check_mode=True)
    assert result['changed'] is True and result['created_directory'] is True
    assert result['written'] == [os.path.join(directory, 'a.md')]
    assert not os.path.exists(directory)
    (tmp_path / 'b.md').write_text('old')
    assert write_report(str(tmp_path), {'b.md': 'new'}, 0o640, 0o700, check_mode=True)['changed'] is True
    assert (tmp_path / 'b.md').read_text() == 'old'


def test_a_structure_is_written_as_to_nice_json_with_indent_2_writes_it():
    data = {'b': [1, {'z': None, 'a': 'é'}], 'a': True}
    assert as_text('x.json', data) == json.dumps(data, indent=2, sort_keys=True, separators=(',', ': '))
    assert as_text('x.json', [1, 2]) == '[\n  1,\n  2\n]'
    assert as_text('x.md', 'text') == 'text'
    with pytest.raises(ReportError, match='content of x.md is int'):
        as_text('x.md', 3)


@pytest.mark.parametrize('name', ['', '.', '..', 'sub/a.md', '/etc/passwd', 'a\0b'])
def test_a_name_with_a_directory_is_refused_before_anything_is_written(tmp_path, name):
    with pytest.raises(ReportError, match='not a plain file name'):
        write_report(str(tmp_path / 'r'), {'ok.md': 'x', name: 'y'}, 0o640, 0o700)
    assert not os.path.exists(tmp_path / 'r')


def test_no_file_and_a_file_in_place_of_the_directory_are_refused(tmp_path):
    with pytest.raises(ReportError, match='files is empty'):
        write_report(str(tmp_path), {}, 0o640, 0o700)
    (tmp_path / 'plain').write_text('')
    with pytest.raises(ReportError, match='exists and is not a directory'):
        write_report(str(tmp_path / 'plain'), {'a.md': 'x'}, 0o640, 0o700)


def test_a_directory_it_cannot_create_is_one_line_naming_the_fix(tmp_path):
    (tmp_path / 'plain').write_text('')
    with pytest.raises(ReportError, match=r'cannot create the report directory .*plain/r \(Not a directory\); fix'):
        write_report(str(tmp_path / 'plain' / 'r'), {'a.md': 'x'}, 0o640, 0o700)


@pytest.mark.parametrize('value, expected', [('0640', 0o640), ('640', 0o640), ('0o600', 0o600), ('rw', None),
                                             ('17777', None), ('-1', None)])
def test_modes_are_octal_strings(value, expected):
    if expected is None:
        with pytest.raises(ReportError, match='directory_mode .* is not an octal permission'):
            parse_mode(value, 'directory_mode')
    else:
        assert parse_mode(value, 'mode') == expected


@pytest.mark.parametrize('trailing', ['', '/'])
def test_a_symlinked_report_directory_is_refused_and_nothing_is_written_where_it_points(tmp_path, trailing):
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    (elsewhere / 'a.json').write_text('kept')
    os.symlink(elsewhere, tmp_path / 'reports')
    with pytest.raises(ReportError, match=r'^path .*reports is a symbolic link to .*elsewhere; give the real '
                                          r'directory') as refused:
        write_report(str(tmp_path / 'reports') + trailing, {'a.json': '{}', 'b.md': 'x'}, 0o640, 0o700)
    assert '\n' not in str(refused.value)
    assert (elsewhere / 'a.json').read_text() == 'kept' and sorted(os.listdir(elsewhere)) == ['a.json']


def test_a_dangling_link_in_place_of_the_report_directory_is_refused(tmp_path):
    os.symlink(tmp_path / 'missing', tmp_path / 'reports')
    with pytest.raises(ReportError, match='is a symbolic link'):
        write_report(str(tmp_path / 'reports'), {'a.json': '{}'}, 0o640, 0o700)
    assert not os.path.exists(tmp_path / 'missing')


def test_two_runs_sharing_a_report_directory_keep_their_own_files_and_latest_names_the_last(tmp_path):
    first = write_report(str(tmp_path / 'reports' / 'run-1'), {'lab.json': '{"passed": false}'}, 0o640, 0o700,
                         latest='latest')
    write_report(str(tmp_path / 'reports' / 'run-2'), {'lab.json': '{"passed": true}'}, 0o640, 0o700, latest='latest')
    assert first['latest'] == str(tmp_path / 'reports' / 'latest')
    assert (tmp_path / 'reports' / 'run-1' / 'lab.json').read_text() == '{"passed": false}', 'never overwritten'
    assert os.readlink(tmp_path / 'reports' / 'latest') == 'run-2'
    assert (tmp_path / 'reports' / 'latest' / 'lab.json').read_text() == '{"passed": true}'
    assert sorted(os.listdir(tmp_path / 'reports')) == ['latest', 'run-1', 'run-2'], 'no temporary link left'


def test_latest_that_is_not_a_link_or_a_linked_parent_is_refused(tmp_path):
    (tmp_path / 'reports' / 'latest').mkdir(parents=True)
    with pytest.raises(ReportError, match='latest: .*latest exists and is not a symbolic link; remove it'):
        write_report(str(tmp_path / 'reports' / 'run-1'), {'a.json': '{}'}, 0o640, 0o700, latest='latest')
    os.symlink(tmp_path / 'reports', tmp_path / 'linked')
    with pytest.raises(ReportError, match='the parent of path .*linked is a symbolic link'):
        write_report(str(tmp_path / 'linked' / 'run-2'), {'a.json': '{}'}, 0o640, 0o700, latest='other')
    assert sorted(os.listdir(tmp_path / 'reports')) == ['latest'], 'refused before anything was written'
