"""The analysis pipeline on PySpark: stored runs -> checkers in Spark tasks -> results.json per run and a
partitioned Parquet dataset under the store; cross-run summaries; the ``analyze`` and ``suite`` commands.

Entry points: :func:`harness.analysis.pipeline.analyze_run` (one run, what ``harness run`` calls),
:func:`harness.analysis.pipeline.analyze_paths` (runs, suites or a store),
:func:`harness.analysis.summary.summarize`. Modules: ``spark`` (the session), ``discovery`` (which runs),
``ingest`` (files -> rows, in tasks), ``checks`` (checkers in tasks, verdicts, results.json),
``dataset`` (the Parquet tables), ``pipeline``, ``summary``, ``progress``, ``cli``.
"""
