package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/lockbreaker/lockbreaker/cli/command"
	"github.com/lockbreaker/lockbreaker/results"
	"github.com/lockbreaker/lockbreaker/suite"
)

// serveCommand is `lockbreaker serve`: its help, and cmdServe to run it.
var serveCommand = command.Command{
	Name:     "serve",
	Synopsis: "serve the run store read-only over HTTP: its index, every report",
	Args:     "[flags]",
	About: `Serves the run store, read-only, until interrupted: the index of every run at /, each
run's report and files below it, and nothing outside the store. Listens on loopback unless
--addr says otherwise.`,
	Flags: func() *flag.FlagSet {
		fs, _ := serveFlags()
		return fs
	},
	Examples: []string{"lockbreaker serve", "lockbreaker serve --addr 127.0.0.1:9000 --results /tmp/store"},
	Run:      cmdServe,
	Parse: func(args []string) error {
		_, err := parseServe(args)
		return err
	},
}

// serveOptions are serve's flags.
type serveOptions struct{ addr, results string }

func serveFlags() (*flag.FlagSet, *serveOptions) {
	opts := &serveOptions{}
	fs := command.NewFlags("serve")
	fs.StringVar(&opts.addr, "addr", "127.0.0.1:8080", "address to listen on; loopback keeps the store on this machine")
	fs.StringVar(&opts.results, "results", defaultResults, "the run store to serve")
	return fs, opts
}

// parseServe parses serve's arguments.
func parseServe(args []string) (*serveOptions, error) {
	fs, opts := serveFlags()
	return opts, command.Parse(fs, args)
}

// cmdServe serves the run store read-only until interrupted: the index at /, every run's
// files below it, nothing outside the store (symbolic links that lead out of it included).
func cmdServe(ctx context.Context, args []string, stdout io.Writer) (int, error) {
	opts, err := parseServe(args)
	if err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(opts.results)
	if err != nil {
		return 0, command.Bad(fmt.Errorf("serve: %w", err))
	}
	defer root.Close()
	listener, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return 0, command.Bad(fmt.Errorf("serve: %w", err))
	}
	fmt.Fprintf(stdout, "serving %s at http://%s/ (read-only; Ctrl-C stops)\n", command.Escape(opts.results), listener.Addr())
	if ip := listener.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		fmt.Fprintf(stdout, "note: %s is not a loopback address: anyone who can reach it can read the store\n", ip)
	}
	server := &http.Server{Handler: storeHandler(root), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		server.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := server.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		return 0, fmt.Errorf("serve: %w", err)
	}
	return command.ExitValid, nil
}

// storeHandler answers GET and HEAD only. The index is rendered afresh for / so it
// shows every run as it is now; the rest are the store's files, through root, which
// refuses any path that leads outside it.
func storeHandler(root *os.Root) http.Handler {
	files := http.FileServerFS(inside{root.FS()})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only: GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		if r.URL.Path != "/" && r.URL.Path != "/"+results.IndexFile {
			files.ServeHTTP(w, r)
			return
		}
		page, err := results.RenderIndex(root.Name(), suite.StoreTrends)
		if err != nil {
			http.Error(w, "cannot list the runs", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
}

// inside is the store's files as its root opens them: a path that leads outside the store
// is forbidden (403), not a server error.
type inside struct{ fs.FS }

func (in inside) Open(name string) (fs.File, error) {
	f, err := in.FS.Open(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return f, err
}
