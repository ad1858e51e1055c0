"""Demo services for ``rms dev``: an order service (producer) and a points service (consumer),
each with its own database, showing the seed scenario "order paid -> points added"."""
