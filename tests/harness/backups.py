"""A sweep's backup files read by their documented format, not by the module's reader."""

from __future__ import annotations

import json


def restorable(*paths) -> dict:
    """key -> fields of every entry the backups say was deleted (format 2: a run's not_deleted names entry numbers)."""
    found = {}
    for path in paths:
        runs = []
        with open(path, 'rb') as handle:
            for raw in handle:
                try:
                    line = json.loads(raw)
                except ValueError:
                    assert raw is not None and not raw.endswith(b'\n'), 'only a torn last line may be unreadable'
                    continue
                if 'vllm_dr_backup' in line:
                    runs.append(([], set(), set()))
                elif 'not_deleted' in line:
                    # format 1 (before runs were numbered) cancelled by key
                    runs[-1][1 if 'entries' in line else 2].update(line.get('entries', line['not_deleted']))
                else:
                    runs[-1][0].append(line)
        for entries, cancelled, cancelled_keys in runs:
            for number, line in enumerate(entries, 1):
                if number not in cancelled and line['key'] not in cancelled_keys:
                    found[line['key'].encode()] = ({name.encode(): value.encode() for name, value in line['fields'].items()}
                                                   if 'fields' in line else line.get('value', '').encode())
    return found
