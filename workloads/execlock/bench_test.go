package execlock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/containers/containerstest"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// BenchmarkExecRoundTrip measures what the exec path costs: one acquire and one release of
// our Redis lock (SET NX PX) on a real Redis node, called in this process ("go"), then the same
// Go lock driven through the protocol as a program of its own ("exec-go": the protocol's
// own cost, pipes and JSON and a second process), then redis-py's Lock through the protocol
// ("exec-redispy": what a Python user's client costs), when Debian's python3 has redis-py.
// Each sub-benchmark reports ns per acquire-and-release; the harness's test logs the ratio.
//
//	go test -run '^$' -bench ExecRoundTrip -benchtime 2000x ./workloads/execlock/   # needs Docker
func BenchmarkExecRoundTrip(b *testing.B) {
	cluster := containerstest.Start(b, containers.Spec{System: "redis", TTL: 2 * time.Second})
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cfg := workloads.Config{System: "redis", Nodes: cluster.Addrs(), Key: "bench", TTL: 2 * time.Second,
		OpTimeout: 500 * time.Millisecond, Retry: 20 * time.Millisecond, Owner: "bench"}
	redisLock, err := workloads.LookupClient("redis")
	if err != nil {
		b.Fatal(err)
	}
	programs := []struct {
		name    string
		program []string
	}{
		{"go", nil},
		{"exec-go", []string{"env", ServeEnv + "=redis", exe}},
		{"exec-redispy", []string{"../../examples/python/redispy_lock.py"}},
	}
	for i, p := range programs {
		b.Run(p.name, func(b *testing.B) {
			if p.name == "exec-redispy" && exec.Command("/usr/bin/python3", "-c", "import redis").Run() != nil {
				b.Skip("no redis-py for /usr/bin/python3 (make deps installs python3-redis)")
			}
			cfg := cfg
			cfg.Key, cfg.Program = fmt.Sprintf("bench-%d", i), p.program
			var lock workloads.Lock
			if p.program == nil {
				lock, err = redisLock.New(cfg)
			} else {
				lock, err = Start(cfg, Defaults)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer lock.Close()
			ctx := context.Background()
			for b.Loop() {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if _, err := lock.Acquire(actx); err != nil {
					b.Fatal(err)
				}
				if err := lock.Release(actx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
		})
	}
}
