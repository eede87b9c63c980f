"""Xen-side data: xentrace binary records (irqlab.xen.records) and scheduler timelines
(irqlab.xen.timeline)."""
