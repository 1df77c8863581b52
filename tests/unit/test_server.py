"""pg_kde.server pieces that need no running PostgreSQL."""

import sys
from pathlib import Path

import pytest

from pg_kde import server


def test_packages_are_staged_when_the_server_user_cannot_read_them(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "_readable_by_server", lambda path: False)
    staged = Path(server.server_python_path(tmp_path))
    assert staged == tmp_path / "python"
    for name in server.PYTHON_PACKAGES:
        assert (staged / name / "__init__.py").exists()
    # The staged copy imports on its own (numpy's and scipy's bundled libraries came along).
    import subprocess

    code = "import pg_kde, numpy, scipy.linalg; from pg_kde import _native; print(_native.available_isas()[-1])"
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(staged)!r}); {code}"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "generic"


def test_readable_site_packages_are_used_in_place(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "_readable_by_server", lambda path: True)
    import pg_kde

    assert server.server_python_path(tmp_path) == str(Path(pg_kde.__file__).resolve().parent.parent)
    assert not (tmp_path / "python").exists()


def test_dsn_names_the_password_file_and_quotes_paths():
    cluster = server.Cluster("/w", "/tmp/a dir/it's", 5433, "/p", "/w/.pg_kde/pgpass")
    assert cluster.dsn("db") == r"host='/tmp/a dir/it\'s' port=5433 dbname=db user=postgres passfile=/w/.pg_kde/pgpass"
    psycopg = pytest.importorskip("psycopg")
    assert psycopg.conninfo.conninfo_to_dict(cluster.dsn())["host"] == "/tmp/a dir/it's"
