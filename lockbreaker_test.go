package lockbreaker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lockbreaker/lockbreaker/suite"
)

type nopLock struct{}

func (nopLock) Acquire(context.Context) (Grant, error) { return Grant{}, ErrBusy }
func (nopLock) Release(context.Context) error          { return ErrNotHeld }
func (nopLock) Close() error                           { return nil }

func newNop(Config) (Lock, error) { return nopLock{}, nil }

// Register refuses what would make a user's client unusable or ambiguous, each with a
// reason.
func TestRegister(t *testing.T) {
	tests := []struct {
		name   string
		client Client
		want   string // "" when it must be accepted
	}{
		{"a new lock", Client{Name: "mylock-ok", Systems: []string{"redis"}, Tokens: true, New: newNop}, ""},
		{"no tokens, with the reason", Client{Name: "mylock-notokens", Systems: []string{"redlock"}, NoTokens: "it has none", New: newNop}, ""},
		{"a taken name", Client{Name: "redis", Systems: []string{"redis"}, Tokens: true, New: newNop}, "the name is taken"},
		{"no name", Client{Systems: []string{"redis"}, Tokens: true, New: newNop}, "a name is a printable word"},
		{"a name a list would split", Client{Name: "my,lock", Systems: []string{"redis"}, Tokens: true, New: newNop}, "without spaces, commas or slashes"},
		{"no system", Client{Name: "mylock-1", Tokens: true, New: newNop}, "name the systems it runs on"},
		{"an unknown system", Client{Name: "mylock-2", Systems: []string{"consul"}, Tokens: true, New: newNop}, `unknown system "consul"`},
		{"no constructor", Client{Name: "mylock-3", Systems: []string{"redis"}, Tokens: true}, "no New function"},
		{"no tokens, no reason", Client{Name: "mylock-4", Systems: []string{"redis"}, New: newNop}, "say why its grants carry no fencing token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Register(tt.client)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// The nightly workflow cannot run here, so it is kept correct by construction: its steps
// call make targets that exist and expand to the suite command it means, and the junit.xml
// it keeps is where the suite writes it.
func TestNightlyWorkflowUsesTheMakefile(t *testing.T) {
	data, err := os.ReadFile(".github/workflows/nightly.yml")
	if err != nil {
		t.Fatal(err)
	}
	var workflow struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct{ Shard []int }
			}
			Steps []struct {
				Run  string
				With map[string]any
			}
		}
	}
	if err := yaml.Unmarshal(data, &workflow); err != nil {
		t.Fatalf("nightly.yml: %v", err)
	}
	job := workflow.Jobs["kleppmann"]
	if len(job.Strategy.Matrix.Shard) < 2 {
		t.Fatalf("shards %v: want the suite split over a matrix", job.Strategy.Matrix.Shard)
	}
	var makes, paths []string
	for _, step := range job.Steps {
		if _, cmd, ok := strings.Cut(step.Run, "make "); ok {
			makes = append(makes, cmd)
		}
		if p, ok := step.With["path"].(string); ok {
			paths = append(paths, p)
		}
	}
	if len(makes) != 2 {
		t.Fatalf("make steps %q: want the image, then the suite", makes)
	}
	for i, cmd := range makes {
		n := len(job.Strategy.Matrix.Shard)
		cmd = strings.ReplaceAll(cmd, "${{ matrix.shard }}", fmt.Sprint(n))
		out, err := exec.Command("make", append([]string{"-n"}, strings.Fields(cmd)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", cmd, err, out)
		}
		if want := fmt.Sprintf("suite kleppmann --seeds 5 --shard %d/%d --results store", n, n); i == 1 && !strings.Contains(string(out), want) {
			t.Errorf("make %s does not run %q:\n%s", cmd, want, out)
		}
	}
	junit := "store/suite-kleppmann/*/" + suite.JUnitFile
	if !slices.Contains(paths, junit) || !slices.Contains(paths, "store/") {
		t.Errorf("artifacts %q: want the store and %s", paths, junit)
	}
}
