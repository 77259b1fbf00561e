"""Reports people read: one self-contained HTML page per run (``report.html``), an index over every run
and suite of a store (``store/index.html``), the ``harness report`` and ``harness serve`` commands.

Entry points: :func:`harness.report.render.write_report` (one run directory -> its ``report.html``),
:func:`harness.report.index.write_index` (a store -> ``index.html``), :func:`harness.report.serve.serve`.
Modules: ``data`` (a stored run read leniently), ``clocks`` (clock offsets, journals on the history's
axis), ``faults`` (nemesis operations as spans), ``timeline`` and ``counterexamples`` (the figures),
``svg`` (figures as escaped inline SVG), ``links`` (every link built from data, path-encoded),
``render``, ``index``, ``serve`` (the store over HTTP, refusing anything outside it), ``cli``, ``browser``
(headless Chromium, for the browser tests and screenshots). What the pages and the server do with hostile
data: ``docs/reports.md``.
"""
