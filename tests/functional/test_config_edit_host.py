"""dr_restore.yml's edit of vllm.yaml on a plain host changes one key and nothing else about the file: its owner,
group, mode, line endings and the symbolic link it is reached through stay; a file too large to edit in bounded time
is refused before the first change."""

from __future__ import annotations

import hashlib
import os
import stat
import time

import pytest
import yaml

from harness.lab_runs import incident_lab
from harness.playbooks import playbook

# what roles/purge/defaults/main.yml documents as vllm_dr_config_max_size
MAX_SIZE = 262144


@pytest.fixture
def broken_lab(tmp_path):
    """The lab after the incident: snapshot taken, tokens rotated at the provider, snapshot restored."""
    with incident_lab(tmp_path) as lab:
        inventory = tmp_path / 'inventory.yml'
        inventory.write_text(yaml.safe_dump(lab.inventory(str(tmp_path / 'reports'))))
        lab.inventory_path = str(inventory)
        yield lab


def sha256(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def test_config_edit_keeps_owner_group_mode_crlf_and_edits_the_target_of_a_link(broken_lab):
    """A versioned vllm.yaml (a link to vllm.yaml.v7), owned by the service's user, mode 0640, written on Windows
    (CRLF): the edit sets the key in the link's target and keeps the rest of what the file is."""
    config = broken_lab.config_path
    target = config + '.v7'
    with open(config, encoding='utf-8') as handle:
        text = handle.read()
    assert 'refresh_on_startup: false' in text or 'refresh_on_startup' not in text
    with open(target, 'w', encoding='utf-8', newline='') as handle:
        handle.write('# versioned by the deploy tool\r\n' + text.replace('\n', '\r\n'))
    os.chown(target, 4242, 4343)
    os.chmod(target, 0o640)
    os.unlink(config)
    os.symlink(os.path.basename(target), config)

    rc, output = playbook(broken_lab.inventory_path, 'dr_restore.yml')
    assert rc == 0, output[-4000:]

    assert os.path.islink(config) and os.readlink(config) == os.path.basename(target), 'the link stays a link'
    info = os.stat(target)
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4242, 4343, 0o640)
    with open(target, 'rb') as handle:
        edited = handle.read()
    assert edited.count(b'\n') == edited.count(b'\r\n') > 5, 'every line ends with CRLF, as before'
    assert edited.startswith(b'# versioned by the deploy tool\r\n')
    assert yaml.safe_load(edited)['session_state_store']['refresh_on_startup'] is True


def test_config_larger_than_the_documented_size_is_refused_in_one_line_before_anything_changes(broken_lab):
    """50 MB of vllm.yaml (a huge comment block): refused from its size, before it is read, in bounded time."""
    config = broken_lab.config_path
    with open(config, 'a', encoding='utf-8') as handle:
        line = '# ' + 'x' * 97 + '\n'
        handle.write(line * (50 * 1024 * 1024 // len(line)))
    size = os.path.getsize(config)
    before = {'config': sha256(config), 'cache': sha256(broken_lab.cache_path)}

    started = time.monotonic()
    rc, output = playbook(broken_lab.inventory_path, 'dr_restore.yml')
    took = time.monotonic() - started
    assert rc != 0
    assert (f'{config} is {size} bytes, above vllm_dr_config_max_size ({MAX_SIZE}); set '
            'session_state_store.refresh_on_startup: true in it by hand, or raise vllm_dr_config_max_size') in output, \
        output[-4000:]
    assert {'config': sha256(config), 'cache': sha256(broken_lab.cache_path)} == before, 'nothing was touched'
    assert took < 120, f'the refusal took {took:.0f} s: the file must not be read'
