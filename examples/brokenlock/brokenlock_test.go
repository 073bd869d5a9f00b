package brokenlock_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockbreaker/lockbreaker"
	"github.com/lockbreaker/lockbreaker/examples/brokenlock"
)

// Registering is checked: a name is taken once.
func TestRegisterRefusesATakenName(t *testing.T) {
	if err := brokenlock.Register(); err != nil {
		t.Fatal(err)
	}
	err := lockbreaker.Register(lockbreaker.Client{Name: "brokenlock", Systems: []string{"redis"}, Tokens: true})
	if err == nil || !strings.Contains(err.Error(), "taken") {
		t.Fatalf("registering brokenlock twice: %v", err)
	}
}

// The suite, run by the user's own binary, finds the lock whose release does not check
// ownership, and passes the same lock with the check.
func TestSuiteFindsTheBrokenLock(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Docker: a real Redis")
	}
	bin := filepath.Join(t.TempDir(), "brokenlock")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/brokenlock").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	store := t.TempDir()
	cmd := exec.Command(bin, "suite", "--results", store, "brokenlock.yaml")
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("suite: %v, want exit 1 (an expectation not met)", err)
	}
	dirs, _ := filepath.Glob(filepath.Join(store, "suite-brokenlock", "2*"))
	if len(dirs) != 1 {
		t.Fatalf("suite directories %q, want one", dirs)
	}
	var result struct {
		Cells []struct {
			Cell    struct{ Name string }
			Status  string
			Reasons []string
		}
	}
	data, err := os.ReadFile(filepath.Join(dirs[0], "suite.json"))
	if err != nil || json.Unmarshal(data, &result) != nil {
		t.Fatalf("suite.json: %v", err)
	}
	want := map[string]string{"fixedlock-no-faults": "met", "brokenlock-no-faults": "failed", "brokenlock-fenced": "met"}
	for _, c := range result.Cells {
		if c.Status != want[c.Cell.Name] {
			t.Errorf("cell %s: %s, want %s (%q)", c.Cell.Name, c.Status, want[c.Cell.Name], c.Reasons)
		}
		if c.Cell.Name == "brokenlock-no-faults" && !slices.ContainsFunc(c.Reasons, func(r string) bool {
			return strings.Contains(r, "mutual-exclusion expected valid, got invalid")
		}) {
			t.Errorf("the broken lock's reasons do not name the overlapping holds: %q", c.Reasons)
		}
	}
	var junit struct {
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testcase"`
	}
	data, err = os.ReadFile(filepath.Join(dirs[0], "junit.xml"))
	if err != nil || xml.Unmarshal(data, &junit) != nil || junit.Failures != 1 || len(junit.Cases) != 3 {
		t.Fatalf("junit.xml: %v, %d failures in %d cases; want 1 in 3", err, junit.Failures, len(junit.Cases))
	}
}
