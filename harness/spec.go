package harness

import runspec "github.com/lockbreaker/lockbreaker/spec"

// The spec a run is made from lives in package spec, which a check of a saved run reads
// without the harness; these names keep the harness's own API as it was.
type (
	// Spec is a test, as plain data: everything needed to run it again (spec.Spec).
	Spec = runspec.Spec
	// Duration is a time.Duration written as "2s" in spec files (spec.Duration).
	Duration = runspec.Duration
	// SpecError is bad input: the CLI reports it as a usage error (spec.Error).
	SpecError = runspec.Error
)

// The default load (spec.DefaultRate, spec.DefaultRetry).
const (
	DefaultRate  = runspec.DefaultRate
	DefaultRetry = runspec.DefaultRetry
)

// DefaultSpec is Kleppmann's scenario on a single Redis (spec.Default).
func DefaultSpec() Spec { return runspec.Default() }
