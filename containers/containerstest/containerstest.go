// Package containerstest starts real clusters for other packages' tests: the node image is
// built once per test binary, every cluster is stopped when its test ends, and a test is
// skipped (never passed) when Docker is unreachable. NothingLeft checks that a test's runs
// removed every container and network they made.
package containerstest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

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

// SystemImage returns the image the nodes of system run (the node image, or the system's
// own layer on it), building it on first use.
func SystemImage(tb testing.TB, system string) string {
	tb.Helper()
	Image(tb)
	ref, err := containers.EnsureSystemImage(context.Background(), system, logWriter{tb})
	if err != nil {
		tb.Fatal(err)
	}
	return ref
}

// Start starts a cluster for tb and stops it when tb ends.
func Start(tb testing.TB, spec containers.Spec) *containers.Cluster {
	tb.Helper()
	spec.Image = SystemImage(tb, spec.System)
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

// NothingLeft fails tb when a container or network this process created for run runID
// (any run: "") still exists: a run must remove all it made.
func NothingLeft(tb testing.TB, runID string) {
	tb.Helper()
	left, err := Left(runID)
	if err != nil {
		tb.Fatal(err)
	}
	if len(left) > 0 {
		tb.Errorf("left behind: %s", strings.Join(left, "; "))
	}
}

// Left lists the containers and networks this process created for run runID (any run:
// "") that still exist; a TestMain checks with it once every test has ended.
func Left(runID string) ([]string, error) {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	host, _ := os.Hostname()
	mine := make(client.Filters).Add("label", containers.LabelProject+"=1").
		Add("label", containers.LabelOwnerHost+"="+host).
		Add("label", containers.LabelOwnerPID+"="+strconv.Itoa(os.Getpid()))
	if runID != "" {
		mine = mine.Add("label", containers.LabelRun+"="+runID)
	}
	ctx := context.Background()
	ctrs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: mine})
	if err != nil {
		return nil, err
	}
	nets, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: mine})
	if err != nil {
		return nil, err
	}
	var left []string
	for _, c := range ctrs.Items {
		left = append(left, "container "+strings.Join(c.Names, ","))
	}
	for _, n := range nets.Items {
		left = append(left, "network "+n.Name)
	}
	return left, nil
}
