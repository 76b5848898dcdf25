"""Credentials never printed: a message names a URL without its user and password (``https://***@host``).

A kubeconfig's ``proxy-url`` or the environment's proxy may carry them (``http://user:password@proxy``), and the
errors met with them reach logs and terminals.
"""

from __future__ import annotations

import re

# A scheme, then the user information up to the last @ before the end of the word: a password written unescaped may
# hold a / or an @ too.
_USER_INFORMATION = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"<>]*@")


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message naming URLs) with the user and password of each URL replaced by ``***``."""
    return _USER_INFORMATION.sub(r"\g<scheme>***@", text)
