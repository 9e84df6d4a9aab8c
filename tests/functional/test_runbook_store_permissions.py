"""dr_restore.yml learns what the session store's user may do before its first change.

The incident lab on a plain host, its Redis with an ACL user that may read the sessions but not delete them. The
diagnosis asks the server (ACL DRYRUN), and the run is refused in one line that names what is missing and the command
that grants it, with the token cache, vllm.yaml and the sessions byte for byte as they were. Granted what the line
names, the re-run recovers the service. A user the server cannot be asked about (it may not run ACL DRYRUN) still
meets the sweep's refusal after the cache purge and the edit: the message then names what the run had changed.
"""

from __future__ import annotations

import hashlib
import os
import re

import pytest
import redis
import yaml

from harness.lab_runs import incident_lab
from harness.playbooks import playbook
from harness.sessions import dump_redis

READ_ONLY = ('reader', 'on', '>reader-secret', 'resetchannels', '-@all', '+@read', '+@connection')
# what the run lock asks of the store on a host (vllm_run_lock's documentation)
LOCK_GRANT = ('ACL', 'SETUSER', 'reader', '~vllm_dr:lock:*', '+set', '+get', '+pttl', '+evalsha', '+script|load', '+unlink')


@pytest.fixture
def broken_lab(tmp_path):
    with incident_lab(tmp_path) as lab:
        yield lab


def sha256(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def as_reader(lab, tmp_path, *rules):
    """The lab's inventory, its store reached as the ACL user reader with ``rules`` besides reading."""
    admin = lab._redis()  # pylint: disable=protected-access  # the lab's own admin connection
    admin.execute_command('ACL', 'SETUSER', *READ_ONLY, *(rules or ('~vllm:session:*',)))
    inventory = lab.inventory(str(tmp_path / 'reports'))
    inventory['all']['children']['vllm']['hosts']['lab']['vllm_dr_store'].update(
        login_user='reader', login_password='reader-secret')
    path = tmp_path / 'inventory.yml'
    path.write_text(yaml.safe_dump(inventory))
    return admin, str(path)


def backed_up(lab):
    return [name for _dir, _subdirs, names in os.walk(lab.path('backups')) for name in names]


def test_store_user_that_may_not_delete_is_refused_before_the_cache_purge_with_the_grant(broken_lab, tmp_path):
    # the run lock's keys and commands are allowed (the lock is taken): the sessions' keys may only be read
    admin, inventory = as_reader(broken_lab, tmp_path, '%R~vllm:session:*', *LOCK_GRANT[3:], '+acl|dryrun')
    cache, config = sha256(broken_lab.cache_path), sha256(broken_lab.config_path)
    client = redis.Redis(host='127.0.0.1', port=broken_lab.state['ports']['redis'], socket_timeout=10)
    sessions = dump_redis(client)

    rc, output = playbook(inventory, 'dr_restore.yml')
    assert rc != 0
    # the task's failure, one line (the diagnosis showed the same line among its findings)
    lines = [line for line in output.splitlines() if '"msg": "the session store user \'reader\' at redis' in line]
    assert lines, output[-4000:]
    line = lines[0]
    assert 'may not delete or write the keys vllm:session:*' in line and '(nothing was changed)' in line, line
    grant = re.search(r'grant it: (ACL SETUSER reader [^;]+);', line)
    assert grant and grant.group(1).endswith(' ~vllm:session:*') and '+hset' in grant.group(1), line
    assert sha256(broken_lab.cache_path) == cache
    assert sha256(broken_lab.config_path) == config
    assert dump_redis(client) == sessions
    assert backed_up(broken_lab) == []
    assert 'RUNNING HANDLER [inferops.vllm_dr.purge : vllm_dr restart]' not in output
    assert 'reader-secret' not in output

    # granted what the line names, the re-run recovers the service
    admin.execute_command(*grant.group(1).split())
    rc, output = playbook(inventory, 'dr_restore.yml')
    assert rc == 0, output[-4000:]
    assert broken_lab.refresh('svc')[0] == 200


def test_sweep_refused_after_the_cache_purge_names_what_the_run_changed(broken_lab, tmp_path):
    # no ACL DRYRUN for this user: its permissions cannot be asked, so the diagnosis says so; it may take the run
    # lock, but only read the sessions' keys, so the sweep refuses
    admin, inventory = as_reader(broken_lab, tmp_path, '%R~vllm:session:*', *LOCK_GRANT[3:], '+time')
    rc, output = playbook(inventory, 'dr_restore.yml')
    assert rc != 0
    lines = [line for line in output.splitlines()
             if '"msg": ' in line and 'no session was deleted; before the sweep this run had purged' in line]
    assert lines, output[-4000:]
    assert 'session store permissions: not checked (the user may not run ACL DRYRUN' in output, output[-4000:]
    assert 'purged the token cache (backup in ' in lines[0] and 'set session_state_store.refresh_on_startup' in lines[0]
    assert 'dr_rollback.yml -e vllm_dr_rollback_dir=' in lines[0]
    assert 'nothing was deleted' not in output
    assert admin.ping()
