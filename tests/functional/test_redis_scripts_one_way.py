"""Every Redis script runs one way (EVALSHA, loaded again on NOSCRIPT): the token swap needs no EVAL grant.

Real redis-server with an ACL user that may run EVALSHA and SCRIPT LOAD but not EVAL.
"""

from __future__ import annotations

from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import session_store_argument_spec
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store
from harness.servers import RedisServer

ADMIN = ('admin', 'admin-pw')
# what the refresh probe's write-back needs: the session hash and scripts by their SHA1, no EVAL
PROBER = 'user prober on >prober-pw ~vllm:session:* -@all +ping +hget +hset +hgetall +evalsha +script|load'


def test_the_token_swap_runs_by_sha_for_a_user_without_eval_and_after_a_script_flush(tmp_path):
    with RedisServer(workdir=str(tmp_path / 'redis'), admin=ADMIN, config=[PROBER, 'user default off']) as server:
        admin = server.client()
        admin.hset('vllm:session:p', mapping={'refresh_token': 'old', 'access_token': 'a'})
        params = {name: spec.get('default') for name, spec in session_store_argument_spec().items()}
        params.update(login_host='127.0.0.1', login_port=server.port, login_user='prober', login_password='prober-pw')
        store = open_store(params)
        try:
            new = {b'refresh_token': b'new', b'access_token': b'b'}
            assert store.swap_tokens('p', b'old', new) == 'written'
            admin.script_flush()  # a restart or failover loses the scripts: the next call loads it again
            assert store.swap_tokens('p', b'old', new) == 'already'
            assert store.swap_tokens('p', b'old', {**new, b'refresh_token': b'newer'}) == 'conflict'
        finally:
            store.close()
        assert admin.hget('vllm:session:p', 'refresh_token') == b'new'
