package results

import (
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lockbreaker/lockbreaker/checkers"
)

// maxEvidence is how many evidence lines a report or junit.xml shows per checker.
const maxEvidence = 50

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string `xml:"name,attr"`
	Tests     int    `xml:"tests,attr"`
	Failures  int    `xml:"failures,attr"`
	Errors    int    `xml:"errors,attr"`
	Skipped   int    `xml:"skipped,attr"`
	Time      string `xml:"time,attr,omitempty"`
	Timestamp string `xml:"timestamp,attr,omitempty"`
	// Properties count the run's hazards: "hazard grant-lost" 9, and for one a nemesis of
	// the run exists to create, "hazard grant-lost nemesis" failover.
	Properties *junitProperties `xml:"properties"`
	Cases      []junitCase      `xml:"testcase"`
	SystemOut  string           `xml:"system-out,omitempty"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitProblem `xml:"skipped"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProperties struct {
	List []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes junit.xml in dir: one testsuite named after the test, one testcase per
// checker. Invalid is a failure (message: the summary, text: the evidence), unknown an
// error, valid a pass, not applicable a skip. A metric never fails: it passes, or is
// skipped when not applicable. A harness error, or a run with no checker at all, is one more
// errored testcase, so CI never passes a run that proved nothing. The run's hazards are
// properties of the testsuite and a line of each checker's output, after what a valid
// safety verdict held through; a hazard a nemesis asked for that never occurred is there
// as absent, and in the message of every case it left unknown (the stats summary).
func WriteJUnit(dir string, s Summary) error {
	suite := junitSuite{Name: s.Test}
	if !s.Started.IsZero() {
		suite.Timestamp = s.Started.UTC().Format("2006-01-02T15:04:05Z")
		if s.Finished.After(s.Started) {
			suite.Time = fmt.Sprintf("%.3f", s.Finished.Sub(s.Started).Seconds())
		}
	}
	class := "lockbreaker." + s.Test
	addError := func(name, msg string) {
		suite.Cases = append(suite.Cases, junitCase{Name: name, Classname: class,
			Error: &junitProblem{Message: msg, Type: string(checkers.Unknown), Text: msg}})
		suite.Errors++
	}
	var properties []junitProperty
	for _, h := range s.Hazards {
		properties = append(properties, junitProperty{Name: checkers.HazardCount(h.Hazard), Value: fmt.Sprint(h.Count)})
		if h.Nemesis != "" {
			properties = append(properties, junitProperty{Name: checkers.HazardCount(h.Hazard) + " nemesis", Value: h.Nemesis})
		}
	}
	if len(properties) > 0 { // an empty <properties> would still be written
		suite.Properties = &junitProperties{List: properties}
	}
	hazards := hazardsLine(s.Hazards)
	for _, r := range s.Results {
		c := junitCase{Name: string(r.Checker), Classname: class, SystemOut: hazards}
		if through := throughHazards(r, s.Hazards); through != "" {
			c.SystemOut = fmt.Sprintf("%s %s %s\n%s", r.Checker, r.Verdict, through, hazards)
		}
		text := strings.Join(capLines(r.Evidence, maxEvidence), "\n")
		switch {
		case r.Verdict == checkers.NotApplicable:
			c.Skipped = &junitProblem{Message: r.Summary}
			suite.Skipped++
		case r.Verdict == checkers.Valid, r.Property == checkers.PropertyMetric:
		case r.Verdict == checkers.Invalid:
			if story := checkers.StoryText(r.Story); story != "" { // what happened, before the evidence
				text = story + "\n\n" + text
			}
			c.Failure = &junitProblem{Message: r.Summary, Type: string(r.Verdict), Text: text}
			suite.Failures++
		default:
			c.Error = &junitProblem{Message: r.Summary, Type: string(checkers.Unknown), Text: text}
			suite.Errors++
		}
		suite.Cases = append(suite.Cases, c)
	}
	if len(s.Results) == 0 {
		addError("checkers", "no checker ran")
	}
	if s.Error != "" {
		addError("harness", s.Error)
	}
	if len(s.NotServing) > 0 { // a CI job never passes a run its service did not finish
		addError("service", fmt.Sprintf("nodes that did not serve again after a fault took them down: %s; the run ended there",
			strings.Join(s.NotServing, ", ")))
	}
	suite.Tests = len(suite.Cases)
	suite.SystemOut = strings.Join(s.Notes, "\n")
	b, err := xml.MarshalIndent(junitSuites{
		Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", JUnitFile, err)
	}
	return WriteAtomic(filepath.Join(dir, JUnitFile), append([]byte(xml.Header), append(b, '\n')...))
}

// capLines keeps the first n lines and says how many more there were.
func capLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("... and %d more", len(lines)-n))
}
