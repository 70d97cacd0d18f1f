"""What ``plait run`` tells the user it did on its own: one line ``plait: note: ...`` on stderr each
(random inputs, pieces simulated on this machine). Notes never change the exit code; scripts that read
stderr skip lines starting ``plait: note:`` as they skip ``plait: warning:`` lines."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from plait.cli.messages import note, shorten  # note: one line, shortened, silent with -q


def names_list(names: Iterable[str], most: int = 10) -> str:
    """``names`` joined with ", ", the first ``most`` and a count of the rest, each name shortened."""
    names = list(names)
    shown = [shorten(n, 100) for n in names[:most]]
    return ", ".join(shown) + (f" and {len(names) - most} more" if len(names) > most else "")


def note_inputs(names: Iterable[str], given: Mapping[str, Any], fill: str, seed: int) -> None:
    """The note for inputs made up because ``--inputs`` did not give them (random ones only: ``--fill
    zeros`` or ``ones`` was asked for by name)."""
    made = [n for n in names if n not in given]
    if made and fill == "random":
        note(f"random input{'s' if len(made) > 1 else ''} for {names_list(made)} (seed {seed}; give "
             f"{'them' if len(made) > 1 else 'it'} with --inputs, or --fill zeros|ones)")


def note_simulation(art: Any, composite: Any) -> None:
    """One note per piece made for another device (e.g. a Cortex-M core) that this run simulates on
    the host: which compiler built its C for this machine, and why not its ``-cc`` when that makes
    code for another machine."""
    built = getattr(art, "piece_modules", None) or {}
    for piece in composite.pieces:
        t = piece.target
        if piece.name not in built or t.device == "host":
            continue
        how = "built for this machine"
        simulation_compiler = getattr(t.backend, "simulation_compiler", None)  # kinds that build C for it (c)
        if simulation_compiler is not None:
            cc, why = simulation_compiler(t)
            how = f"its C built for this machine with {cc}" + (f" ({why}; it compiles the device code)" if why else "")
        note(f"piece '{piece.name}' ({t}) is made for {t.device}; it runs here in host simulation, {how}")
