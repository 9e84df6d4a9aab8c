#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_session_info
short_description: Count the vLLM sessions in Redis or etcd that a sweep would remove, changing nothing
version_added: 0.1.0
description:
  - After a restore from a snapshot, the vLLM session store holds sessions whose refresh tokens the identity
    provider has rotated since, or that expired while the snapshot sat on disk. This module reads every session
    and counts those O(select) chooses (RV(matched)), the ones M(inferops.vllm_dr.vllm_session_sweep) would
    remove, for a job that may only read (a read-only store user is enough).
  - It never writes, deletes or backs up anything; in check mode it runs the same way.
  - It reads and judges the sessions exactly as M(inferops.vllm_dr.vllm_session_sweep) with
    O(inferops.vllm_dr.vllm_session_sweep#module:state=reported) does, in batches (O(batch_size)) and at a pace
    (O(max_rate)) of the user's choice; memory use does not grow with the store.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.attributes
  - inferops.vllm_dr.attributes.info_module
  - inferops.vllm_dr.session_store
  - inferops.vllm_dr.session_read
  - inferops.vllm_dr.redis
  - inferops.vllm_dr.etcd
options:
  check_permissions:
    description:
      - Also ask whether the store's user may do what a sweep and the restore of its backup need (RV(permissions)),
        without changing anything.
      - Redis is asked with C(ACL DRYRUN) (Redis 7.0 and later, Valkey), for each command the sweep and the restore
        send (C(SCAN), C(HGETALL), C(GET), C(PTTL), C(SCRIPT LOAD), C(EVALSHA), C(HMGET), C(TYPE), C(UNLINK),
        C(EXISTS), C(TIME), C(HSET), C(SET), C(PEXPIREAT)) with a session key; the user needs C(+acl|dryrun) for
        it. etcd is asked with a transaction whose comparison never holds and whose other branch would delete the
        prefix; etcd checks both branches' permissions and runs neither.
      - Where the server has no C(ACL DRYRUN) or the user may not run it, RV(permissions.checked) is V(false) with
        the reason; nothing is guessed.
    type: bool
    default: false
notes:
  - Session ids may appear in results (RV(sample_ids)); token values never do.
  - With O(backend=redis), a Redis ACL user allowed only the read and connection commands (C(+@read +@connection)) on
    the session keys is enough.
seealso:
  - module: inferops.vllm_dr.vllm_session_sweep
    description: Sweep the sessions this module counts, with a backup, and restore them.
"""

EXAMPLES = r"""
- name: How many sessions would the incident's refresh_on_startup sweep remove?
  inferops.vllm_dr.vllm_session_info:
    login_host: redis-service
    login_user: vllm-dr-readonly
    login_password: "{{ redis_readonly_password }}"
  register: sessions

- name: Sessions that expired before the restore, in etcd
  inferops.vllm_dr.vllm_session_info:
    backend: etcd
    etcd_endpoints: [https://etcd-0:2379]
    etcd_ca_cert: /etc/etcd/ca.pem
    cutoff: "2024-07-15T03:00:00Z"
  register: sessions

- name: Is the probe session there?
  inferops.vllm_dr.vllm_session_info:
    login_host: redis-service
    select: all
    key_pattern: "vllm:session:s0"
  register: probe_session
"""

RETURN = r"""
scanned:
  description: Entries read under the pattern or prefix.
  type: int
  returned: always
  sample: 1200
matched:
  description: Sessions O(select) chooses, the ones a sweep would remove.
  type: int
  returned: always
  sample: 412
malformed:
  description: Sessions with a missing or unreadable expiry (with O(select=revoked), or no refresh token).
  type: int
  returned: always
  sample: 3
wrong_type:
  description: Keys under the pattern that are not session hashes (etcd values that are not JSON objects).
  type: int
  returned: always
  sample: 1
earliest_expiry:
  description: Earliest session expiry seen, ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-10T12:00:00Z"
latest_expiry:
  description: Latest session expiry seen, ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-20T14:30:00Z"
cutoff:
  description: The cutoff used, ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-15T03:00:00Z"
duration_s:
  description: Seconds the module spent reading the store.
  type: float
  returned: always
  sample: 3.52
watched_matched:
  description: >-
    Whether O(watched_session) is among the RV(matched) sessions; V(null) without O(watched_session).
  type: bool
  returned: always
  sample: true
sample_ids:
  description: Up to 10 ids of the sessions counted in RV(matched). Never a token.
  type: list
  elements: str
  returned: always
  sample: ["0x1a2b3c"]
store:
  description: The server(s) the module read.
  type: str
  returned: always
  sample: "10.0.0.7:6379"
server:
  description:
    - Which server the store runs on, as it names itself (of a cluster, the first primary).
    - Redis and Valkey answer alike but not always in the same words (error texts, INFO fields); this says which
      one answered. Valkey's own version, not the Redis release it is compatible with (its INFO C(redis_version)).
  type: dict
  returned: always
  contains:
    name:
      description: V(redis), V(valkey) or V(etcd); null when the ACL lets the user ask neither INFO nor HELLO.
      type: str
      sample: valkey
    version:
      description: The server's version; null when it could not be asked.
      type: str
      sample: 8.1.8
  sample: {"name": "valkey", "version": "8.1.8"}
permissions:
  description: With O(check_permissions), whether the store's user may do what a sweep and its restore need.
  type: dict
  returned: when O(check_permissions=true)
  contains:
    checked:
      description: Whether the server could be asked; V(false) with RV(permissions.reason) otherwise.
      type: bool
    user:
      description: The store's user (Redis C(default) without O(login_user); etcd null without O(etcd_user)).
      type: str
    missing:
      description: What the user may not do (Redis ACL command names, C(keys <pattern>); etcd C(readwrite on <prefix>)).
      type: list
      elements: str
    renamed:
      description: Redis commands the server does not know (renamed away with C(rename-command)).
      type: list
      elements: str
    grant:
      description: The command that grants what is missing (C(ACL SETUSER ...), C(etcdctl role grant-permission ...)).
      type: str
    reason:
      description: Why the permissions could not be checked.
      type: str
    refusal:
      description: One line that refuses a run needing the sweep, naming what is missing and the grant; null when
        nothing is missing or the permissions could not be checked.
      type: str
  sample: {"checked": true, "user": "reader", "missing": ["unlink"], "renamed": [],
           "grant": "ACL SETUSER reader +unlink", "reason": null, "refusal": "the session store user ..."}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import SESSION_STORE_RULES
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.reading import read_argument_spec, read_sessions
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import SweepError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError


def main() -> None:
    spec = read_argument_spec()
    spec.update(check_permissions=dict(type='bool', default=False))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True, **SESSION_STORE_RULES)
    try:
        result = read_sessions(module.params, check_permissions=module.params['check_permissions'])
    except (SweepError, StoreError, BackupError, TimestampError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
