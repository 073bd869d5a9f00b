package containers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// An interrupt at any stage of Start leaves nothing behind and returns no cluster. Before
// the fix, any error after the network was asked for dereferenced a nil cluster (a panic)
// and left what had been created. Each stage is reached by a hook, not a timer, so the
// test does not depend on the machine's speed.
func TestStartInterruptedAtEachStageLeavesNothing(t *testing.T) {
	image := nodeImage(t)
	t.Cleanup(func() { startHook = nil })
	for _, stage := range []string{"before", "network", "node n1", "node n3", "nodes", "ready"} {
		t.Run(stage, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reached := false
			startHook = func(s string) {
				if s == stage {
					reached = true
					cancel()
				}
			}
			if stage == "before" {
				reached = true
				cancel()
			}
			runID := fmt.Sprintf("test-interrupt-%d", time.Now().UnixNano())
			c, err := Start(ctx, Spec{RunID: runID, Image: image, System: "redlock", Nodes: 3})
			startHook = nil
			if !reached {
				t.Fatalf("stage %q never reached (err %v)", stage, err)
			}
			if c != nil || !errors.Is(err, context.Canceled) {
				t.Errorf("Start = %v, %v; want no cluster and context.Canceled", c, err)
			}
			assertNoLeftovers(t, runID)
		})
	}
}
