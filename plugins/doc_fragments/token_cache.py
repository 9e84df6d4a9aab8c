# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # The token cache and how it is read: the options of inferops.vllm_dr.vllm_token_cache and
    # inferops.vllm_dr.vllm_token_cache_info (module_utils/_token_cache.py, token_cache_argument_spec).
    DOCUMENTATION = r"""
options:
  path:
    description:
      - The token cache database file.
      - It must be the real file, not a symbolic link, and none of its C(-wal), C(-shm) and C(-journal)
        sidecars may be a link. The module refuses a link with one line naming it and its target, because SQLite
        would read through it while a purge would remove only the link and leave the tokens in its target.
        Links among the parent directories are followed; they lead every run to the same file.
    type: path
    default: /var/lib/vllm/token_cache.db
  restored_at:
    description:
      - When the snapshot restore completed, as ISO 8601 (V(2024-07-15T03:00:00Z), an offset, fractional
        seconds) or epoch seconds, in the years 0001 to 9999; anything else fails before anything is touched.
      - With it, RV(stale) is V(true) when the cache was last written (the newer of the database and its
        C(-wal) file) before that time.
    type: str
  cutoff:
    description:
      - Rows whose expiry is before this time count as expired. ISO 8601 or epoch seconds, in the years
        0001 to 9999; anything else fails before anything is touched.
      - Defaults to now.
    type: str
  table:
    description:
      - The table that holds the tokens.
    type: str
    default: tokens
  expires_column:
    description:
      - The column of O(table) that holds each token's expiry, as epoch seconds, epoch milliseconds or
        ISO 8601 text. Rows whose value cannot be read, a moment outside the years 0001 to 9999 included
        (V(1e300), a 17-digit epoch, year 0, an infinity), are never pruned; RV(malformed_rows) counts them.
    type: str
    default: expires_at
  lock_timeout:
    description:
      - Seconds to wait for a running service to release the database lock before failing.
    type: float
    default: 5.0
"""
