"""The jinja2 templates beside this package, rendered strictly (an unknown variable is an error).

YAML templates insert structured values with the ``json`` filter (JSON is valid YAML) and are parsed
after rendering, so a template can never emit malformed YAML and the output format is uniform.
"""

from __future__ import annotations

import base64
import json
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import yaml

from .errors import PackagingError

DEFAULT_TEMPLATES = Path(str(resources.files(__package__).joinpath("templates")))


class Templates:
    """Renders templates from one directory (the packaged one unless a copy is given)."""

    def __init__(self, directory: Path = DEFAULT_TEMPLATES) -> None:
        if not directory.is_dir():
            raise PackagingError(f"templates directory {directory} not found; pass an existing directory to --templates")
        self.directory = directory
        self._env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        self._env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False)
        self._env.filters["b64"] = lambda value: base64.b64encode(
            value if isinstance(value, bytes) else value.encode("utf-8")
        ).decode("ascii")

    def text(self, name: str, **context: Any) -> str:
        try:
            return self._env.get_template(name).render(**context)
        except jinja2.TemplateNotFound:
            raise PackagingError(f"template {name} not found in {self.directory}; restore it") from None
        except jinja2.UndefinedError as exc:
            raise PackagingError(f"template {name}: {exc}; use only the variables the template is given") from None

    def yaml(self, name: str, **context: Any) -> Any:
        rendered = self.text(name, **context)
        try:
            return yaml.safe_load(rendered)
        except yaml.YAMLError as exc:
            raise PackagingError(f"template {name} rendered invalid YAML: {exc}; fix the template") from None
