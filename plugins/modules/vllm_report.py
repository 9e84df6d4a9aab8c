#!/usr/bin/python

# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_report
short_description: Write the files of a run's report side by side in one call
version_added: 0.2.0
description:
  - Writes each file of O(files) (a file name and its text) into the directory O(path), which is made with
    O(directory_mode) when it is missing. The runbook writes its JSON, JUnit XML and Markdown reports with it, per
    target and for the fleet.
  - Each file is written beside its final name, made durable and renamed over it, so a reader (a CI stage, a job
    template's artifact collection) sees the previous report or the new one, never a part of one.
  - A file that already holds the same text with O(mode) is left as it is.
  - A O(path) that is a symbolic link is refused before anything is written, as the backups' directory is, so
    that the report never replaces files where the link points.
  - The text is written as given; the report's content comes from the collection's filters and templates, which
    keep secrets out of it.
author:
  - inferops SRE (@inferops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written; the result names the files that would be written.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  path:
    description:
      - The directory that holds the report's files. It is made (with its parents) when missing.
    type: path
    required: true
  files:
    description:
      - File name (without a directory) to its text.
      - A dict or a list is written as JSON, keys sorted and indented by 2, as
        the C(to_nice_json) filter with C(indent=2) writes it.
    type: dict
    required: true
  mode:
    description:
      - The permissions of each file, as an octal string.
    type: str
    default: "0640"
  directory_mode:
    description:
      - The permissions of O(path) when this module makes it, as an octal string. An existing directory keeps its own.
    type: str
    default: "0700"
  latest:
    description:
      - When given, a symbolic link of this name beside O(path) (in its parent directory) is pointed at O(path) once
        the files are written, replaced whole. Runs that share a parent directory each write their own O(path);
        the link names the one written last.
      - A parent directory that is a symbolic link is refused, as O(path) is.
    type: str
"""

EXAMPLES = r"""
- name: Write a report as JSON and Markdown
  inferops.vllm_dr.vllm_report:
    path: /var/lib/vllm_dr/reports
    files:
      vllm-01.json: "{{ result }}"
      vllm-01.md: "{{ lookup('ansible.builtin.template', 'report.md.j2') }}"
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: The files written (in check mode, that would be written), by path.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/vllm_dr/reports/vllm-01.json]
unchanged:
  description: The files that already held the same text with O(mode), by path.
  returned: always
  type: list
  elements: str
  sample: []
created_directory:
  description: Whether O(path) was missing (and made, unless in check mode).
  returned: always
  type: bool
  sample: false
latest:
  description: The link pointed at O(path) (in check mode, that would be), V(null) without O(latest).
  returned: always
  type: str
  sample: /var/lib/vllm_dr/reports/latest
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.inferops.vllm_dr.plugins.module_utils._report_files import ReportError, parse_mode, write_report


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            files=dict(type='dict', required=True),
            mode=dict(type='str', default='0640'),
            directory_mode=dict(type='str', default='0700'),
            latest=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        result = write_report(params['path'], params['files'], parse_mode(params['mode'], 'mode'),
                              parse_mode(params['directory_mode'], 'directory_mode'), check_mode=module.check_mode,
                              latest=params['latest'])
    except ReportError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
