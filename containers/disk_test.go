package containers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbreaker/lockbreaker/lazydisk"
	"github.com/lockbreaker/lockbreaker/system"
)

// A node powered off comes back on what its disk had synced: Redis's log, synced before
// each reply (aof-always), keeps the lock; a file written without a sync is gone, one
// synced is kept, and the power-off says what was lost. Nothing of the disk stays after
// Stop.
func TestPowerOffKeepsOnlyWhatWasSynced(t *testing.T) {
	if err := CheckDisks(); err != nil {
		t.Skip(err)
	}
	c := startCluster(t, Spec{System: "redis", Persistence: system.PersistAOFAlways, Disks: true})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: c.Nodes()[0].Addr(), MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.Set(ctx, "lock", "held", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	sys, err := system.Lookup("redis")
	if err != nil {
		t.Fatal(err)
	}
	dir := sys.Container.Data
	if _, err := c.Exec(ctx, "n1", "sh", "-c", "echo synced > "+dir+"/synced && sync "+dir+"/synced && echo unsynced > "+dir+"/unsynced"); err != nil {
		t.Fatal(err)
	}
	lost, err := c.PowerOff(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lost: %s", lost)
	if !strings.Contains(lost, "unsynced") || strings.Contains(lost, " synced") {
		t.Errorf("lost %q: want the unsynced file named, and not the synced one", lost)
	}
	if err := c.Restart(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "lock").Result(); err != nil || got != "held" {
		t.Errorf("after the power loss the lock is %q, %v; want it kept (aof-always)", got, err)
	}
	files, err := c.Exec(ctx, "n1", "ls", dir)
	if err != nil {
		t.Fatal(err)
	}
	if names := strings.Fields(files); !slices.Contains(names, "synced") || slices.Contains(names, "unsynced") {
		t.Errorf("files after the power loss %q: want synced kept and unsynced gone", names)
	}
	run := runDisks(c.Spec().RunID)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(run); !os.IsNotExist(err) {
		t.Errorf("%s after Stop: %v, want it gone", run, err)
	}
	if mounts, err := lazydisk.Mounts(); err != nil || len(matching(mounts, run)) > 0 {
		t.Errorf("mounts of the run after Stop: %q (%v), want none", matching(mounts, run), err)
	}
}

// matching are the paths under dir.
func matching(paths []string, dir string) []string {
	var under []string
	for _, p := range paths {
		if strings.HasPrefix(p, filepath.Clean(dir)+"/") {
			under = append(under, p)
		}
	}
	return under
}
