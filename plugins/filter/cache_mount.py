# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations
DOCUMENTATION = r"""
name: cache_mount
short_description: The volume mount of a container that holds the token cache
version_added: 0.1.0
description:
  - The named container's volume mount whose C(mountPath) is the deepest above the cache file (a relative cache path
    is taken from the container's C(workingDir)); none when no such container runs or no volume holds the cache.
options:
  _input:
    description: The containers of the pod template.
    type: list
    elements: dict
    required: true
  container:
    description: The container that reads the cache.
    type: str
    required: true
  cache_path:
    description: The token cache's path in that container.
    type: str
    required: true
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: The volume that holds the token cache
  ansible.builtin.set_fact:
    mount: >-
      {{ deployment.spec.template.spec.containers | inferops.vllm_dr.cache_mount('vllm', '/data/token_cache.db') }}
"""

RETURN = r"""
_value:
  description: The volume mount (C(name), C(mountPath)...), or none.
  type: dict
"""

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._cache_reach import container_cache_mount


def cache_mount(containers, container, cache_path):
    return container_cache_mount(containers, container, cache_path)


class FilterModule:
    def filters(self):
        return {'cache_mount': cache_mount}
