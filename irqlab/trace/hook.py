"""What every capture hook (host tracefs, xentrace in dom0) does the same way: its facts
are its metadata, and its stop never raises (a failure is a problem in the metadata;
whatever was set up is torn down all the same)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class CaptureHook(ABC):
    """The run-hook ends of a capture; subclasses keep ``meta`` with a ``problems`` list."""

    meta: dict[str, Any]

    def metadata(self) -> dict[str, Any]:
        return self.meta

    def stop(self) -> None:
        try:
            self._finish()
        except Exception as exc:      # a hook's stop must never raise
            self.meta["problems"].append(f"stop: {type(exc).__name__}: {exc}")
        finally:
            self._teardown()

    @abstractmethod
    def _finish(self) -> None:
        """Stop recording and keep what was recorded."""

    @abstractmethod
    def _teardown(self) -> None:
        """Undo every setting the capture made (also after a failure)."""
