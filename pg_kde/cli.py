"""The ``pg-kde`` command: install the extension, manage synopses, run the embedded local server.

    pg-kde install [--pg-config PATH]
    pg-kde refresh --dsn DSN TABLE.COLUMN ... [--method M] [--sample-size N] [--grid-size N] [--backend B]
                                          [--budget BYTES]
    pg-kde refresh --dsn DSN --stale
    pg-kde list --dsn DSN
    pg-kde drop --dsn DSN TABLE.COLUMN ...
    pg-kde server start|stop|status|destroy [--dir DIR] [--port PORT]

--dsn defaults to $PG_KDE_DSN, else the local server of the current directory.

TABLE.COLUMN targets (:data:`TARGET_HELP`) follow SQL's rules for names, the column part as the table part:
``'"My Table"."My Col"'``, ``t."a.b"``, ``t.a,b`` (a pair), ``t."c,d"`` (one column named ``c,d``).

Exit status (:data:`EXIT_STATUS_HELP`): 0 when the command did what it was asked; 1 when it failed: one line
on stderr (``pg-kde: ...``), a ``hint: ...`` line when there is a fix, never a traceback (a refresh of
several targets that fails part way adds a ``note: ...`` line naming the targets refreshed before the failure,
which stay committed, and those not refreshed); 2 when the command line itself is wrong (argparse's usage
message: an unknown command or option, a missing argument, options that cannot go together).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

from . import admin, server


class CommandError(RuntimeError):
    """A failure of the command that the user can fix: ``str(exc)`` says what is wrong, ``hint`` how."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


#: How targets are written, for the help of refresh and drop.
TARGET_HELP = """\
targets:
  TABLE.COLUMN, SCHEMA.TABLE.COLUMN, or TABLE.COLUMN1,COLUMN2[,...] for a pair or 3 to 16 columns
  (refresh builds one synopsis of them together; drop removes that synopsis, the columns in any order).
  Names follow SQL, the columns as the table: an unquoted name is folded to lower case (Flights.Amount is
  flights.amount); a "double-quoted" one is taken as written and may hold capitals, spaces, dots and
  commas ("" for a " inside). The last dot outside double quotes ends the table; commas outside double
  quotes separate columns. Quote the whole target for the shell:
    '"Sales 2024"."Unit Price"'    the column Unit Price of the table Sales 2024
    't."a.b"' 't."c,d"'            a column named a.b, then one named c,d
    public.t.x,y                   the pair of columns x and y of public.t
"""

#: What the exit status says, for every command's help.
EXIT_STATUS_HELP = """\
exit status:
  0  done
  1  the command failed: a "pg-kde: ..." line on stderr says why, a "hint: ..." line how to fix it
  2  the command line is wrong (unknown command or option, missing argument, options that cannot go together)
"""


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


def _server_dir(action: str, directory: str) -> None:
    """Check ``--dir``: start makes a directory that is missing (parents too: asking for a server there
    means wanting it made); stop, status and destroy name one that is missing rather than report "not
    running" about a path that may be mistyped."""
    path = Path(directory)
    if path.is_dir():
        return
    if os.path.lexists(path):
        raise CommandError(f"--dir {directory} is not a directory", hint="pass the directory whose .pg_kde/ "
                                                                          "holds (or is to hold) the server state")
    if action != "start":
        raise CommandError(f"no directory {directory} (--dir): no local server was started there",
                           hint="check the path; pg-kde server start --dir DIR makes the directory")
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise CommandError(f"cannot make the directory {directory} (--dir): {exc.strerror}") from exc
    print(f"made the directory {directory}")


def _refresh(conn, targets: list, options: dict, notes: list) -> None:
    """Refresh the targets in order, printing each summary (a JSON line on stdout) as soon as it is
    committed. When one fails, the error propagates and ``notes`` gets a line naming the targets refreshed
    before it (they stay committed: one transaction each) and those not refreshed."""
    shown = {"i": 0, "total": 0}

    def progress(i, total, target, seconds):
        admin.progress_bar(i, total, target, seconds)
        shown.update(i=i, total=total)

    landed = 0
    try:
        for summary in admin.refresh_iter(conn, targets, progress=progress, **options):
            landed += 1
            print(json.dumps(summary), flush=True)
    except BaseException:
        if 0 < shown["i"] < shown["total"] and sys.stderr.isatty():
            sys.stderr.write("\n")  # end the progress bar's line before the error
        if len(targets) > 1:
            done = ", ".join(admin.format_target(*t) for t in targets[:landed]) or "none"
            left = ", ".join(admin.format_target(*t) for t in targets[landed:])
            notes.append(f"refreshed before the failure (committed, one transaction each): {done}; "
                         f"not refreshed: {left}")
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="pg-kde", description="pg_kde: kernel density synopses for PostgreSQL",
                                     epilog=EXIT_STATUS_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def add_parser(name, text, epilog=""):
        return sub.add_parser(name, help=text, description=text, epilog=epilog + EXIT_STATUS_HELP,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = add_parser("install", "copy the extension files into the server found by pg_config")
    p.add_argument("--pg-config", default="pg_config")
    subparsers = {}
    for name, text in [("refresh", "build or rebuild synopses"), ("list", "list synopses"), ("drop", "drop synopses")]:
        p = subparsers[name] = add_parser(name, text, TARGET_HELP + "\n" if name != "list" else "")
        p.add_argument("--dsn", help="libpq connection string (default: $PG_KDE_DSN, else the local server)")
        if name != "list":
            p.add_argument("targets", nargs="*", metavar="TABLE.COLUMN", help="see targets below")
        if name == "refresh":
            p.add_argument("--stale", action="store_true",
                           help="refresh every stale synopsis, each with the options of its last refresh; "
                                "takes no targets and no other option")
            p.add_argument("--method")
            p.add_argument("--sample-size", type=int)
            p.add_argument("--grid-size", type=int)
            p.add_argument("--backend")
            p.add_argument("--budget", type=int, help="bytes a synopsis may take (default 8192; 65536 for a pair, 262144 for 3 to 16 columns)")
    p = add_parser("server", "the embedded local PostgreSQL for demos and tests")
    p.add_argument("action", choices=["start", "stop", "status", "destroy"],
                   help="destroy stops the server and deletes its databases and state")
    p.add_argument("--dir", default=".", help="working directory whose .pg_kde/ holds the server state (start "
                                              "makes it if missing)")
    p.add_argument("--port", type=int)
    args = parser.parse_args(argv)

    options = {}
    if args.command == "refresh":
        options = {k: v for k, v in [("method", args.method), ("sample_size", args.sample_size),
                                     ("grid_size", args.grid_size), ("backend", args.backend),
                                     ("budget", args.budget)] if v is not None}
        if args.stale and (args.targets or options):
            # Not both: --stale rebuilds with each synopsis' recorded options, so the options would be
            # ignored, and refreshing the targets too would be a second command in one.
            given = [*args.targets, *("--" + k.replace("_", "-") for k in options)]
            subparsers["refresh"].error(f"--stale refreshes every stale synopsis with the options of its last "
                                        f"refresh; it takes no targets or options (got {' '.join(given)})")
        if not args.stale and not args.targets:
            subparsers["refresh"].error("refresh needs TABLE.COLUMN targets or --stale")

    notes = []
    try:
        if args.command == "install":
            print(f"installed pg_kde's extension files into {admin.install(args.pg_config)}")
        elif args.command == "server":
            _server_dir(args.action, args.dir)
            if args.action == "start":
                cluster = server.start(args.dir, port=args.port)
                print(f"running; connect with: psql {shlex.quote(cluster.dsn())}")
                print(f"stop it with: pg-kde server stop --dir {shlex.quote(args.dir)}")
            elif args.action == "stop":
                print("stopped" if server.stop(args.dir) else "not running")
            elif args.action == "destroy":
                server.destroy(args.dir)
                print("destroyed")
            else:
                print(json.dumps(server.status(args.dir), indent=2))
        else:
            # Every target is read before anything is done, so a mistyped one changes nothing.
            targets = [admin.parse_target(t) for t in getattr(args, "targets", [])]
            with _connect(_dsn(args)) as conn:
                if args.command == "list":
                    for row in admin.list_synopses(conn):
                        print(json.dumps(row, default=str))
                elif args.command == "drop":
                    for text, target in zip(args.targets, targets):
                        print(text, "dropped" if admin.drop(conn, *target) else "had no synopsis")
                elif args.stale:
                    print(f"refreshed {admin.refresh_stale(conn)} stale synopses")
                else:
                    _refresh(conn, targets, options, notes)
    except (CommandError, admin.ExtensionNotInstalledError, server.ServerError, FileNotFoundError, ValueError,
            *_database_errors()) as exc:
        message, hint = _explain(exc)
        print(f"pg-kde: {message}", file=sys.stderr)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
