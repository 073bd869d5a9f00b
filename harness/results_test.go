package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockbreaker/lockbreaker/analysis"
	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/results"
)

// A run rebuilds the store's index, which lists it with its verdict and links its report.
func TestRunRebuildsTheIndex(t *testing.T) {
	inMakeTest(t, "results' own tests of the index")
	inLane(t, laneLocal)
	spec := localSpec("local-broken", []string{"none"}, false)
	spec.TimeLimit = Duration(time.Second) // the index needs a run that ended, not a long one
	dir, s := runTrial(t, spec)
	test, id := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
	page, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(dir)), results.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<tr class="run ` + string(s.Verdict) + `"`, `<a href="` + test + "/" + id + `/report.html">` + test + "</a>"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("index lacks %s:\n%s", want, page)
		}
	}
}

// A run judges its history read back from the file, as check does, so judging the run
// again changes no byte of the results.json it wrote.
func TestARunsResultsAreACheckOfItsHistory(t *testing.T) {
	inMakeTest(t, "cli's TestCheckSetsAsideAForeignResultsFile, check on a saved run")
	inLane(t, laneLocal)
	dir, _ := runTrial(t, localSpec("local-broken", []string{"pause-holder"}, false))
	path := filepath.Join(dir, results.SummaryFile)
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	saved, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := analysis.File(context.Background(), dir, filepath.Join(dir, results.HistoryFile), saved, checkers.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	checked, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(checked, written) {
		t.Errorf("the run wrote\n%s\na check of its history\n%s", written, checked)
	}
}

// The report's header and the index read a spec by spec.json's field names.
func TestResultsReadTheSpec(t *testing.T) {
	c, err := CheckSpec(localSpec("local", []string{"pause-holder", "kill-client"}, true))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Spec()
	spec, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := results.Setup{System: s.System, Client: s.Client, Nemesis: s.Nemesis, Fencing: s.Fencing, Clients: s.Clients,
		Seed: s.Seed, TTL: s.TTL.Std().String(), TimeLimit: s.TimeLimit.Std().String()}
	if got := results.ReadSetup(spec); !reflect.DeepEqual(got, want) {
		t.Errorf("setup %+v, want %+v", got, want)
	}
}
