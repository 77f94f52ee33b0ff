"""Command-line edge: parse flags, call the core once, render. No arithmetic here."""
