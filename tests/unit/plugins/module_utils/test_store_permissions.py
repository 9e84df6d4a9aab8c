"""The verdict on the store's answers about what its user may do, and the one line that refuses a run."""

from __future__ import annotations

import re

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.permissions import (
    REDIS_NEEDS, judge_etcd, judge_redis, probe_key, refusal, unchecked)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_deletes import DELETE_SCRIPT
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.redis_partition import RESTORE_SCRIPT

ALL_OK = [(name, b'OK') for name, _command in REDIS_NEEDS]


def denied(name):
    return f"This user has no permissions to run the '{name}' command"


def test_user_allowed_everything_is_refused_nothing():
    verdict = judge_redis('sweeper', 'vllm:session:*', ALL_OK)
    assert verdict['checked'] and verdict['missing'] == [] and verdict['grant'] is None
    assert refusal(verdict, 'redis 127.0.0.1:6379') is None


def test_user_that_may_not_unlink_is_refused_in_one_line_naming_the_command_and_the_grant():
    answers = [(name, denied(name) if name == 'unlink' else 'OK') for name, _command in REDIS_NEEDS]
    verdict = judge_redis('reader', 'vllm:session:*', answers)
    assert verdict['missing'] == ['unlink'] and verdict['grant'] == 'ACL SETUSER reader +unlink'
    line = refusal(verdict, 'redis 127.0.0.1:6379')
    assert line == ("the session store user 'reader' at redis 127.0.0.1:6379 cannot do what the sweep of the stale "
                    'sessions and its restore need: may not run unlink; grant it: ACL SETUSER reader +unlink; then '
                    're-run (nothing was changed)')


def test_each_partition_denying_the_same_command_names_it_once():
    answers = [('unlink', denied('unlink')), ('unlink', denied('unlink')), ('evalsha', b'OK')]
    assert judge_redis('reader', 'vllm:session:*', answers)['missing'] == ['unlink']


def test_keys_the_user_may_not_write_are_granted_by_the_key_pattern():
    answers = [('unlink', "This user has no permissions to access the 'vllm:session:x' key"), ('get', b'OK')]
    verdict = judge_redis('sweeper', 'vllm:session:*', answers)
    assert verdict['missing'] == ['keys vllm:session:*'] and verdict['grant'] == 'ACL SETUSER sweeper ~vllm:session:*'
    assert ('may not delete or write the keys vllm:session:*; grant it: ACL SETUSER sweeper ~vllm:session:*'
            in refusal(verdict, 'redis x'))


def test_renamed_command_is_named_with_rename_command_not_an_acl_grant():
    answers = [('unlink', Exception("ERR Command 'unlink' not found")), ('get', b'OK')]
    verdict = judge_redis('sweeper', 'vllm:session:*', answers)
    assert verdict['renamed'] == ['unlink'] and verdict['grant'] is None
    assert 'rename-command' in refusal(verdict, 'redis x') and 'UNLINK' in refusal(verdict, 'redis x')


def test_permissions_that_could_not_be_checked_refuse_nothing():
    assert refusal(unchecked('the server has no ACL DRYRUN'), 'redis x') is None
    assert refusal(None, 'redis x') is None


def test_etcd_user_without_readwrite_is_told_the_etcdctl_grant():
    verdict = judge_etcd('reader', 'vllm/session/', allowed=False)
    assert verdict['missing'] == ['readwrite on vllm/session/']
    assert verdict['grant'] == 'etcdctl role grant-permission <role of reader> readwrite vllm/session/ --prefix'
    assert ('has no readwrite on vllm/session/; grant it: etcdctl role grant-permission <role of reader> readwrite '
            'vllm/session/ --prefix') in refusal(verdict, 'etcd http://127.0.0.1:2379')
    assert refusal(judge_etcd('sweeper', 'vllm/session/', allowed=True), 'etcd x') is None


def test_probe_key_matches_the_pattern():
    assert probe_key('vllm:session:*') == 'vllm:session:vllm-dr-permission-probe'
    assert probe_key('app:?:s[ab]:\\*x') == 'app:p:sp:*x'


def test_every_command_the_delete_and_restore_scripts_call_is_asked():
    called = set(re.findall(r"pcall\('([A-Z]+)'|call\('([A-Z]+)'", DELETE_SCRIPT + RESTORE_SCRIPT))
    called = {(a or b).lower() for a, b in called}
    assert called and called <= {name for name, _command in REDIS_NEEDS}, called


def test_every_command_the_sweep_reads_with_is_asked():
    asked = {name for name, _command in REDIS_NEEDS}
    assert {'scan', 'hgetall', 'get', 'pttl', 'script|load', 'evalsha', 'exists'} <= asked
