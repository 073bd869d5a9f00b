// Package lockbreaker is lockbreaker as a library: the whole command line as Main, so a
// binary built around a user's own lock is the lockbreaker CLI with that lock as one more
// --client. Everything else (systems, nemeses, checkers, reports) is the same code our own
// binary runs; this package adds nothing to how a verdict is reached.
package lockbreaker

import "github.com/lockbreaker/lockbreaker/internal/cli"

// Main runs the lockbreaker command line on os.Args and exits with its code (0 valid,
// 1 invalid, 2 unknown, 254 bad arguments, 255 harness error). The harness starts every
// lock client as this same binary again, so whatever was registered before Main is
// inside every worker.
func Main() { cli.Main() }
