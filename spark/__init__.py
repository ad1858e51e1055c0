"""The SLA report over the message history (``rms report``) and its Parquet export
(``rms export``).

Layout: ``cli`` / ``export_cli`` parse arguments (no Spark import, so ``rms`` starts fast);
``job`` is the ``spark-submit`` entry point; ``report`` runs one report: ``inputs`` loads the
history (JDBC or Parquet), ``facts`` derives one row per message, ``metrics`` aggregates it per
app, topic, hour and day, ``stuck`` lists what is stuck now, ``summary`` writes the outputs and
``htmlreport`` / ``svg`` draw the self-contained page. ``README.md`` documents the outputs,
``summary.json`` included, for the dashboard.
"""
