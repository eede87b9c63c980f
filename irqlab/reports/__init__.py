"""Reports on stored runs: compare tables, a noise test, plots, the HTML report, CI checks.

This layer sits between the store and the CLI: it reads runs through ``irqlab.store``,
uses ``irqlab.stats`` for ranks and units, and never prints; formatters return lines or
objects and the CLI's renderers decide where they go. matplotlib is imported only by
``irqlab.reports.plots`` (and what uses it), so ``compare`` and ``check`` start fast.

Modules:
    select         run selectors (ids, names, ``tag:k=v``, ``suite:NAME``)
    data           a run's data for reports: raw latencies in ns, exact percentiles
    noise          is a difference beyond noise? runs as the unit (Welch's t), single
                   runs by block bootstrap (never "beyond noise")
    comparability  warnings when runs are not comparable, with what to do about it
    compare        the compare table model (versioned JSON-ready dicts)
    tables         markdown / csv / json formatters of the compare model
    plots          matplotlib figures (histogram, exceedance, over time, overlaid CDFs)
    html           the self-contained HTML report
    check          pass/fail limits for CI and their JUnit XML
"""
