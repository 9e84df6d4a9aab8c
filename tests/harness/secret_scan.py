"""Every secret a test environment ever issued or holds, and a scan of outputs for any of them.

A secret counts as leaked when it appears as it is, base64-encoded (a Basic header,
a slurped file: at any offset in the encoded data) or percent-encoded (a form body)
in any text or file scanned.
"""

from __future__ import annotations

import base64
import os
import sqlite3
import urllib.parse

# Shorter strings match by chance ("true", a port number): a secret worth scanning for is longer.
MIN_SECRET_LENGTH = 8


def idp_tokens(db_path: str) -> set:
    """Every access and refresh token the lab's identity provider has issued (its tokens table)."""
    connection = sqlite3.connect(f'file:{db_path}?mode=ro', uri=True)
    try:
        rows = connection.execute('SELECT access_token, refresh_token FROM tokens').fetchall()
    finally:
        connection.close()
    return {value for row in rows for value in row if value}


def cache_tokens(*db_paths: str) -> set:
    """Every access and refresh token in the token caches given (a path that does not exist is skipped)."""
    found = set()
    for db_path in db_paths:
        if not os.path.exists(db_path):
            continue
        connection = sqlite3.connect(f'file:{db_path}?mode=ro', uri=True)
        try:
            rows = connection.execute('SELECT access_token, refresh_token FROM tokens').fetchall()
        finally:
            connection.close()
        found |= {value for row in rows for value in row if value}
    return found


def store_tokens(client, match: str = 'vllm:session:*') -> set:
    """Every access and refresh token in the session store's hashes (a redis-py client)."""
    found = set()
    for key in client.scan_iter(match=match, count=1000):
        for name, value in client.hgetall(key).items():
            name = name.decode() if isinstance(name, bytes) else name
            if name in ('access_token', 'refresh_token') and value:
                found.add(value.decode('utf-8', 'replace') if isinstance(value, bytes) else value)
    return found


# Base64 characters that mix bits of the bytes before the secret, by the secret's offset (mod 3) in the encoded data.
_LEADING_MIXED = {0: 0, 1: 2, 2: 3}
# Base64 characters of the last, incomplete group that depend on the secret alone, by that group's length.
_TRAILING_PURE = {0: 0, 1: 1, 2: 2}


def _base64_forms(raw: bytes):
    """The secret's base64 characters at each of the three offsets it can have in a longer encoded text
    (a slurped file holds it anywhere): the characters that depend on the secret's bytes alone."""
    for offset in (0, 1, 2):
        encoded = base64.b64encode(bytes(offset) + raw).decode('ascii')
        length = offset + len(raw)
        end = 4 * (length // 3) + _TRAILING_PURE[length % 3]
        yield encoded[_LEADING_MIXED[offset]:end]


def _forms(secret: str):
    yield secret
    yield from _base64_forms(secret.encode('utf-8'))
    quoted = urllib.parse.quote(secret, safe='')
    if quoted != secret:
        yield quoted


def files_under(*roots: str):
    """Every regular file below each root (a root may be a file)."""
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    yield path


def find_leaks(secrets, texts: dict | None = None, paths=()) -> list:
    """``where: secret…`` for each secret found in ``texts`` (name -> text) or in the files ``paths``.

    The finding names the secret by its first four characters only, so a failing
    assertion does not print it either.
    """
    wanted = {}
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_LENGTH:
            for form in _forms(secret):
                wanted[form.encode('utf-8')] = secret
    sources = [(name, text.encode('utf-8', 'replace') if isinstance(text, str) else text)
               for name, text in (texts or {}).items()]
    for path in paths:
        with open(path, 'rb') as handle:
            sources.append((path, handle.read()))
    leaks = []
    for name, data in sources:
        for form, secret in wanted.items():
            if form in data:
                leaks.append(f'{name}: {secret[:4]}... ({len(secret)} characters)')
    return sorted(set(leaks))
