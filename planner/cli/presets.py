"""`planner presets`: list the built-in model, GPU and workload presets."""

from planner.cli.numbers import JsonOut
from planner.cli.render import console, emit_json


def presets(
    json_out: JsonOut = False,
) -> None:
    """List the model, GPU and workload presets shipped with planner."""
    from planner.sources.presets import KINDS, preset_names

    listing = {kind: preset_names(kind) for kind in KINDS}
    if json_out:
        emit_json(listing)
        return
    out = console()
    for kind, names in listing.items():
        out.print(f"[bold]{kind}[/] ({len(names)}): " + ", ".join(names), soft_wrap=True)
