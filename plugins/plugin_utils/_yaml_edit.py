# Copyright (c) 2026, inferops SRE
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Set one key of a YAML document by editing its text, so comments, order and quoting survive.

Operators keep notes in vllm.yaml; a dump of the parsed document would drop them. The edit covers block
mappings, the form such files are written in. Whatever it produces is parsed back and must equal the intended
document. When it does not (flow style, anchors, odd indentation), the edit is refused with one message that
says what to do, unless the caller allowed a rewrite from the parsed form (comments and layout lost), which the
result then reports as formatting_kept false.
"""

from __future__ import annotations

import copy
import re

import yaml

# libyaml's loader where PyYAML was built with it: the pure-Python one takes seconds per megabyte
_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
# a line break as YAML reads one; each line keeps its own, so CRLF stays CRLF (and a mixed file stays mixed)
_LINE_BREAK = re.compile(r'\r?\n|\r')


class YamlEditError(ValueError):
    pass


class YamlLayoutError(YamlEditError):
    """The text edit cannot set the key without losing the document's comments and layout."""


def _scalar(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()


def _set_in(data: dict, keys: list, value) -> dict:
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[keys[-1]] = value
    return data


def _get_in(data, keys: list):
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None, False
        data = data[key]
    return data, True


_KEY_LINE = r'^(?P<indent>{indent})(?P<key>{key})\s*:(?P<rest>.*)$'


def _find_key(lines: list, start: int, end: int, indent: str, key: str):
    pattern = re.compile(_KEY_LINE.format(indent=re.escape(indent), key=re.escape(key) + r'|"' + re.escape(key)
                                          + r'"|\'' + re.escape(key) + r'\''))
    for number in range(start, end):
        if pattern.match(lines[number]):
            return number
    return None


def _block_end(lines: list, start: int, indent: str) -> int:
    """The line after the last one that belongs to the block opened at lines[start]."""
    number = start + 1
    last = start
    while number < len(lines):
        line = lines[number]
        stripped = line.strip()
        if stripped and not stripped.startswith('#'):
            if len(line) - len(line.lstrip(' ')) <= len(indent):
                break
            last = number
        number += 1
    return last + 1


def _child_indent(lines: list, start: int, end: int, indent: str) -> str:
    for line in lines[start + 1:end]:
        stripped = line.strip()
        if stripped and not stripped.startswith('#'):
            return line[:len(line) - len(line.lstrip(' '))]
    return indent + '  '


def _edit(lines: list, keys: list, value, start: int, end: int, indent: str) -> None:
    key = keys[0]
    number = _find_key(lines, start, end, indent, key)
    if number is None:
        new = []
        for depth, name in enumerate(keys):
            prefix = indent + '  ' * depth
            new.append(f'{prefix}{name}: {_scalar(value)}' if depth == len(keys) - 1 else f'{prefix}{name}:')
        lines[end:end] = new
        return
    if len(keys) == 1:
        match = re.match(_KEY_LINE.format(indent=re.escape(indent), key=r'[^:]+'), lines[number])
        comment = re.search(r'\s+#.*$', match.group('rest'))
        lines[number] = f'{indent}{match.group("key")}: {_scalar(value)}{comment.group(0) if comment else ""}'
        return
    block_end = _block_end(lines, number, indent)
    _edit(lines, keys[1:], value, number + 1, block_end, _child_indent(lines, number, block_end, indent))


def _load(text: str):
    # the C loader takes only an exact str: ansible-core before 2.19 hands filters a subclass (AnsibleUnsafeText)
    # whose own __str__ returns itself; str.__str__ makes the plain copy
    return yaml.load(str.__str__(text), Loader=_LOADER)  # nosec B506 - a safe loader, the C one where it exists


def _split(text: str) -> tuple:
    """The lines of text without their breaks, and each line's break ('' for a last line without one)."""
    bodies, breaks, start = [], [], 0
    for match in _LINE_BREAK.finditer(text):
        bodies.append(text[start:match.start()])
        breaks.append(match.group(0))
        start = match.end()
    if start < len(text):
        bodies.append(text[start:])
        breaks.append('')
    return bodies, breaks


def _common_ends(original: list, edited: list) -> tuple:
    """How many lines the two lists share at their start, and then at their end."""
    shortest = min(len(original), len(edited))
    head = 0
    while head < shortest and original[head] == edited[head]:
        head += 1
    tail = 0
    while tail < shortest - head and original[-1 - tail] == edited[-1 - tail]:
        tail += 1
    return head, tail


def _join(original: list, breaks: list, edited: list) -> str:
    """The edited lines with the original's line breaks: each kept line keeps its own, a new line gets the
    document's usual one (its first), and the last line ends as the document did (without a break when it had none)."""
    usual = next((brk for brk in breaks if brk), '\n')
    head, _tail = _common_ends(original, edited)
    ends = breaks[:head] + [usual] * (len(edited) - len(original)) + breaks[head:]
    final = breaks[-1] if breaks else usual
    ends = [end or usual for end in ends[:-1]] + [final]
    return ''.join(body + end for body, end in zip(edited, ends))


def _only_the_key_changed(original: list, edited: list) -> bool:
    """Whether edited is original with one line replaced, or with lines inserted at one place."""
    head, tail = _common_ends(original, edited)
    removed, added = len(original) - head - tail, len(edited) - head - tail
    return (removed, added) == (1, 1) or (removed == 0 and added > 0)


def set_key(text: str, path: str, value, rewrite: bool = False) -> dict:
    """Return {'text', 'changed', 'formatting_kept', 'was'} for text with the dotted path set to value.

    ``was`` is the previous value (None when the key was missing). Every line but the one set (or those added)
    keeps its bytes and its line break, CRLF included; formatting_kept is true only when that holds. When the line
    edit cannot express the change, raise YamlLayoutError, or, with rewrite, return the document written out from
    its parsed form with formatting_kept false.
    """
    keys = [key for key in str(path).split('.') if key]
    if not keys:
        raise YamlEditError('path is empty; give the dotted key to set, for example session_state_store.refresh_on_startup')
    try:
        data = _load(text) if text and text.strip() else {}
    except yaml.YAMLError as exc:
        raise YamlEditError(f'the document is not valid YAML ({str(exc).splitlines()[0]}); fix it before it is edited') from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise YamlEditError(f'the document is a {type(data).__name__}, not a mapping; expected keys such as {keys[0]}')
    current, present = _get_in(data, keys)
    was = current if present else None
    if present and current == value and type(current) is type(value):
        return {'text': text, 'changed': False, 'formatting_kept': True, 'was': was}
    wanted = _set_in(copy.deepcopy(data), keys, value)

    original, breaks = _split(text or '')
    lines = list(original)
    try:
        _edit(lines, keys, value, 0, len(lines), '')
        edited = _join(original, breaks, lines)
        if _only_the_key_changed(original, lines) and _load(edited) == wanted:
            return {'text': edited, 'changed': True, 'formatting_kept': True, 'was': was}
    except (yaml.YAMLError, AttributeError):
        pass
    if not rewrite:
        raise YamlLayoutError(f'{".".join(keys)} cannot be set by a line edit of this document without losing its '
                              'comments and layout (flow style, anchors or uneven indentation); write that part in '
                              f'block style or set {".".join(keys)}: {_scalar(value)} by hand, then re-run')
    dumped = yaml.safe_dump(wanted, default_flow_style=False, sort_keys=False)
    return {'text': dumped, 'changed': True, 'formatting_kept': False, 'was': was}
