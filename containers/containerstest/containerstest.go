// Package containerstest starts real clusters for other packages' tests: the node image is
// built once per test binary, every cluster is stopped when its test ends, and a test is
// skipped (never passed) when Docker is unreachable.
package containerstest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/containers"
)

var (
	imageOnce sync.Once
	imageRef  string
	imageErr  error
)

// Image returns the node image, building it on first use.
func Image(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs Docker: real containers")
	}
	if err := containers.Ping(context.Background()); err != nil {
		tb.Skipf("needs Docker: %v", err)
	}
	imageOnce.Do(func() { imageRef, imageErr = containers.EnsureImage(context.Background(), logWriter{tb}) })
	if imageErr != nil {
		tb.Fatal(imageErr)
	}
	return imageRef
}

// Start starts a cluster for tb and stops it when tb ends.
func Start(tb testing.TB, spec containers.Spec) *containers.Cluster {
	tb.Helper()
	spec.Image = Image(tb)
	spec.RunID = fmt.Sprintf("test-%d", time.Now().UnixNano())
	c, err := containers.Start(context.Background(), spec)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			tb.Error(err)
		}
	})
	return c
}

type logWriter struct{ tb testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}
