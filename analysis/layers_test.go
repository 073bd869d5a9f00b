package analysis

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/lockbreaker/lockbreaker"

// goList runs go list in this module with args and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages with")
	}
	out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
	if err != nil {
		var stderr string
		if e, ok := err.(*exec.ExitError); ok {
			stderr = string(e.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

// lockClients are the module paths of the lock client libraries the workers link.
var lockClients = []string{
	"github.com/redis/go-redis/", "github.com/go-zookeeper/zk", "go.etcd.io/etcd/", "github.com/jackc/pgx/",
	"github.com/go-redsync/redsync/", "github.com/bsm/redislock",
}

// within says whether pkg is the package path or one below it.
func within(pkg, path string) bool { return pkg == path || strings.HasPrefix(pkg, path+"/") }

// forbidden says why a package may not be linked into check and report, or "": what runs
// a test (Docker, containers, the harness, the nemeses, the proxies on the clients' links,
// the lock clients and the workloads that drive them, a system file's loading) has no part in judging a saved one.
func forbidden(pkg string) string {
	switch {
	case strings.Contains(pkg, "docker"), strings.Contains(pkg, "moby"), strings.Contains(pkg, "testcontainers"):
		return "a Docker client"
	case within(pkg, module+"/harness"):
		return "the harness"
	case within(pkg, module+"/containers"):
		return "the containers"
	case within(pkg, module+"/nemesis"):
		return "the nemeses"
	case within(pkg, module+"/workloads"):
		return "the workloads and their lock clients"
	case within(pkg, module+"/sysfile"):
		return "the system files' loading"
	case within(pkg, module+"/links"), strings.Contains(pkg, "toxiproxy"):
		return "the proxies on the clients' links"
	case slices.ContainsFunc(lockClients, func(c string) bool { return strings.HasPrefix(pkg, c) }):
		return "a lock client library"
	}
	return ""
}

// Check and report judge and draw a saved run, a suite judges its runs and the store's
// trends, a story is told and a shrink searches, with nothing but the files and the
// runner they are handed: none of them links the Docker side, the nemeses or a lock
// client, so `check` of a saved file links none of what made it.
func TestOfflineCommandsLinkNoDocker(t *testing.T) {
	for _, top := range []string{"/analysis", "/cli/offline", "/suite", "/story", "/shrink", "/hunt"} {
		for _, pkg := range goList(t, "-deps", module+top) {
			if why := forbidden(pkg); why != "" {
				t.Errorf("%s links %s, %s", top[1:], pkg, why)
			}
		}
	}
}

// A spec is plain data: package spec links nothing that runs or registers anything (the
// workloads, nemeses, systems, system files, containers, harness), so judging a saved
// run's spec needs none of them; asking whether what it names exists is the harness's
// (harness.CheckSpec).
func TestSpecIsData(t *testing.T) {
	for _, pkg := range goList(t, "-deps", module+"/spec") {
		why := forbidden(pkg)
		if within(pkg, module+"/system") {
			why = "the systems' registry"
		}
		if why != "" {
			t.Errorf("spec links %s, %s", pkg, why)
		}
	}
}

// Data flows one way: the harness imports analysis, spec, checkers, results and the rest,
// and only the packages above it (the CLI, the root and our binary) import it; the suite
// is handed the harness's runner by the CLI.
func TestNothingBelowTheHarnessImportsIt(t *testing.T) {
	above := []string{module, module + "/cmd/lockbreaker", module + "/cli"}
	lines := goList(t, "-f", `{{.ImportPath}}{{range .Deps}},{{.}}{{end}}`, module+"/...")
	for _, line := range lines {
		deps := strings.Split(line, ",")
		pkg := deps[0]
		if slices.Contains(deps[1:], module+"/harness") && !slices.Contains(above, pkg) {
			t.Errorf("%s imports the harness (only %s may)", pkg, strings.Join(above, ", "))
		}
	}
}

// A nemesis pulls levers through the small interfaces of nemesis/levers.go and never makes
// them: the packages that do (the proxies, the CPU caps, the clients' own addresses) are
// the harness's to adapt, so a new lever costs no edit of the nemeses' imports.
func TestNemesisMakesNoLever(t *testing.T) {
	makers := []string{module + "/links", module + "/cpucap", module + "/clientnet"}
	for _, pkg := range goList(t, "-deps", module+"/nemesis") {
		if slices.Contains(makers, pkg) || strings.Contains(pkg, "toxiproxy") {
			t.Errorf("nemesis links %s, which makes a lever", pkg)
		}
	}
}
