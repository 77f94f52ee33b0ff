"""The pure core: arithmetic on specs. No I/O, no printing, no Typer/Rich/Hub/NVML imports."""
