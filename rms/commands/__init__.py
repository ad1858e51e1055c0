"""Commands of the ``rms`` command line that belong to no single service (``rms topics``)."""
