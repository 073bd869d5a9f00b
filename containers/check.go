package containers

// Checks made before a run starts: whether a system described in a file can run here with
// the faults asked for, found before anything is created (UnfitError: bad input).

import (
	"context"
	"fmt"

	"github.com/lockbreaker/lockbreaker/system"
)

// UnfitError says a system cannot run here as the run asks, found before anything
// starts (its image is not in the engine, a fault it cannot take): bad input.
type UnfitError struct{ Reason string }

func (e *UnfitError) Error() string { return e.Reason }

func unfit(format string, args ...any) error {
	return &UnfitError{Reason: fmt.Sprintf(format, args...)}
}

// CheckSystem says, before anything starts, why a system described in a file cannot run
// here with the faults asked for: its local image is missing, its nodes' clocks cannot be
// moved (clocks), or this host cannot cut its network from outside (network). Built-in
// systems pass: the node image has what their faults need.
func CheckSystem(ctx context.Context, sys system.System, clocks, network bool) error {
	img := sys.Container.Image
	if system.BuiltIn(sys.Name) || sys.Container == nil || img == nil || img.Local == "" {
		return nil
	}
	if err := checkLocalImage(ctx, img.Local); err != nil {
		return err
	}
	if network {
		if err := hostNetwork(); err != nil {
			return unfit("partitions of system %s's image %s are made from this host, and %v", sys.Name, img.Local, err)
		}
	}
	if clocks {
		if err := hostNetwork(); err != nil { // the clock file is written from the host too
			return unfit("clock faults on system %s's image %s are set from this host, and %v", sys.Name, img.Local, err)
		}
		plan, err := faketimeFor(ctx, sys)
		if err != nil {
			return err
		}
		if plan.refused != "" {
			return unfit("clock faults cannot apply to system %s: %s", sys.Name, plan.refused)
		}
	}
	return nil
}
