package rms

// Version is this module's release (release/version.py writes it from the repository's
// VERSION); every request to RMS carries it in its User-Agent.
const Version = "0.2.0"

// userAgent names the library and its release to RMS's access logs.
const userAgent = "rms-client-go/" + Version
