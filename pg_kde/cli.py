"""The ``pg-kde`` command: install the extension, manage synopses, run the embedded local server.

    pg-kde install [--pg-config PATH]
    pg-kde refresh --dsn DSN TABLE.COLUMN ... [--method M] [--sample-size N] [--grid-size N] [--backend B]
                                          [--budget BYTES]
    pg-kde refresh --dsn DSN --stale
    pg-kde list --dsn DSN
    pg-kde drop --dsn DSN TABLE.COLUMN ...
    pg-kde server start|stop|status|destroy [--dir DIR] [--port PORT]

--dsn defaults to $PG_KDE_DSN, else the local server of the current directory.

A failure is one line on stderr (``pg-kde: ...``), a ``hint: ...`` line when there is a fix, and exit
status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys

from . import admin, server


class CommandError(RuntimeError):
    """A failure of the command that the user can fix: ``str(exc)`` says what is wrong, ``hint`` how."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


def _dsn(args) -> str:
    if args.dsn:
        return args.dsn
    if os.environ.get("PG_KDE_DSN"):
        return os.environ["PG_KDE_DSN"]
    st = server.status(".")
    if st["running"]:
        return st["dsn"]
    raise CommandError("no --dsn, no PG_KDE_DSN and no local server running here",
                       hint="pass --dsn 'host=... dbname=...', set PG_KDE_DSN, or start one: pg-kde server start")


def _connect(dsn: str):
    """admin.connect, with a bad connection string or a refused connection turned into a CommandError."""
    try:
        import psycopg
    except ImportError as exc:
        raise CommandError("this command needs psycopg 3", hint="pip install 'pg_kde[admin]'") from exc
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise CommandError(f"invalid connection string: {str(exc).strip()}",
                           hint="write it as key=value pairs ('host=... port=... dbname=... user=...') "
                                "or as a URI (postgresql://user@host:port/dbname)") from exc
    try:
        return admin.connect(dsn)
    except psycopg.OperationalError as exc:
        # libpq's text: what failed on the first line (after psycopg's "connection failed: "), then
        # (indented) what to check.
        message, *advice = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        message = re.sub(r"^connection (failed|is bad): ", "", message)
        raise CommandError(f"could not connect: {message}",
                           hint=" ".join(advice) or "check the connection string (--dsn or PG_KDE_DSN)") from exc


def _database_errors() -> tuple:
    """psycopg's exception class when psycopg is installed (``install`` and ``server`` work without it)."""
    try:
        import psycopg
    except ImportError:
        return ()
    return (psycopg.Error,)


#: Where a server message says where it came from rather than what is wrong: PL/Python's exception
#: class, pg_kde's own tag.
SERVER_MESSAGE_PREFIX = re.compile(r"^(plpy\.\w+: )?(pg_kde: )?")

#: Hints for server errors that come without one, by SQLSTATE.
SERVER_ERROR_HINTS = {
    "42501": "reading a column's synopsis needs SELECT on the column; refreshing also needs INSERT, UPDATE, "
             "DELETE on kde_catalog and its payload table (kde_synopsis; kde_synopsis_2d for pairs, kde_synopsis_nd "
             "for 3 to 16 columns): ask the "
             "owner for the GRANT",
    "42P01": "check the name; a table outside the search_path is written schema.table.column",
}


def _explain(exc) -> tuple:
    """(what went wrong, how to fix it or None) for an error: a server's error gives its primary message
    and its HINT; our own errors carry a ``hint`` where they know one."""
    diag = getattr(exc, "diag", None)
    if diag is not None and diag.message_primary:
        message = SERVER_MESSAGE_PREFIX.sub("", diag.message_primary)
        return message, diag.message_hint or SERVER_ERROR_HINTS.get(diag.sqlstate)
    return str(exc).strip(), getattr(exc, "hint", None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="pg-kde", description="pg_kde: kernel density synopses for PostgreSQL")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("install", help="copy the extension files into the server found by pg_config")
    p.add_argument("--pg-config", default="pg_config")
    for name, text in [("refresh", "build or rebuild synopses"), ("list", "list synopses"), ("drop", "drop synopses")]:
        p = sub.add_parser(name, help=text)
        p.add_argument("--dsn", help="libpq connection string (default: $PG_KDE_DSN, else the local server)")
        if name != "list":
            p.add_argument("targets", nargs="*", metavar="TABLE.COLUMN")
        if name == "refresh":
            p.add_argument("--stale", action="store_true", help="refresh every stale synopsis")
            p.add_argument("--method")
            p.add_argument("--sample-size", type=int)
            p.add_argument("--grid-size", type=int)
            p.add_argument("--backend")
            p.add_argument("--budget", type=int, help="bytes a synopsis may take (default 8192; 65536 for a pair, 262144 for 3 to 16 columns)")
    p = sub.add_parser("server", help="the embedded local PostgreSQL for demos and tests")
    p.add_argument("action", choices=["start", "stop", "status", "destroy"],
                   help="destroy stops the server and deletes its databases and state")
    p.add_argument("--dir", default=".", help="working directory whose .pg_kde/ holds the server state")
    p.add_argument("--port", type=int)
    args = parser.parse_args(argv)

    try:
        if args.command == "install":
            print(f"installed pg_kde's extension files into {admin.install(args.pg_config)}")
        elif args.command == "server":
            if args.action == "start":
                cluster = server.start(args.dir, port=args.port)
                print(f"running; connect with: psql {shlex.quote(cluster.dsn())}")
                print(f"stop it with: pg-kde server stop --dir {args.dir}")
            elif args.action == "stop":
                print("stopped" if server.stop(args.dir) else "not running")
            elif args.action == "destroy":
                server.destroy(args.dir)
                print("destroyed")
            else:
                print(json.dumps(server.status(args.dir), indent=2))
        else:
            with _connect(_dsn(args)) as conn:
                if args.command == "list":
                    for row in admin.list_synopses(conn):
                        print(json.dumps(row, default=str))
                elif args.command == "drop":
                    for target in args.targets:
                        print(target, "dropped" if admin.drop(conn, *admin.parse_target(target)) else "had no synopsis")
                elif args.stale:
                    print(f"refreshed {admin.refresh_stale(conn)} stale synopses")
                else:
                    if not args.targets:
                        parser.error("refresh needs TABLE.COLUMN targets or --stale")
                    options = {k: v for k, v in [("method", args.method), ("sample_size", args.sample_size),
                                                 ("grid_size", args.grid_size), ("backend", args.backend),
                                                 ("budget", args.budget)] if v is not None}
                    targets = [admin.parse_target(t) for t in args.targets]
                    for summary in admin.refresh(conn, targets, progress=admin.progress_bar, **options):
                        print(json.dumps(summary))
    except (CommandError, admin.ExtensionNotInstalledError, server.ServerError, FileNotFoundError, ValueError,
            *_database_errors()) as exc:
        message, hint = _explain(exc)
        print(f"pg-kde: {message}", file=sys.stderr)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
