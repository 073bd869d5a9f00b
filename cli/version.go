package cli

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
)

// versionCommand is `lockbreaker version`: its help, and cmdVersion to run it.
var versionCommand = command.Command{
	Name:     "version",
	Synopsis: "print the version and the node image tag",
	About:    "Prints the version, the commit it was built from when known, and the node image tag. Needs no Docker.",
	Examples: []string{"lockbreaker version"},
	Run:      cmdVersion,
	Parse:    parseVersion,
}

// The version and commit make build and make dist stamp into the binary (-ldflags -X, from
// git describe --tags --always --dirty and git rev-parse HEAD), so that an archive's binary
// names both even when its build recorded no VCS information (-buildvcs=false). Empty in a
// binary of go install or go build, which reads both from its build information.
var (
	stampedVersion string
	stampedCommit  string
)

// parseVersion parses version's arguments: none.
func parseVersion(args []string) error { return command.Parse(command.NewFlags("version"), args) }

func cmdVersion(_ context.Context, args []string, stdout io.Writer) (int, error) {
	if err := parseVersion(args); err != nil {
		return 0, err
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintf(stdout, "lockbreaker %s\nnode image %s\n", describeBuild(info, stampedVersion, stampedCommit), containers.ImageRef())
	return command.ExitValid, nil
}

// describeBuild is the version, with the commit and Go version when they are known. The
// version is the stamped one, else the module's: go install's vX.Y.Z or pseudo-version,
// and go build's in a checkout (a pseudo-version, or "(devel)" without VCS information).
// The commit is the stamped one, else the build's vcs.revision, else the one a
// pseudo-version names (go install of a commit); go install of a tag records none: the
// tag names it.
func describeBuild(info *debug.BuildInfo, stampedVersion, stampedCommit string) string {
	if info == nil {
		info = &debug.BuildInfo{}
	}
	version, rev, modified := info.Main.Version, "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		if m := pseudoVersion.FindStringSubmatch(version); m != nil {
			rev = m[1]
		}
	}
	if stampedVersion != "" {
		version = stampedVersion
	}
	if stampedCommit != "" {
		// git's own word wins over the build's VCS information, which Go reads from the
		// wrong repository, or not at all, in a linked worktree (golang/go#58218).
		rev, modified = stampedCommit, strings.HasSuffix(stampedVersion, "-dirty")
	}
	if version == "" {
		version = "(no build information)"
	}
	v := version
	if rev != "" {
		v += ", commit " + rev
		if modified {
			v += " with local changes"
		}
	}
	if info.GoVersion != "" {
		v += ", built with " + info.GoVersion
	}
	return v
}

// pseudoVersion matches the end of a Go pseudo-version (vX.0.0-yyyymmddhhmmss-abcdefabcdef,
// vX.Y.Z-pre.0.yyyymmddhhmmss-abcdefabcdef, vX.Y.Z-0.yyyymmddhhmmss-abcdefabcdef, each
// maybe +dirty or +incompatible), capturing the commit's first twelve hex digits.
var pseudoVersion = regexp.MustCompile(`[-.][0-9]{14}-([0-9a-f]{12})(\+[a-z]+)?$`)
