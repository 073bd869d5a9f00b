package cli

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The tutorial's commands that need no more than the harness's own lock (its step 0) run
// as written, and exit as the comment beside each says, their data broken or safe as it
// says too. A run whose danger never came
// (exit 2, on a machine too busy for the pause to outlast the lease) is tried again on the
// next seed, as the long tier does; the tutorial's commands that need Docker are parsed
// (TestDocsCommandsParse) and run by examples/python's TestTutorial. The commands run side
// by side, beside the other tests: most of a run is waiting for its time to pass.
func TestTutorialRunsWithoutDocker(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	code, _ := markdown(t, root, "docs/tutorial.md")
	exitComment := regexp.MustCompile(`#\s*exit (\d+)`)
	type run struct {
		line docLine
		want int
		data string // data-safety's verdict
		ran  chan tutorialRun
	}
	var runs []run
	for _, line := range code {
		lines, err := commandLines(line.text)
		if err != nil || len(lines) != 1 || !isLockbreaker(lines[0][0]) || !strings.Contains(line.text, "--system local") {
			continue
		}
		m := exitComment.FindStringSubmatch(line.text)
		if m == nil {
			t.Errorf("%s: no # exit N comment to hold it to", line)
			continue
		}
		want, _ := strconv.Atoi(m[1])
		r := run{line: line, want: want, ran: make(chan tutorialRun, 1)}
		switch {
		case strings.Contains(line.text, "the data broken"):
			r.data = "INVALID"
		case strings.Contains(line.text, "the data safe"):
			r.data = "VALID"
		default:
			t.Errorf("%s: its comment says neither the data broken nor the data safe", line)
		}
		args := append(lines[0][1:], "--results", filepath.Join(t.TempDir(), "store"))
		go func() { r.ran <- runTutorial(args, want) }()
		runs = append(runs, r)
	}
	if len(runs) < 2 {
		t.Errorf("the tutorial's step 0 has %d commands on the harness's own lock, want 2", len(runs))
	}
	for _, r := range runs {
		got := <-r.ran
		switch {
		case got.err != nil:
			t.Errorf("%s: %v", r.line, got.err)
		case got.code != r.want:
			t.Errorf("%s: exit %d, the tutorial says %d\n%s%s", r.line, got.code, r.want, got.stdout, got.stderr)
		case !regexp.MustCompile(`\n  data-safety +` + r.data + ` `).MatchString(got.stdout):
			t.Errorf("%s: the tutorial says data-safety %s\n%s", r.line, r.data, got.stdout)
		}
	}
}

// tutorialRun is how a tutorial's command ran, the last time it was tried.
type tutorialRun struct {
	code           int
	stdout, stderr string
	err            error
}

// runTutorial runs lockbreaker with args on seed 1, and again on the next seeds while its
// danger never came (exit 2 where want is not), at most dangerTries times.
func runTutorial(args []string, want int) tutorialRun {
	var r tutorialRun
	for seed := 1; seed <= dangerTries; seed++ {
		r.code, r.stdout, r.stderr, r.err = runLockbreaker(nil, append(args, "--seed", fmt.Sprint(seed))...)
		if r.err != nil || r.code == want || r.code != 2 {
			break
		}
	}
	return r
}

// dangerTries is how many seeds a run whose danger may not come is tried on.
const dangerTries = 4
