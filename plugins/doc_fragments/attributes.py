# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # The attributes every module of the collection shares; with ansible.builtin.action_common_attributes, which
    # describes them.
    DOCUMENTATION = r"""
options: {}
attributes:
  platform:
    platforms: posix
"""

    # An _info module: it reads and changes nothing, so a dry run is the same run, and there is no change to show.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - The module only reads; it runs the same way in check mode.
  diff_mode:
    support: N/A
    details:
      - The module only reads; there is never a change to show.
"""
