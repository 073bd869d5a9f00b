package cli

import (
	"context"
	"io"
	"os"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/harness"
)

// workerCommand is `lockbreaker worker`: its help, and cmdWorker to run it.
var workerCommand = command.Command{
	Name:     "worker",
	Synopsis: "(internal) a lock client process started by run",
	About:    "A lock client process: run starts one per client and talks to it over stdin and stdout.",
	Run:      cmdWorker,
	Parse:    parseWorker,
}

// parseWorker parses worker's arguments: none.
func parseWorker(args []string) error { return command.Parse(command.NewFlags("worker"), args) }

// cmdWorker is reached only when started by hand: workers are started with
// harness.WorkerEnv set and never get here.
func cmdWorker(_ context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parseWorker(args); err != nil {
		return 0, err
	}
	return 0, harness.RunWorker(os.Stdin, stdout)
}
