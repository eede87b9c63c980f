"""One module per page: ``page(dashboard, request)`` renders it, ``api`` gives its data
as JSON (docs/formats.md, "irqlab serve")."""
