# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: yaml_set
short_description: Set one key of a YAML document, keeping its comments and layout
version_added: 0.1.0
description:
  - Edits the text of a block-style YAML document so that O(path) holds O(value); every other line, comment and
    key order stays as it was, each line with its own line break (CRLF stays CRLF; a line added gets the document's
    first line break), and a document without a final line break stays without one.
  - The result is parsed back and compared with the intended document. When the text edit cannot express it
    (flow style, anchors, uneven indentation), the filter fails with a message that says what to do, so no
    comment is ever lost silently; with O(rewrite=true) it writes the whole document out again from its parsed
    form instead (comments and layout lost) and reports C(formatting_kept=false).
options:
  _input:
    description: The YAML text.
    type: str
    required: true
  path:
    description: Dotted key path, for example C(session_state_store.refresh_on_startup).
    type: str
    required: true
  value:
    description: The value to set.
    type: raw
    required: true
  rewrite:
    description:
      - Whether the document may be written out again from its parsed form, losing its comments and layout, when
        the text edit cannot keep them. The caller then reads C(formatting_kept) and decides.
      - When V(false), such a document makes the filter fail instead.
    type: bool
    default: false
author:
  - inferops SRE (@inferops)
"""

EXAMPLES = r"""
- name: Turn on the start-up sweep in vllm.yaml
  ansible.builtin.set_fact:
    edited: "{{ config_text | inferops.vllm_dr.yaml_set('session_state_store.refresh_on_startup', true) }}"

- name: Allow a rewrite that loses comments, and say so
  ansible.builtin.set_fact:
    edited: "{{ config_text | inferops.vllm_dr.yaml_set('session_state_store.refresh_on_startup', true, rewrite=true) }}"
"""

RETURN = r"""
_value:
  description: The edit.
  type: dict
  contains:
    text:
      description: The new document.
      type: str
    changed:
      description: Whether the document differs from the one given.
      type: bool
    formatting_kept:
      description:
        - Whether every line but the one set (or those added) was kept byte for byte, line breaks included;
          V(false) only with O(rewrite=true).
      type: bool
    was:
      description: The value O(path) held before, V(null) when it was missing.
      type: raw
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.inferops.vllm_dr.plugins.plugin_utils._yaml_edit import YamlEditError, set_key


def yaml_set(text, path, value, rewrite=False):
    try:
        return set_key(str(text or ''), path, value, rewrite=bool(rewrite))
    except YamlEditError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {'yaml_set': yaml_set}
