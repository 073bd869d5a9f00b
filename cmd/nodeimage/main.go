// Command nodeimage makes lockbreaker's node image when it is missing, as the first step
// of `lockbreaker images` does, from a binary that holds nothing of lockbreaker but
// package containers. It compiles in less than half the time lockbreaker does, so make
// runs it while the rest of lockbreaker compiles: on a fresh machine each takes about
// half a minute, and neither needs the other.
//
// Exit codes: 0 made or already there, 255 it could not be made (the reason on stderr).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockbreaker/lockbreaker/containers"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := containers.EnsureImage(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nodeimage:", err)
		os.Exit(255)
	}
}
