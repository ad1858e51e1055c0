"""Release tooling: the one version, the artifacts of ``make dist`` and ``make release-check``."""
