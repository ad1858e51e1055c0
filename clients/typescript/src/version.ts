/** This package's release (release/version.py writes it from the repository's VERSION). */
export const VERSION = "0.2.0";

/** Sent with every request to RMS, so its access logs name the library and its release. */
export const USER_AGENT = `rms-client-typescript/${VERSION}`;
