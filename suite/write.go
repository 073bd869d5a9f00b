package suite

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/results"
)

// Write writes suite.json, junit.xml and suite.html into dir, each atomically. They render
// r; they decide nothing.
func Write(dir string, r Result) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", JSONFile, err)
	}
	page, err := renderHTML(r)
	if err != nil {
		return fmt.Errorf("render %s: %w", HTMLFile, err)
	}
	junit, err := renderJUnit(r)
	if err != nil {
		return fmt.Errorf("render %s: %w", JUnitFile, err)
	}
	return errors.Join(
		results.WriteAtomic(filepath.Join(dir, JSONFile), append(data, '\n')),
		results.WriteAtomic(filepath.Join(dir, HTMLFile), page),
		results.WriteAtomic(filepath.Join(dir, JUnitFile), junit),
	)
}

// junit.xml: one testsuite, one testcase per cell. A cell that failed its expectations is
// a failure whose message is its first reason, an unknown cell an error, so CI never
// passes a cell that proved nothing.
type junitReport struct {
	XMLName   xml.Name    `xml:"testsuite"`
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cells     []junitCell `xml:"testcase"`
}

type junitCell struct {
	Name      string       `xml:"name,attr"`
	Classname string       `xml:"classname,attr"`
	Time      string       `xml:"time,attr"`
	Failure   *junitReason `xml:"failure"`
	Error     *junitReason `xml:"error"`
	Out       string       `xml:"system-out,omitempty"`
}

type junitReason struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

func renderJUnit(r Result) ([]byte, error) {
	rep := junitReport{Name: "lockbreaker suite " + r.Suite, Tests: len(r.Cells),
		Time: seconds(r.Finished.Sub(r.Started)), Timestamp: r.Started.UTC().Format(time.RFC3339)}
	for _, c := range r.Cells {
		jc := junitCell{Name: c.Cell.Name, Classname: "lockbreaker.suite." + r.Suite, Out: cellFacts(c)}
		var took time.Duration
		for _, run := range c.Runs {
			took += run.Elapsed.Std()
		}
		jc.Time = seconds(took)
		if c.Status != Met {
			reason := &junitReason{Message: firstLine(c.Reasons), Text: strings.Join(c.Reasons, "\n")}
			if c.Status == Failed {
				jc.Failure = reason
				rep.Failures++
			} else {
				jc.Error = reason
				rep.Errors++
			}
		}
		rep.Cells = append(rep.Cells, jc)
	}
	out, err := xml.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

// cellFacts are the cell's expectation, its detection and its runs, as plain lines.
func cellFacts(c CellResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", c.Cell.Why)
	for _, ch := range c.Checks {
		if ch.Expect != ExpectEither {
			fmt.Fprintf(&b, "%s: expected %s, observed %s\n", ch.Checker, ch.Expect, observed(ch))
		}
	}
	if rate, ok := c.DetectionRate(); ok {
		fmt.Fprintf(&b, "detection: %d of %d seeds (%s)", *c.Found, len(c.Runs), percent(rate))
		if c.MedianToViolation != nil {
			fmt.Fprintf(&b, ", first violation after %s median, %s worst", c.MedianToViolation.Std().Round(time.Millisecond), c.WorstToViolation.Std().Round(time.Millisecond))
		}
		b.WriteString("\n")
	}
	for _, line := range hazardLines(c) {
		fmt.Fprintf(&b, "%s\n", line.Text)
	}
	for _, run := range c.Runs {
		fmt.Fprintf(&b, "seed %d: %s %s\n", run.Seed, run.Verdict, run.Report)
	}
	return b.String()
}

// hazardLine is one hazard's count over a cell's runs, in words; Short says some run had
// fewer than the cell requires.
type hazardLine struct {
	Text  string
	Short bool
}

// hazardLines are the cell's hazard counts: "grant-lost: 9 lost grants in all, 2 in the
// fewest run; the cell requires 3 per run, 1 run short".
func hazardLines(c CellResult) []hazardLine {
	var lines []hazardLine
	for _, t := range c.Hazards {
		text := fmt.Sprintf("%s: %s in all, %d in the fewest run", t.Hazard, t.Hazard.Count(t.Total), t.MinPerRun)
		if t.Required > 0 {
			text += fmt.Sprintf("; the cell requires %d per run, %s short", t.Required, nRuns(t.Short))
		}
		lines = append(lines, hazardLine{Text: text, Short: t.Short > 0})
	}
	return lines
}

// nRuns is "no run", "1 run" or "3 runs".
func nRuns(n int) string {
	switch n {
	case 0:
		return "no run"
	case 1:
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// observed writes a check's verdict counts in verdict order: "invalid 4, valid 1".
func observed(ch Check) string {
	var parts []string
	for _, v := range verdictOrder {
		if n := ch.Observed[v]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", orNone(v), n))
		}
	}
	return strings.Join(parts, ", ")
}

// foundText is a cell's detection as "4/5 (80 %)", "" for a cell that expects no violation.
func foundText(c CellResult) string {
	rate, ok := c.DetectionRate()
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d/%d (%s)", *c.Found, len(c.Runs), percent(rate))
}

// medianText is a cell's median time to its first violation, "" when no run found one.
func medianText(c CellResult) string {
	if c.MedianToViolation == nil {
		return ""
	}
	return c.MedianToViolation.Std().Round(time.Millisecond).String()
}

func firstLine(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", max(d, 0).Seconds()) }
