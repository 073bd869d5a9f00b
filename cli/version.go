package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
)

// versionCommand is `lockbreaker version`: its help, and cmdVersion to run it.
var versionCommand = command.Command{
	Name:     "version",
	Synopsis: "print the version and the node image tag",
	About:    "Prints the module version, the commit it was built from when known, and the node image tag. Needs no Docker.",
	Examples: []string{"lockbreaker version"},
	Run:      cmdVersion,
	Parse:    parseVersion,
}

// parseVersion parses version's arguments: none.
func parseVersion(args []string) error { return command.Parse(command.NewFlags("version"), args) }

func cmdVersion(_ context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parseVersion(args); err != nil {
		return 0, err
	}
	version := "(no build information)"
	if info, ok := debug.ReadBuildInfo(); ok {
		version = describeBuild(info)
	}
	fmt.Fprintf(stdout, "lockbreaker %s\nnode image %s\n", version, containers.ImageRef())
	return command.ExitValid, nil
}

// describeBuild is the module version ("(devel)" from a checkout), with the commit and Go
// version when the build recorded them.
func describeBuild(info *debug.BuildInfo) string {
	v := info.Main.Version
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += ", commit " + rev
		if modified == "true" {
			v += " with local changes"
		}
	}
	return v + ", built with " + info.GoVersion
}
