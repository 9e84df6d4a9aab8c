"""dr_restore.yml on a plain host checks what it relies on before its first change: a vllm.yaml the line edit cannot
change without losing its layout stops the run in one line with the cache, the sessions and the file as they were."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import redis
import yaml

from harness.lab_runs import incident_lab
from harness.playbooks import playbook
from harness.sessions import dump_redis


@pytest.fixture
def broken_lab(tmp_path):
    """The lab after the incident: snapshot taken, tokens rotated at the provider, snapshot restored."""
    with incident_lab(tmp_path) as lab:
        yield lab


def sha256(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def test_a_config_the_edit_cannot_keep_stops_the_run_before_the_cache_is_purged(broken_lab, tmp_path):
    with open(broken_lab.config_path, encoding='utf-8') as handle:
        block_style = handle.read()
    config = yaml.safe_load(block_style)
    # the operator's session_state_store in flow style, with a comment: a line edit would lose both
    flow = yaml.safe_dump({key: value for key, value in config.items() if key != 'session_state_store'},
                          sort_keys=False)
    flow += ('# the store the gateway shares\nsession_state_store: {'
             + ', '.join(f'{key}: {json.dumps(value)}' for key, value in config['session_state_store'].items()) + '}\n')
    with open(broken_lab.config_path, 'w', encoding='utf-8') as handle:
        handle.write(flow)
    cache, config_digest = sha256(broken_lab.cache_path), sha256(broken_lab.config_path)
    client = redis.Redis(host='127.0.0.1', port=broken_lab.state['ports']['redis'], socket_timeout=10)
    sessions = dump_redis(client)
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump(broken_lab.inventory(str(tmp_path / 'reports'))))

    rc, output = playbook(str(inventory), 'dr_restore.yml')
    assert rc != 0
    assert (f'session_state_store.refresh_on_startup cannot be set in {broken_lab.config_path} by a line edit '
            'without losing its comments and layout') in output, output[-4000:]
    assert sha256(broken_lab.cache_path) == cache
    assert sha256(broken_lab.config_path) == config_digest
    assert dump_redis(client) == sessions
    backups = broken_lab.path('backups')
    assert not [name for _dir, _subdirs, names in os.walk(backups) for name in names], 'nothing was backed up'
    assert 'oauth' not in output and config['oauth']['client_secret'] not in output

    # the operator writes the section in block style again: the re-run completes
    with open(broken_lab.config_path, 'w', encoding='utf-8') as handle:
        handle.write(block_style)
    rc, output = playbook(str(inventory), 'dr_restore.yml')
    assert rc == 0, output[-4000:]
    assert broken_lab.refresh('svc')[0] == 200
