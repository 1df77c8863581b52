"""The package's version, from its installed metadata (pyproject.toml is the one place it is written)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path


def _version() -> str:
    try:
        return metadata.version("pg_kde")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        match = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M) if pyproject.is_file() else None
        if match is None:
            raise ImportError("pg_kde is not installed and no pyproject.toml gives its version") from None
        return match.group(1)


__version__ = _version()
