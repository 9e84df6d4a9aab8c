#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_session_sweep
short_description: Report, sweep and restore vLLM sessions in Redis or etcd
version_added: 0.1.0
description:
  - After a restore from a snapshot, the vLLM session store holds sessions whose refresh tokens the identity
    provider has rotated since, or that expired while the snapshot sat on disk. This module reports them,
    removes them (the incident's C(refresh_on_startup) sweep, or a forced regeneration of every session), and
    puts them back from its backup.
  - Safe on a live production store. Every removed session is written to O(backup_path) (JSON Lines, mode
    C(0600), all fields as exact bytes) and fsynced before it is deleted. Each delete is conditional and
    atomic on the server (Redis, a script that compares the expiry and refresh token; etcd, a transaction on
    C(mod_revision)), so a session refreshed while the sweep runs survives and is counted in
    RV(changed_during_sweep).
  - Works in batches (O(batch_size)), can be throttled (O(max_rate)) and guarded (O(max_delete)); memory
    use does not grow with the store.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.session_store
  - inferops.vllm_dr.session_read
  - inferops.vllm_dr.redis
  - inferops.vllm_dr.etcd
attributes:
  check_mode:
    support: full
    details: Counts exactly what would be removed or restored; deletes and writes nothing.
  diff_mode:
    support: full
    details: Session counts before and after.
  platform:
    platforms: posix
options:
  state:
    description:
      - V(reported) reads and counts, changing nothing.
      - V(swept) removes the sessions chosen by O(select) (and O(malformed)).
      - V(restored) puts back the sessions of the backup O(backup_path) that do not exist again. A live
        session is never overwritten, and a session whose Redis TTL ran out meanwhile is not restored.
    type: str
    choices: [reported, swept, restored]
    default: reported
  malformed:
    description:
      - What to do with entries under the pattern that are not judgeable sessions, a missing or unreadable
        expiry (RV(malformed)), or a key of the wrong type (RV(wrong_type)).
      - V(keep) counts them and leaves them alone. V(sweep) removes them too (with a backup). Redis keys that
        are neither a hash nor a string are never removed.
    type: str
    choices: [keep, sweep]
    default: keep
  backup:
    description:
      - Write every removed session to O(backup_path) before deleting it.
      - Must be set to V(false) explicitly to sweep without a backup.
    type: bool
    default: true
  backup_path:
    description:
      - The backup file (JSON Lines, mode C(0600)). Required for O(state=swept) unless O(backup=false), and the
        file read by O(state=restored). Its directory is created (mode C(0700)) when missing.
      - A new file is created exclusively. An existing file is continued only when it is a backup this module
        wrote for the same kind of store, owned by the user running the module and not open to group or others;
        anything else is refused. Re-running an interrupted sweep with the same O(backup_path) appends a new run
        to it, after cutting off a torn last line that a failed write left (its sessions were never deleted).
      - One sweep at a time writes a backup file (an exclusive lock); a second one is refused before it deletes
        anything.
    type: path
  max_delete:
    description:
      - Refuse, before deleting anything, when more sessions than this would be removed. The count is a full
        read-only pass, and the sweep itself never deletes more than this.
    type: int
notes:
  - Session ids may appear in results (RV(sample_ids)); token values never do.
  - Redis reads are pipelined (one write and one read per batch and stage, C(SCAN), C(HGETALL), C(PTTL)) and sent as
    soon as C(SCAN) names the keys. The module judges one batch while the server reads the next, a backup thread
    fsyncs the victims (several batches at once when the disk is slow), and a batch's delete is sent once its backup
    is durable. With the C(hiredis) Python library installed, replies are parsed several times faster.
  - Redis Cluster primaries are swept in parallel; each batch of a primary is deleted by one run of the server-side
    delete script (flagged C(allow-cross-slot-keys), Redis 7.0 and later, Valkey); a run the primary refuses (a slot
    moved or being migrated) deletes nothing and is run again per hash slot, following the redirections.
  - An etcd session's lease is not restored; the session is put back without one.
seealso:
  - module: inferops.vllm_dr.vllm_token_cache
"""

EXAMPLES = r"""
- name: What would the incident's refresh_on_startup sweep remove?
  inferops.vllm_dr.vllm_session_sweep:
    login_host: redis-service
  register: sessions

- name: Sweep expired sessions, keeping a backup, at most 5000 per second
  inferops.vllm_dr.vllm_session_sweep:
    login_host: redis-service
    state: swept
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl
    max_rate: 5000
    max_delete: 200000

- name: Remove only sessions whose refresh token the identity provider revoked
  inferops.vllm_dr.vllm_session_sweep:
    backend: redis_sentinel
    sentinel_hosts: [10.0.0.5:26379, 10.0.0.6:26379]
    login_password: "{{ redis_password }}"
    state: swept
    select: revoked
    introspection_url: https://idp.example.com/oauth2/introspect
    introspection_client_id: vllm-dr
    introspection_client_secret: "{{ introspection_secret }}"
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl

- name: Sweep every primary of a TLS cluster
  inferops.vllm_dr.vllm_session_sweep:
    backend: redis_cluster
    login_host: redis-cluster-0
    tls: true
    ca_certs: /etc/ssl/redis-ca.pem
    state: swept
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl

- name: Sessions in etcd
  inferops.vllm_dr.vllm_session_sweep:
    backend: etcd
    etcd_endpoints: [https://etcd-0:2379]
    ca_cert: /etc/etcd/ca.pem
    state: swept
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl

- name: Put the swept sessions back
  inferops.vllm_dr.vllm_session_sweep:
    login_host: redis-service
    state: restored
    backup_path: /var/backups/vllm_dr/run-42/sessions.jsonl
"""

RETURN = r"""
scanned:
  description: Entries read under the pattern or prefix.
  type: int
  returned: always
  sample: 1200
matched:
  description: Entries chosen for removal (in check mode and V(reported), the ones that would be removed).
  type: int
  returned: always
  sample: 412
deleted:
  description: Entries removed.
  type: int
  returned: always
  sample: 410
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
changed_during_sweep:
  description: Sessions refreshed between their read and their delete, and therefore kept.
  type: int
  returned: always
  sample: 2
restored:
  description:
    - Sessions put back by O(state=restored) (in check mode, that would be put back).
    - A key that several runs in the file removed (it came back in between) is restored as the last run saw it.
  type: int
  returned: always
  sample: 410
skipped_foreign:
  description:
    - Entries of the backup that a sweep of this store could not have written (a key outside O(key_pattern) or
      O(key_prefix), or a type the sweep does not back up); never written. RV(foreign_entries) names some.
  type: int
  returned: always
  sample: 0
foreign_entries:
  description: Up to 10 of the entries counted in RV(skipped_foreign), as type and key.
  type: list
  elements: str
  returned: always
  sample: ["hash config:admin"]
skipped_invalid:
  description:
    - Lines of the backup that are not valid entries (a torn last line of an interrupted write, a line edited
      by hand, an expiry out of range or one the server refuses); never written, and the restore goes on with
      the next line. RV(invalid_lines) names them, and each gets a warning.
  type: int
  returned: always
  sample: 0
invalid_lines:
  description: >-
    Up to 100 of the lines counted in RV(skipped_invalid), as line number (or session key) and problem (never a
    value).
  type: list
  elements: str
  returned: always
  sample: ["line 2041: not JSON (a torn last line of an interrupted write)"]
skipped_existing:
  description: Backed-up sessions not restored because the key exists again.
  type: int
  returned: always
  sample: 0
skipped_expired:
  description: Backed-up sessions not restored because their Redis TTL ran out since the backup.
  type: int
  returned: always
  sample: 0
backup_path:
  description: The backup file written or read; V(null) when there was none.
  type: str
  returned: always
  sample: /var/backups/vllm_dr/run-42/sessions.jsonl
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
  description: Seconds the module spent on the store.
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
  description: Up to 10 ids of sessions chosen for removal. Never a token.
  type: list
  elements: str
  returned: always
  sample: ["0x1a2b3c"]
store:
  description: The server(s) the module worked on.
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
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._files import BackupError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.errors import StoreError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.store_options import SESSION_STORE_RULES
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.stores import open_store
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.reading import (
    check_read_params, introspector, read_argument_spec, read_options)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._sessions.sweep import (
    RestoreError, SweepError, SweepOptions, Sweeper, report, restore)
from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError


def argument_spec() -> dict:
    spec = read_argument_spec()
    spec.update(
        state=dict(type='str', default='reported', choices=['reported', 'swept', 'restored']),
        malformed=dict(type='str', default='keep', choices=['keep', 'sweep']),
        backup=dict(type='bool', default=True),
        backup_path=dict(type='path'),
        max_delete=dict(type='int'),
    )
    return spec


def module_rules() -> dict:
    """What AnsibleModule checks itself: the store's rules and the module's own."""
    rules = {name: (list(rule) if isinstance(rule, list) else dict(rule)) for name, rule in SESSION_STORE_RULES.items()}
    rules['required_if'].append(('state', 'restored', ('backup_path',)))
    return rules


def check_params(params: dict) -> None:
    """The ranges AnsibleModule cannot check, all of them before anything is touched."""
    if params['state'] == 'swept' and params['backup'] and not params['backup_path']:
        raise StoreError('state=swept needs backup_path (a JSON Lines file for the removed sessions); '
                         'set backup=false explicitly to sweep without a backup')
    if params['state'] == 'restored' and not params['backup_path']:
        raise StoreError('state=restored needs backup_path, the file a sweep wrote')
    if params['max_delete'] is not None and params['max_delete'] < 0:
        raise StoreError(f'max_delete {params["max_delete"]} cannot be negative; give the most sessions '
                         'a sweep may remove (0 refuses any)')
    check_read_params(params)


def sweep_options(module: AnsibleModule) -> SweepOptions:
    params = module.params
    return read_options(
        params, state=params['state'], malformed=params['malformed'], max_delete=params['max_delete'],
        backup_path=params['backup_path'], backup=params['backup'], check_mode=module.check_mode,
        introspector=introspector(params) if params['state'] != 'restored' else None)


def run(module: AnsibleModule) -> dict:
    params = module.params
    check_params(params)
    options = sweep_options(module)
    started = time.monotonic()
    store = open_store(params)
    try:
        restored = {'restored': 0, 'skipped_existing': 0, 'skipped_expired': 0, 'skipped_foreign': 0,
                    'skipped_invalid': 0, 'foreign_entries': [], 'invalid_lines': []}
        if params['state'] == 'restored':
            restored.update(restore(store, params['backup_path'], module.check_mode))
            restored.pop('in_backup')
            result = report(Sweeper(store, options).stats, options, started)
        else:
            sweeper = Sweeper(store, options)
            try:
                result = report(sweeper.sweep(), options, started)
            finally:
                warn_repaired(module, sweeper)
        result.update(restored, store=store.location, server=store.server)
    finally:
        store.close()
    writes_backup = params['state'] == 'restored' or (params['state'] == 'swept' and params['backup'])
    result['backup_path'] = params['backup_path'] if writes_backup else None
    warn_skipped(module, result)
    removed = result['matched'] if module.check_mode else result['deleted']
    result['changed'] = bool(removed if params['state'] == 'swept' else result['restored'])
    if module._diff:
        result['diff'] = diff(params['state'], result, removed)
    return result


def diff(state: str, result: dict, removed: int) -> dict:
    if state == 'restored':
        return {'before': {'restorable_sessions_missing': result['restored'] + result['skipped_expired']},
                'after': {'restorable_sessions_missing': result['skipped_expired']}}
    return {'before': {'sessions': result['scanned'], 'matching': result['matched']},
            'after': {'sessions': result['scanned'] - removed, 'matching': result['matched'] - removed}}


def warn_skipped(module: AnsibleModule, result: dict) -> None:
    """One warning for each bad backup line the restore named, one for any beyond them, one for foreign entries."""
    path = module.params['backup_path']
    for line in result['invalid_lines']:
        module.warn(f'backup_path {path}: skipped {line}')
    unnamed = result['skipped_invalid'] - len(result['invalid_lines'])
    if unnamed > 0:
        module.warn(f'backup_path {path}: {unnamed} more lines that are not valid entries were skipped; see skipped_invalid')
    if result['skipped_foreign']:
        module.warn(f'backup_path {path}: {result["skipped_foreign"]} entries outside key_pattern/key_prefix or of a type '
                    'a sweep never writes were skipped; see skipped_foreign')


def warn_repaired(module: AnsibleModule, sweeper: Sweeper) -> None:
    if sweeper.writer is not None and sweeper.writer.repaired:
        module.warn(f'backup_path {sweeper.writer.path}: cut off a torn last line ({sweeper.writer.repaired} bytes) that an '
                    'interrupted write left; the session it began to record was never deleted')


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True, **module_rules())
    try:
        result = run(module)
    except SweepError as exc:
        # what was deleted before the sweep stopped is a change, and the backup holds it
        deleted = exc.stats.deleted if exc.stats is not None else 0
        module.fail_json(msg=str(exc), changed=deleted > 0, deleted=deleted,
                         backup_path=module.params['backup_path'] if deleted else None)
    except RestoreError as exc:
        # what was restored before the restore stopped is a change
        module.fail_json(msg=str(exc), changed=True, restored=exc.restored)
    except (StoreError, BackupError, TimestampError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
