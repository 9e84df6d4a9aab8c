#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_token_cache
short_description: Inspect, prune, purge or restore the vLLM on-disk SQLite token cache
version_added: 0.1.0
description:
  - Manages the SQLite token cache a vLLM service keeps on disk (C(/var/lib/vllm/token_cache.db)).
  - After a cluster is restored from a snapshot the cache still holds refresh tokens that the identity
    provider has rotated since, and every refresh fails with C(401 invalid_grant). This module finds such a
    cache (O(restored_at)), removes its expired rows (O(state=pruned)) or the whole cache
    (O(state=absent)), and can put a backup back (O(state=restored)).
  - Before any change the database and its C(-wal), C(-shm) and C(-journal) sidecars are copied to
    C(<name>.<UTC timestamp>.bak*) files of mode C(0600). A prune copies them under SQLite's write lock,
    so nothing written between the backup and the delete can be lost.
  - Counting and pruning run inside SQLite; rows are never loaded into memory.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.token_cache
attributes:
  check_mode:
    support: full
    details: A dry run reports exactly the rows and files that would be removed or restored.
  diff_mode:
    support: full
    details: Shows the cache files and row counts before and after.
  platform:
    platforms: posix
options:
  state:
    description:
      - V(inspected) reports what the cache holds and changes nothing. A file that is not a healthy SQLite
        database is reported in RV(integrity), not failed, so that a diagnosis can see it.
      - V(pruned) deletes the rows whose O(expires_column) is before O(cutoff), then runs C(VACUUM).
        It fails on a damaged database; use V(absent) for that.
      - V(absent) removes the database and its C(-wal), C(-shm) and C(-journal) files, damaged or not.
        This is the incident's purge; the service rebuilds the cache from fresh credentials.
        A cache that is empty (0 bytes, or an SQLite database without any table, as a restarted service
        leaves it) holds no token, so it is removed with no backup, and RV(msg) says so. A non-empty file that
        is not SQLite at all is refused, since it may not be the cache; so is a database whose tables do not
        include O(table), since O(table) may be wrong.
      - V(restored) puts the backup set named by O(restore_from) back in place. The current files are
        backed up first.
    type: str
    choices: [inspected, pruned, absent, restored]
    default: inspected
  backup:
    description:
      - Copy the database and its sidecars before any change.
      - Turning it off means a change cannot be undone.
    type: bool
    default: true
  backup_dir:
    description:
      - Where backups go. Every directory level the module creates is made mode C(0700), whatever the umask.
      - An existing directory must be a real directory (not a symbolic link), owned by the user running the
        module or by root, and writable by no one else (not world-writable, and group-writable only by that
        user's own group). Otherwise the module fails before anything is touched, in check mode too.
      - Defaults to the directory of O(path).
    type: path
  restore_from:
    description:
      - With O(state=restored), the main C(.bak) file of a backup set, as listed in RV(backup_files) of
        an earlier run. Its C(.bak-wal), C(.bak-shm) and C(.bak-journal) companions are restored with it.
    type: path
  merge:
    description:
      - With O(state=restored) and a cache that holds rows now (the service wrote them since the run), put the
        backup's rows that the cache lacks back into it, in one transaction, and keep every row and file written
        since (a row in both keeps its current value), so that sessions signed in after the run go on refreshing.
      - A cache that cannot be merged (no token table or primary key of the backup's shape, or not readable as
        SQLite) is refused in one line naming the rows replacing it would lose, before anything is changed.
      - V(false) replaces the cache files with the backup's, as a forced rollback (the current files are backed up
        first). With no rows now, the files are replaced either way.
    type: bool
    default: true
notes:
  - The module acts on no symbolic link at O(path), its sidecars or O(backup_dir); see those options.
  - The files this module reports are the state found before it acted; RV(removed_rows),
    RV(removed_files) and RV(restored_files) say what it did.
  - Restoring a cache with a running service is safe for the file system but the service may keep the
    old file open; restart it afterwards.
"""

EXAMPLES = r"""
- name: Is the token cache older than the restore?
  inferops.vllm_dr.vllm_token_cache:
    path: /var/lib/vllm/token_cache.db
    restored_at: "2024-07-15T03:00:00Z"
  register: cache

- name: Purge a stale cache, keeping a backup in a run-specific directory
  inferops.vllm_dr.vllm_token_cache:
    path: /var/lib/vllm/token_cache.db
    state: absent
    backup_dir: /var/backups/vllm_dr/run-42
  when: cache.stale

- name: Only drop rows that expired before the restore
  inferops.vllm_dr.vllm_token_cache:
    state: pruned
    cutoff: "2024-07-15T03:00:00Z"

- name: Put the purged cache back
  inferops.vllm_dr.vllm_token_cache:
    state: restored
    restore_from: /var/backups/vllm_dr/run-42/token_cache.db.20240715T031500.000000Z.bak
"""

RETURN = r"""
path:
  description: The cache file the module looked at.
  type: str
  returned: always
  sample: /var/lib/vllm/token_cache.db
files:
  description: The database and sidecar files that existed when the module started.
  type: list
  elements: str
  returned: always
  sample: ["/var/lib/vllm/token_cache.db", "/var/lib/vllm/token_cache.db-wal", "/var/lib/vllm/token_cache.db-shm"]
exists:
  description: Whether the cache file existed.
  type: bool
  returned: always
  sample: true
size_bytes:
  description: Size of the database file in bytes (sidecars not included).
  type: int
  returned: always
  sample: 4096000
mtime:
  description: When the cache was last written (the newer of the database and its C(-wal) file), ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-10T12:00:00Z"
stale:
  description: V(true) when O(restored_at) is given and the cache was last written before it.
  type: bool
  returned: always
  sample: true
stale_reason:
  description: Why the cache is considered stale, in one sentence; V(null) when it is not.
  type: str
  returned: always
  sample: "token_cache.db was last written at 2024-07-10T12:00:00Z, before the restore completed at 2024-07-15T03:00:00Z: ..."
integrity:
  description: V(ok), or the SQLite message for a file that is not a healthy database; V(null) when there is no file.
  type: str
  returned: always
  sample: ok
rows:
  description: Rows in O(table); V(null) when the database could not be read.
  type: int
  returned: always
  sample: 1000
expired_rows:
  description: Rows whose expiry is before O(cutoff).
  type: int
  returned: always
  sample: 412
malformed_rows:
  description: Rows whose expiry could not be read as a timestamp; they are never pruned.
  type: int
  returned: always
  sample: 0
earliest_expiry:
  description: The earliest expiry in the table, ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-01T00:00:00Z"
latest_expiry:
  description: The latest expiry in the table, ISO 8601 UTC.
  type: str
  returned: always
  sample: "2024-07-20T14:30:00Z"
empty:
  description:
    - V(true) when the cache file is empty (0 bytes) or an SQLite database without any table; it holds no
      token, so V(state=absent) removes it with no backup. RV(rows) is then V(0).
  type: bool
  returned: always
  sample: false
msg:
  description: With O(state=absent) on an empty cache, says that it held no token table and was removed with no backup.
  type: str
  returned: when the cache was empty and O(state=absent)
  sample: "/var/lib/vllm/token_cache.db held no token table (an empty database): it was removed with no backup, ..."
removed_rows:
  description: Rows deleted (in check mode, rows that would be deleted).
  type: int
  returned: always
  sample: 412
removed_files:
  description: Files deleted (in check mode, files that would be deleted).
  type: list
  elements: str
  returned: always
  sample: ["/var/lib/vllm/token_cache.db", "/var/lib/vllm/token_cache.db-wal"]
restored_files:
  description: Files put back from O(restore_from).
  type: list
  elements: str
  returned: always
  sample: ["/var/lib/vllm/token_cache.db"]
restored_rows:
  description: With O(merge), the backup's rows put back into the cache as it is now (those it lacked).
  type: int
  returned: always
  sample: 3
kept_rows:
  description: With O(merge), the rows the cache held before they were put back (written since the run), all kept.
  type: int
  returned: always
  sample: 2
backup_files:
  description: Backup files written by this run, mode C(0600).
  type: list
  elements: str
  returned: always
  sample: ["/var/lib/vllm/token_cache.db.20240715T031500.000000Z.bak"]
backup_checksums:
  description:
    - The SHA-256 of each file in RV(backup_files), as written, so that a copy of a backup can be checked.
  type: dict
  returned: always
  sample: {"/var/lib/vllm/token_cache.db.20240715T031500.000000Z.bak": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import (
    TokenCacheError, cache_of, manage, read_times, token_cache_argument_spec)


def run(module: AnsibleModule) -> dict:
    params = module.params
    cutoff, restored_at = read_times(params)
    result = manage(
        cache_of(params),
        params['state'],
        cutoff=cutoff,
        restored_at=restored_at,
        backup=params['backup'],
        backup_dir=params['backup_dir'],
        restore_from=params['restore_from'],
        check_mode=module.check_mode,
        merge=params['merge'],
    )
    for warning in result.pop('warnings'):
        module.warn(warning)
    if not module._diff:
        del result['diff']
    return result


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            token_cache_argument_spec(),
            state=dict(type='str', default='inspected', choices=['inspected', 'pruned', 'absent', 'restored']),
            backup=dict(type='bool', default=True),
            backup_dir=dict(type='path'),
            restore_from=dict(type='path'),
            merge=dict(type='bool', default=True),
        ),
        required_if=[('state', 'restored', ['restore_from'])],
        supports_check_mode=True,
    )
    try:
        result = run(module)
    except (TokenCacheError, TimestampError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
