"""Host-side kernel tracing of a run: a private tracefs instance captured as a RunHook.

- tracefs.py  finding/mounting tracefs, a private instance, restoring every setting
- formats.py  the events' ``format`` files and the ring-buffer page header
- ringbuf.py  the binary ring-buffer pages (``trace_pipe_raw``) decoded with numpy
- archive.py  the capture kept with the run (gzip blob next to the database)
- capture.py  the RunHook (``irqlab run --trace``): reader and clock-anchor threads
- export.py   text and trace-cmd ``trace.dat`` writers for KernelShark users
"""
