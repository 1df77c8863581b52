"""The ``pg-kde`` command: install the extension, manage synopses, run the embedded local server.

    pg-kde install [--pg-config PATH]
    pg-kde refresh --dsn DSN TABLE.COLUMN ... [--method M] [--sample-size N] [--grid-size N] [--backend B]
    pg-kde refresh --dsn DSN --stale
    pg-kde list --dsn DSN
    pg-kde drop --dsn DSN TABLE.COLUMN ...
    pg-kde server start|stop|status|destroy [--dir DIR] [--port PORT]

--dsn defaults to $PG_KDE_DSN, else the local server of the current directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

from . import admin, server


def _dsn(args) -> str:
    if args.dsn:
        return args.dsn
    if os.environ.get("PG_KDE_DSN"):
        return os.environ["PG_KDE_DSN"]
    st = server.status(".")
    if st["running"]:
        return st["dsn"]
    raise SystemExit("pg-kde: no --dsn, no PG_KDE_DSN and no local server running here (pg-kde server start)")


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
            with admin.connect(_dsn(args)) as conn:
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
                                                 ("grid_size", args.grid_size), ("backend", args.backend)] if v is not None}
                    targets = [admin.parse_target(t) for t in args.targets]
                    for summary in admin.refresh(conn, targets, progress=admin.progress_bar, **options):
                        print(json.dumps(summary))
    except (server.ServerError, FileNotFoundError, ValueError) as exc:
        print(f"pg-kde: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
