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
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr,omitempty"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
	SystemOut string      `xml:"system-out,omitempty"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitProblem `xml:"skipped"`
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
// errored testcase, so CI never passes a run that proved nothing.
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
	for _, r := range s.Results {
		c := junitCase{Name: r.Checker, Classname: class}
		text := strings.Join(capLines(r.Evidence, maxEvidence), "\n")
		switch {
		case r.Verdict == checkers.NotApplicable:
			c.Skipped = &junitProblem{Message: r.Summary}
			suite.Skipped++
		case r.Verdict == checkers.Valid, r.Property == checkers.PropertyMetric:
		case r.Verdict == checkers.Invalid:
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
