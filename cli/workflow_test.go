package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/lockbreaker/lockbreaker/containers"
	"github.com/lockbreaker/lockbreaker/suite"
)

// The CI workflow a team copies, examples/ci/lockbreaker.yml, cannot run here: its actions
// are GitHub's, its runner a hosted one. So its YAML is parsed and held to what
// docs/tutorial.md says it does, its commands are checked as the docs' are (each
// lockbreaker command by the command's own Parse, each make target against the Makefile),
// and the steps that need no Docker run as written: the one that names the node image
// for the cache's key, and the suite, on a suite file of the harness's own lock standing
// in for the team's, where the artifact's paths must find junit.xml and suite.html.

// workflowFile is the workflow, from the repository's root.
const workflowFile = "examples/ci/lockbreaker.yml"

// workflow is what the tests read of a GitHub Actions workflow.
type workflow struct {
	Env  map[string]string
	Jobs map[string]workflowJob
}

type workflowJob struct {
	RunsOn   string `yaml:"runs-on"`
	Defaults struct{ Run struct{ Shell string } }
	Steps    []workflowStep
}

type workflowStep struct {
	Name, ID, Uses, If, Run string
	Dir                     string `yaml:"working-directory"`
	With                    map[string]string
}

// readWorkflow parses the workflow and returns it with its one job.
func readWorkflow(t *testing.T) (workflow, workflowJob) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), workflowFile))
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	if err := yaml.Unmarshal(data, &w); err != nil {
		t.Fatalf("%s: %v", workflowFile, err)
	}
	if len(w.Jobs) != 1 {
		t.Fatalf("%s has %d jobs, want the one a team copies", workflowFile, len(w.Jobs))
	}
	for _, job := range w.Jobs {
		return w, job
	}
	panic("unreachable")
}

// uses says whether a step uses the action, at whatever version.
func (s workflowStep) uses(action string) bool { return strings.HasPrefix(s.Uses, action+"@") }

// runs says whether a step's script runs the command line: sudo and env aside, its words
// start with these.
func (s workflowStep) runs(words ...string) bool {
	for _, line := range strings.Split(s.Run, "\n") {
		cmds, _ := commandLines(line)
		if slices.ContainsFunc(cmds, func(cmd []string) bool {
			return len(cmd) >= len(words) && slices.Equal(cmd[:len(words)], words)
		}) {
			return true
		}
	}
	return false
}

// lockbreakerRepo is this repository as actions/checkout names it: the module's path
// without its host.
func lockbreakerRepo(t *testing.T) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(repoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module, _, _ := strings.Cut(strings.TrimPrefix(string(gomod), "module "), "\n")
	_, repo, _ := strings.Cut(module, "/")
	return repo
}

// The workflow does, in this order, what the tutorial says it does: it checks out the
// team's repository and lockbreaker at a pinned ref, sets Go up from lockbreaker's go.mod,
// builds it, installs with sudo what runs need and the client's own dependencies, restores
// the node images from a cache keyed on their content hash (lockbreaker version), loads
// them or makes and saves them, runs the suite under sudo, and keeps junit.xml and
// suite.html whatever the suite's outcome.
func TestCIWorkflowSteps(t *testing.T) {
	w, job := readWorkflow(t)
	if job.RunsOn != "ubuntu-latest" {
		t.Errorf("runs-on %q, want a hosted runner, ubuntu-latest", job.RunsOn)
	}
	if job.Defaults.Run.Shell != "bash" {
		t.Errorf("the steps' shell is %q, want bash (-e, -o pipefail)", job.Defaults.Run.Shell)
	}
	if w.Env["LOCKBREAKER_REF"] == "" || w.Env["LOCKBREAKER_SYSTEM"] == "" {
		t.Errorf("env %v: want LOCKBREAKER_REF and LOCKBREAKER_SYSTEM, what a team sets", w.Env)
	}
	repo := lockbreakerRepo(t)
	src := "" // where lockbreaker is checked out
	for _, s := range job.Steps {
		if s.uses("actions/checkout") && s.With["repository"] == repo {
			src = s.With["path"]
		}
	}
	cacheKey := func(s workflowStep) bool {
		return strings.Contains(s.With["key"], "${{ steps.image.outputs.ref }}") && strings.Contains(s.With["key"], "${{ env.LOCKBREAKER_SYSTEM }}")
	}
	const tar, tarEnv = "${{ runner.temp }}/lockbreaker-images.tar", `"$RUNNER_TEMP/lockbreaker-images.tar"`
	missed, hit := "steps.cache.outputs.cache-hit != 'true'", "steps.cache.outputs.cache-hit == 'true'"
	sudoPath := `sudo env "PATH=$PATH" `
	order := []struct {
		what string
		is   func(workflowStep) bool
	}{
		{"the team's repository checked out", func(s workflowStep) bool { return s.uses("actions/checkout") && s.With["repository"] == "" }},
		{"lockbreaker checked out at LOCKBREAKER_REF, into a directory of its own", func(s workflowStep) bool {
			return s.uses("actions/checkout") && s.With["repository"] == repo && s.With["ref"] == "${{ env.LOCKBREAKER_REF }}" && src != ""
		}},
		{"Go set up from lockbreaker's go.mod", func(s workflowStep) bool {
			return s.uses("actions/setup-go") && s.With["go-version-file"] == src+"/go.mod"
		}},
		{"lockbreaker built and put on PATH", func(s workflowStep) bool {
			return s.Dir == src && s.runs("make", "build") && strings.Contains(s.Run, `echo "$PWD/bin" >> "$GITHUB_PATH"`)
		}},
		{"what runs need and the client's dependencies installed with sudo", func(s workflowStep) bool {
			return s.Dir == src && strings.Contains(s.Run, "sudo make deps-run") && strings.Contains(s.Run, "sudo apt-get install")
		}},
		{"the node image named, by its content hash", func(s workflowStep) bool {
			return s.ID == "image" && strings.Contains(s.Run, `"ref=$(lockbreaker version | sed -n 's/^node image //p')" >> "$GITHUB_OUTPUT"`)
		}},
		{"the node images restored from the cache, keyed on that name", func(s workflowStep) bool {
			return s.ID == "cache" && s.uses("actions/cache/restore") && s.With["path"] == tar && cacheKey(s)
		}},
		{"the node images loaded when the cache had them", func(s workflowStep) bool {
			return s.If == hit && strings.HasPrefix(s.Run, "docker load -i "+tarEnv)
		}},
		{"the node images made with sudo, unless loaded", func(s workflowStep) bool {
			return s.If == "" && strings.HasPrefix(s.Run, sudoPath) && s.runs("lockbreaker", "images", "--system", "$LOCKBREAKER_SYSTEM")
		}},
		{"lockbreaker's images saved when the cache had none", func(s workflowStep) bool {
			return s.If == missed && strings.HasPrefix(s.Run, "docker save -o "+tarEnv) &&
				strings.Contains(s.Run, "--filter label="+containers.LabelProject+"=1 ")
		}},
		{"the node images kept in the cache, under the key restored", func(s workflowStep) bool {
			return s.If == missed && s.uses("actions/cache/save") && s.With["path"] == tar && cacheKey(s)
		}},
		{"the suite run with sudo", func(s workflowStep) bool {
			return s.If == "" && strings.HasPrefix(s.Run, sudoPath) && s.runs("lockbreaker", "suite")
		}},
		{"junit.xml and suite.html kept, also when the suite failed", func(s workflowStep) bool {
			return s.If == "always()" && s.uses("actions/upload-artifact") &&
				strings.Contains(s.With["path"], "/"+suite.JUnitFile+"\n") && strings.Contains(s.With["path"], "/suite.html\n")
		}},
	}
	i := 0
	for _, want := range order {
		for i < len(job.Steps) && !want.is(job.Steps[i]) {
			i++
		}
		if i == len(job.Steps) {
			t.Fatalf("%s: no step after the ones before does this: %s", workflowFile, want.what)
		}
		i++
	}
	if i != len(job.Steps) {
		t.Errorf("%s: the artifact's step is not the last", workflowFile)
	}
}

// Every lockbreaker command of the workflow's steps is one the binary takes, flags and
// values included, and every make names targets of lockbreaker's Makefile, run where
// lockbreaker is checked out: the docs' own check of commands (TestDocsCommandsParse),
// with the workflow's variables filled in. Root's commands (apt-get, make deps-run, a run
// or suite, the images) run under sudo, and lockbreaker's keeps the PATH it was put on.
func TestCIWorkflowCommandsParse(t *testing.T) {
	w, job := readWorkflow(t)
	root := repoRoot(t)
	t.Chdir(root) // the docs' check reads the paths named from here
	src := ""
	for _, s := range job.Steps {
		if s.uses("actions/checkout") && s.With["repository"] != "" {
			src = s.With["path"]
		}
	}
	variable := regexp.MustCompile(`\$\{([A-Z_][A-Z0-9_]*)\}|\$([A-Z_][A-Z0-9_]*)`)
	expand := func(line string) string {
		return variable.ReplaceAllStringFunc(line, func(v string) string {
			if value, ok := w.Env[strings.Trim(v, "${}")]; ok {
				return value
			}
			return v
		})
	}
	var lockbreakers, makes int
	for _, s := range job.Steps {
		for _, line := range strings.Split(strings.TrimSpace(s.Run), "\n") {
			if strings.HasSuffix(line, `\`) {
				t.Errorf("%s: %q goes on on the next line, which this test reads alone", s.Name, line)
			}
			cmds, err := commandLines(expand(line))
			if err != nil {
				t.Errorf("%s: %q: %v", s.Name, line, err)
				continue
			}
			for _, cmd := range cmds {
				asRoot := len(cmd) > 1 && (cmd[0] == "apt-get" || cmd[0] == "make" && cmd[1] == "deps-run" ||
					isLockbreaker(cmd[0]) && slices.Contains([]string{"images", "run", "suite"}, cmd[1]))
				if asRoot && !strings.HasPrefix(strings.TrimSpace(line), "sudo ") {
					t.Errorf("%s: %q needs root, which a hosted runner's user is not: sudo", s.Name, line)
				}
				switch {
				case isLockbreaker(cmd[0]):
					lockbreakers++
					if !strings.Contains(line, `sudo env "PATH=$PATH" `) && asRoot {
						t.Errorf("%s: %q: sudo drops the PATH lockbreaker was put on: sudo env \"PATH=$PATH\"", s.Name, line)
					}
					if err := checkCommand(root, cmd[1:]); err != nil {
						t.Errorf("%s: %q\n\t%v", s.Name, line, err)
					}
				case cmd[0] == "make":
					makes++
					if s.Dir != src {
						t.Errorf("%s: %q runs where lockbreaker is not checked out (%q)", s.Name, line, s.Dir)
					} else if err := checkMake(root, cmd[1:]); err != nil {
						t.Errorf("%s: %q\n\t%v", s.Name, line, err)
					}
				}
			}
		}
	}
	if lockbreakers < 2 || makes < 2 {
		t.Errorf("found %d lockbreaker and %d make commands in the workflow's steps; want the images and the suite, the build and deps-run", lockbreakers, makes)
	}
}

// The workflow's steps that need no Docker run as written, under bash as GitHub runs them
// (-e, -o pipefail), with lockbreaker on PATH and as root, which sudo makes it there: the
// node image's name is the cache's key, and the suite, on a suite file of the harness's
// own lock in place of the team's, exits 0 and writes junit.xml and suite.html where the
// artifact's paths find them. The suite file of the tutorial itself runs in
// examples/python's TestTutorial, on Redis.
func TestCIWorkflowRunsHere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a suite of the harness's own lock for seconds")
	}
	if os.Geteuid() != 0 {
		t.Skip("the workflow runs lockbreaker as root (sudo)")
	}
	t.Parallel()
	w, job := readWorkflow(t)
	bin, workspace, temp := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "lockbreaker")); err != nil {
		t.Fatal(err)
	}
	// Root already: sudo runs the command as it is.
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte("#!/bin/sh\nexec \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const standIn = `name: mylock
defaults: {system: local, time_limit: 500ms}
cells:
  - name: mylock-no-faults
    spec: {nemesis: [none]}
    expect: {mutual-exclusion: valid, data-safety: valid}
    why: the harness's own lease lock, standing in for a team's
`
	if err := os.WriteFile(filepath.Join(workspace, "mylock.yaml"), []byte(standIn), 0o644); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(temp, "output")
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GITHUB_OUTPUT="+output, "GITHUB_PATH="+filepath.Join(temp, "path"), "RUNNER_TEMP="+temp)
	for k, v := range w.Env {
		env = append(env, k+"="+v)
	}
	step := func(is func(workflowStep) bool) {
		t.Helper()
		i := slices.IndexFunc(job.Steps, is)
		if i < 0 {
			t.Fatal("no such step")
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", job.Steps[i].Run)
		cmd.Dir, cmd.Env = workspace, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("step %q: %v\n%s", job.Steps[i].Name, err, out)
		}
	}

	step(func(s workflowStep) bool { return s.ID == "image" })
	if got, err := os.ReadFile(output); err != nil || string(got) != "ref="+containers.ImageRef()+"\n" {
		t.Errorf("the image step's output %q (%v), want ref=%s: the cache's key would not be the image's", got, err, containers.ImageRef())
	}

	step(func(s workflowStep) bool { return s.runs("lockbreaker", "suite") })
	upload := job.Steps[len(job.Steps)-1]
	var kept []string
	for _, pattern := range strings.Fields(upload.With["path"]) {
		found, _ := filepath.Glob(filepath.Join(workspace, strings.TrimSuffix(pattern, "/")))
		if len(found) == 0 {
			t.Errorf("the artifact's path %s finds nothing of the suite's", pattern)
		}
		kept = append(kept, found...)
	}
	for _, file := range []string{suite.JUnitFile, "suite.html"} {
		i := slices.IndexFunc(kept, func(k string) bool { return filepath.Base(k) == file })
		if i < 0 {
			t.Errorf("the artifact keeps %q: not %s", kept, file)
			continue
		}
		if b, err := os.ReadFile(kept[i]); err != nil || !strings.Contains(string(b), "mylock-no-faults") {
			t.Errorf("%s does not tell of the suite's cell (%v)", kept[i], err)
		}
	}
}
