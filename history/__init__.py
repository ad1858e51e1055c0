"""The message history kept outside the live tables, without Spark: the Parquet export
(``rms export``), the retention archive and the retention job (``rms retention``), and the
history's columns that the SLA report (``spark``) reads from either."""
