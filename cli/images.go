package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/system"
)

// imagesCommand is `lockbreaker images`: its help, and cmdImages to run it.
var imagesCommand = command.Command{
	Name:     "images",
	Synopsis: "build the node images that are missing",
	About: `Builds the node image (Debian with redis-server, zookeeper, libfaketime, iptables) and,
on it, the image of each system with packages of its own (etcd: etcd-server; postgres:
postgresql-15), and redis's stand-in machine image (machines up), unless an image with the
current content hash exists; --system builds only what that system's nodes run. run builds what its system needs before its first test, and
no more: a run of Redis never waits for etcd or PostgreSQL. The Debian mirror comes from the
host's apt sources, or from LOCKBREAKER_APT_MIRROR.`,
	Examples: []string{
		"lockbreaker images",
		"lockbreaker images --system etcd",
		"LOCKBREAKER_APT_MIRROR=http://mirror.example/debian lockbreaker images",
	},
	Flags: func() *flag.FlagSet {
		fs, _ := imagesFlags()
		return fs
	},
	Run: cmdImages,
	Parse: func(args []string) error {
		_, err := parseImages(args)
		return err
	},
}

// imagesFlags makes images' flag set; only holds --system.
func imagesFlags() (fs *flag.FlagSet, only *string) {
	fs = command.NewFlags("images")
	only = fs.String("system", "", "build only the images this system's nodes run; empty: every system's")
	return fs, only
}

// parseImages parses images' arguments into the systems whose images to build.
func parseImages(args []string) ([]string, error) {
	fs, only := imagesFlags()
	if err := command.Parse(fs, args); err != nil {
		return nil, err
	}
	if *only == "" {
		return system.Names(), nil
	}
	if _, err := system.Lookup(*only); err != nil {
		return nil, command.Bad(fmt.Errorf("images: %w", err))
	}
	return []string{*only}, nil
}

func cmdImages(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	names, err := parseImages(args)
	if err != nil {
		return 0, err
	}
	if err := containers.Ping(ctx); err != nil {
		return 0, err
	}
	ref, err := containers.EnsureImage(ctx, stdout)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(stdout, "node image: %s\n", ref)
	for _, name := range names {
		sys, _ := system.Lookup(name)
		if sys.Container == nil || sys.Container.Image == nil {
			continue
		}
		ref, err := containers.EnsureSystemImage(ctx, name, stdout)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(stdout, "%s image: %s\n", name, ref)
	}
	if len(names) > 1 { // every system's: the stand-in machine the tests start too
		ref, err := containers.EnsureStandInImage(ctx, standInTested, stdout)
		if err != nil {
			return 0, err
		}
		fmt.Fprintf(stdout, "%s stand-in machine image: %s\n", standInTested, ref)
	}
	return command.ExitValid, nil
}

// standInTested is the system whose stand-in machines (machines up) the tests start.
const standInTested = "redis"
