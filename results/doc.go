// Package results is where a run's outcome lives on disk and how people read it: the
// results directory layout, results.json (the Summary), report.html, junit.xml and the
// store's index.html, which also shows each suite's runs as the suite package judges
// them (its caller passes them in, as Trends).
//
// Layout: a run lives in <root>/<test>/<timestamp>/ (UTC, like 20261130T081530Z, with -2,
// -3... appended when the name is taken). <root>/latest and <root>/<test>/latest are
// relative symlinks to the newest run, so a results tree can be moved or copied whole.
// Inside a run directory the file names are the constants below; node logs go under
// nodes/.
//
// The package is pure: it never touches Docker, workers or a clock of its own (callers
// pass the time), so reports can be rendered again from a saved run at any time. It
// decides nothing either: the writers render the Summary they are given (its verdict,
// counts and notes) and work out no verdict or op count of their own, so results.json, the
// report and junit.xml cannot disagree. Everything a report shows comes from a run and is
// escaped (html/template, encoding/xml); the pages are self-contained (inline CSS, their
// own inline script, which their Content-Security-Policy names by its hash so no other may
// run, nothing loaded from anywhere). The report's timeline and plots draw the history;
// they judge nothing. Verdicts are shown per checker and never collapsed into one bit,
// except for the overall line (Summary.Verdict).
package results
