"""Binary assets shipped with the tool (the operator's icon)."""

from __future__ import annotations

from importlib import resources

ICON_MEDIATYPE = "image/svg+xml"


def icon_svg() -> bytes:
    return resources.files(__package__).joinpath("assets", "icon.svg").read_bytes()
