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
// (TestDocsCommandsParse) and run by examples/python's TestTutorial. Each command runs
// beside the others, as the processes of their own they are: most of a run is waiting.
func TestTutorialRunsWithoutDocker(t *testing.T) {
	root := repoRoot(t)
	code, _ := markdown(t, root, "docs/tutorial.md")
	exitComment := regexp.MustCompile(`#\s*exit (\d+)`)
	ran := 0
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
		ran++
		data := ""
		switch {
		case strings.Contains(line.text, "the data broken"):
			data = "INVALID"
		case strings.Contains(line.text, "the data safe"):
			data = "VALID"
		default:
			t.Errorf("%s: its comment says neither the data broken nor the data safe", line)
		}
		t.Run(fmt.Sprintf("tutorial.md:%d", line.n), func(t *testing.T) {
			t.Parallel()
			args := append(lines[0][1:], "--results", filepath.Join(t.TempDir(), "store"))
			for seed := 1; ; seed++ {
				code, stdout, stderr := lockbreaker(t, nil, append(args, "--seed", fmt.Sprint(seed))...)
				if code == want {
					if !regexp.MustCompile(`\n  data-safety +` + data + ` `).MatchString(stdout) {
						t.Errorf("%s: the tutorial says data-safety %s\n%s", line, data, stdout)
					}
					break
				}
				if code != 2 || seed == dangerTries {
					t.Errorf("%s: exit %d, the tutorial says %d\n%s%s", line, code, want, stdout, stderr)
					break
				}
			}
		})
	}
	if ran < 2 {
		t.Errorf("the tutorial's step 0 has %d commands on the harness's own lock, want 2", ran)
	}
}

// dangerTries is how many seeds a run whose danger may not come is tried on.
const dangerTries = 4
