"""Choices owned by a package above params, read live: the schedules, which core.pipeline.schedules registers.

params sits below the pipeline package (core/__init__.py), so it cannot import the schedule registry, and a tuple
of names written here would be a second list of schedules. A `Registered` is a sequence its owner fills when the
owner is imported (`provide`): a spec whose choices are one reads the names of the moment it parses, describes
or draws, so a schedule registered later (the toy one of tests/test_schedule_registry.py) is at once a choice of
the CLI, of the URL and of every widget. Until the owner is imported there are no names, and reading them raises
saying which module to import (the CLI, the pages and core.pipeline import it; a script that uses core.params
alone must too).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence


class Registered(Sequence):
    """Names another package registers, optionally led by fixed choices of this input (the planner's "all")."""

    def __init__(self, what: str, owner: str, lead: tuple[str, ...] = ()) -> None:
        self.what, self.owner, self.lead = what, owner, lead
        self._names: Callable[[], tuple[str, ...]] | None = None
        self._base: Registered | None = None

    def provide(self, names: Callable[[], tuple[str, ...]]) -> None:
        """Called once by the owner: `names()` gives the current names, in order."""
        self._names = names

    def led_by(self, *lead: str) -> Registered:
        """The same names after fixed choices (`lead`), read from this one."""
        out = Registered(self.what, self.owner, lead)
        out._base = self
        return out

    def names(self) -> tuple[str, ...]:
        if self._base is not None:
            return self.lead + self._base.names()
        if self._names is None:
            raise RuntimeError(f"no {self.what} are registered yet: {self.owner} registers them when it is imported "
                               "(import it before using core.params alone)")
        return self.lead + self._names()

    def __getitem__(self, i):
        return self.names()[i]

    def __len__(self) -> int:
        return len(self.names())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def index(self, name, start: int = 0, stop: int | None = None) -> int:
        names = self.names()
        return names.index(name, start, len(names) if stop is None else stop)

    def __repr__(self) -> str:
        try:
            return f"Registered({self.what}: {', '.join(self.names())})"
        except RuntimeError:
            return f"Registered({self.what}: none yet)"
