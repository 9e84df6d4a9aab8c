#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_token_cache_info
short_description: Read what the vLLM on-disk SQLite token cache holds, changing nothing
version_added: 0.1.0
description:
  - Reports what the SQLite token cache of a vLLM service (C(/var/lib/vllm/token_cache.db)) holds, and whether it
    is older than a snapshot restore (O(restored_at)). This is the diagnosis of the incident, for a job that may
    only read.
  - Opens the database read-only and writes nothing, no backup either; in check mode it runs the same way.
  - A file that is not a healthy SQLite database is reported in RV(integrity), not failed, so that a diagnosis
    can see it.
  - It reads the cache as M(inferops.vllm_dr.vllm_token_cache) with O(inferops.vllm_dr.vllm_token_cache#module:state=inspected)
    does, and returns the same values.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - inferops.vllm_dr.attributes
  - inferops.vllm_dr.attributes.info_module
  - inferops.vllm_dr.token_cache
notes:
  - The module acts on no symbolic link at O(path) or its sidecars; see O(path).
seealso:
  - module: inferops.vllm_dr.vllm_token_cache
    description: Prune, purge or restore the cache.
"""

EXAMPLES = r"""
- name: Is the token cache older than the restore?
  inferops.vllm_dr.vllm_token_cache_info:
    path: /var/lib/vllm/token_cache.db
    restored_at: "2024-07-15T03:00:00Z"
  register: cache

- name: Say why the cache must be purged
  ansible.builtin.debug:
    msg: "{{ cache.stale_reason }}"
  when: cache.stale

- name: How many tokens expired before the restore?
  inferops.vllm_dr.vllm_token_cache_info:
    cutoff: "2024-07-15T03:00:00Z"
  register: expired
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
      token, so a purge (M(inferops.vllm_dr.vllm_token_cache) with V(state=absent)) removes it with no backup.
      RV(rows) is then V(0).
  type: bool
  returned: always
  sample: false
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._timestamps import TimestampError
from ansible_collections.inferops.vllm_dr.plugins.module_utils._token_cache import (
    TokenCacheError, cache_of, read_times, token_cache_argument_spec)


def main() -> None:
    module = AnsibleModule(argument_spec=token_cache_argument_spec(), supports_check_mode=True)
    try:
        cutoff, restored_at = read_times(module.params)
        result = cache_of(module.params).inspect(cutoff, restored_at)
    except (TokenCacheError, TimestampError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
