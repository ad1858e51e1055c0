"""The release of this distribution, sent in every request's ``User-Agent``
(``release/version.py`` writes it from the repository's ``VERSION``)."""

__version__ = "0.2.0"
USER_AGENT = f"rms-client-python/{__version__}"
