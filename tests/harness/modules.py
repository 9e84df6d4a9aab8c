"""Run a module's main() in-process, as Ansible would, and return its result."""

from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args


def run_module(module, args, capsys, check_mode=False, diff=False):
    """The module's JSON result, with the exit code as ``_rc``."""
    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    result = json.loads(capsys.readouterr().out)
    result['_rc'] = exit_info.value.code
    return result
