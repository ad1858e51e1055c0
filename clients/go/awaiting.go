package rms

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// HeaderAwaiting names, comma-separated, the subscribers of a message that had not
// acknowledged it when RMS published the record (design section 6). A consumer whose app
// it does not name acknowledged the message already and skips the record.
const HeaderAwaiting = "rms-awaiting"

// appNamePattern is RMS's app-name pattern.
var appNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidAppName tells whether name can be an RMS app's name.
func ValidAppName(name string) bool { return appNamePattern.MatchString(name) }

// readAwaiting reads the values of a record's rms-awaiting headers: the app names of its
// one header, or nil when the record has none or it cannot be read (repeated, empty, not
// UTF-8, or holding anything but app names; spaces around a name are allowed). It never
// panics, and nil means the record is handled: a consumer never skips on doubt.
func readAwaiting(values [][]byte) []string {
	if len(values) != 1 || !utf8.Valid(values[0]) {
		return nil
	}
	names := strings.Split(string(values[0]), ",")
	for i, name := range names {
		names[i] = strings.Trim(name, " \t")
		if !ValidAppName(names[i]) {
			return nil
		}
	}
	return names
}

// Awaits tells whether the record is for app: false only when its rms-awaiting header was
// read and does not name app (app acknowledged the message already).
func (r *Record) Awaits(app string) bool {
	return r.Awaiting == nil || slices.Contains(r.Awaiting, app)
}
