"""HTTP basic authentication against a web config's `basic_auth_users` (bcrypt hashes), as
Prometheus' exporters check it.

bcrypt is slow on purpose (tens of milliseconds a check at cost 10), and Prometheus sends the
same credentials at every scrape, so credentials that passed are remembered, by a SHA-256 of
user and password, never the password itself. An unknown user costs a bcrypt check all the same,
so the answer's time does not tell which user names exist.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import threading
from typing import Mapping

import bcrypt

REMEMBERED = 64  # credentials that passed, kept (more: the memory starts afresh)


class BasicAuthUsers:
    def __init__(self, users: Mapping[str, bytes]):
        self.users = dict(users)
        self._decoy = next(iter(self.users.values()), None)  # checked for a user name that does not exist
        self._passed: set[bytes] = set()
        self._lock = threading.Lock()  # requests are answered on threads of their own

    def allows(self, authorization: str | None) -> bool:
        """Whether an `Authorization` header names a user and its password."""
        credentials = _credentials(authorization)
        if credentials is None:
            return False
        user, password = credentials
        fingerprint = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if fingerprint in self._passed:
                return True
        hashed = self.users.get(user, self._decoy)
        if hashed is None:  # no users at all
            return False
        try:
            matches = bcrypt.checkpw(password.encode(), hashed)
        except ValueError:  # a password bcrypt does not take (longer than 72 bytes)
            return False
        if not matches or user not in self.users:
            return False
        with self._lock:
            if len(self._passed) >= REMEMBERED:
                self._passed.clear()
            self._passed.add(fingerprint)
        return True


def _credentials(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if sep else None
