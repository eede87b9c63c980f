"""``irqlab serve``: a read-only web dashboard over a store (docs/serve.md).

app.py builds the ASGI application (Starlette); one module per page under pages/, the
store access in access.py (a short read-only open per request, so a run that wants the
file is never kept waiting), the runs table's paging in runs_query.py, the server and its
token in server.py (`irqlab bench serve`: irqlab/bench/serve.py). Every figure comes from
the functions the CLI's JSON uses (store rows and summaries, irqlab.reports.compare, the provenance
record, irqlab.reports.trend).
"""
