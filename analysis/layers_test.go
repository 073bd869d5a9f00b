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

// forbidden says why a package may not be linked into check and report, or "".
func forbidden(pkg string) string {
	switch {
	case strings.Contains(pkg, "docker"), strings.Contains(pkg, "moby"), strings.Contains(pkg, "testcontainers"):
		return "a Docker client"
	case pkg == module+"/harness", strings.HasPrefix(pkg, module+"/harness/"):
		return "the harness"
	case pkg == module+"/containers", strings.HasPrefix(pkg, module+"/containers/"):
		return "the containers"
	}
	return ""
}

// Check and report judge and draw a saved run, a suite judges its runs and the store's
// trends, a story is told and a shrink searches, with nothing but the files and the
// runner they are handed: none of them links the Docker side.
func TestOfflineCommandsLinkNoDocker(t *testing.T) {
	for _, top := range []string{"/analysis", "/cli/offline", "/suite", "/story", "/shrink"} {
		for _, pkg := range goList(t, "-deps", module+top) {
			if why := forbidden(pkg); why != "" {
				t.Errorf("%s links %s, %s", top[1:], pkg, why)
			}
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
