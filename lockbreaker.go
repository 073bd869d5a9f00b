// Package lockbreaker tests your own distributed lock without forking lockbreaker:
// implement Lock in your package, Register it with the system it needs and whether its
// grants carry fencing tokens, and build a binary whose main calls Main. That binary is
// the whole lockbreaker command line (run, suite, check...) with your lock as one more
// --client. The harness starts every lock client as a re-execution of that same binary,
// so your lock is inside every worker.
//
//	func main() {
//		if err := lockbreaker.Register(lockbreaker.Client{
//			Name: "mylock", Systems: []string{"redis"}, Tokens: true, New: newMyLock,
//		}); err != nil {
//			log.Fatal(err)
//		}
//		lockbreaker.Main()
//	}
//
// This package adds nothing to how a verdict is reached: your lock runs under the same
// systems, nemeses and checkers as ours, and a suite file (lockbreaker suite FILE) says
// what you expect of it.
package lockbreaker

import (
	"github.com/lockbreaker/lockbreaker/cli"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// Lock is one client's handle on one distributed lock. Acquire tries until the lock is
// held or its context ends: ErrBusy means definitely not acquired, any other error leaves
// that unknown. Release gives the lock up: ErrNotHeld means this client no longer held it,
// any other error leaves that unknown. Report outcomes honestly; the checkers rely on it.
type Lock = workloads.Lock

// Grant is what a successful Acquire returns: the fencing token when the lock has one.
type Grant = workloads.Grant

// Config is what a lock client is given: the nodes' addresses, the key, the lease (TTL),
// whether to fence, the per-request timeout and the pause between tries.
type Config = workloads.Config

// Client describes a lock client for Register: its name (the --client value), the
// systems it runs against, whether grants carry a fencing token (and if not, why), and
// how to make one from a Config.
type Client = workloads.Client

var (
	// ErrBusy is Acquire's error when the lock is definitely held by another client.
	ErrBusy = workloads.ErrBusy
	// ErrNotHeld is Release's error when this client did not hold the lock any more.
	ErrNotHeld = workloads.ErrNotHeld
)

// Register adds a lock client. Call it before Main, in every start of the binary (in
// main or an init function): workers are the same binary started again, and find the
// client by its name.
func Register(c Client) error { return workloads.Register(c) }

// Main runs the lockbreaker command line on os.Args and exits with its code (0 valid,
// 1 invalid, 2 unknown, 254 bad arguments, 255 harness error). The harness starts every
// lock client as this same binary again, so whatever was registered before Main is
// inside every worker.
func Main() { cli.Main() }
