package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/clientnet"
	"github.com/lockbreaker/lockbreaker/harness"
	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/shellwords"
	"github.com/lockbreaker/lockbreaker/nemesis"
	"github.com/lockbreaker/lockbreaker/suite"
	"github.com/lockbreaker/lockbreaker/system"
	"github.com/lockbreaker/lockbreaker/workloads"
)

// The README and the pages under docs/ show commands to copy; these tests hold every one
// to the code, so none goes stale: each `lockbreaker ...` or `bin/lockbreaker ...` line of
// a code block is parsed by the command's own Parse (its flags, their values, its
// operands), a run's spec is validated as a run validates it, a suite named is loaded, a
// repository path named exists, and each `make ...` names targets the Makefile has. The
// links between the pages lead to files, and to headings, that exist. No Docker.

// docPages are the pages the tests read, relative to the repository root.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pages {
		pages[i], _ = filepath.Rel(root, p)
	}
	return append([]string{"README.md", "ARCHITECTURE.md"}, pages...)
}

// repoRoot is the repository's root: the test runs in cli/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no repository root at %s: %v", root, err)
	}
	return root
}

// docLine is one line of a page, with where it stands.
type docLine struct {
	page string
	n    int
	text string
}

func (l docLine) String() string { return fmt.Sprintf("%s:%d: %s", l.page, l.n, l.text) }

// markdown splits a page into the lines of its code blocks (fenced, or indented by four
// spaces after a blank line) and the lines of its prose.
func markdown(t *testing.T, root, page string) (code, prose []docLine) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var fence string
	indented, blank := false, true
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		line := docLine{page, n, text}
		trimmed := strings.TrimSpace(text)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			} else {
				code = append(code, line)
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			fence, indented = trimmed[:3], false
		case (blank || indented) && (strings.HasPrefix(text, "    ") || strings.HasPrefix(text, "\t")):
			indented = true
			code = append(code, line)
		default:
			indented = indented && trimmed == ""
			prose = append(prose, line)
		}
		blank = trimmed == ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return code, prose
}

// commandLines are the commands a code line holds: its words without a trailing comment,
// split at &&, || and ;, each without the variable assignments before it, nor the sudo or
// env that runs it (with their options). A line that is no shell command (output, YAML)
// gives words the caller does not look at.
func commandLines(text string) ([][]string, error) {
	text = strings.TrimPrefix(strings.TrimSpace(text), "$ ")
	words, err := shellwords.Split(withoutComment(text))
	if err != nil {
		return nil, err
	}
	var cmds [][]string
	var cmd []string
	wrapped := false // after a sudo or env, before the command it runs
	for _, w := range append(words, ";") {
		switch {
		case w == "&&" || w == "||" || w == ";" || w == "|":
			if len(cmd) > 0 {
				cmds = append(cmds, cmd)
			}
			cmd, wrapped = nil, false
		case len(cmd) == 0 && (w == "sudo" || w == "env"):
			wrapped = true
		case len(cmd) == 0 && (assignment.MatchString(w) || wrapped && strings.HasPrefix(w, "-")):
		default:
			cmd = append(cmd, w)
		}
	}
	return cmds, nil
}

// withoutComment cuts a shell comment off a line: a # that starts a word, outside quotes.
func withoutComment(s string) string {
	var quote byte
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// assignment is a shell variable's assignment before a command: NAME=value.
var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// isLockbreaker says whether a command's first word is our binary.
func isLockbreaker(word string) bool {
	return word == "lockbreaker" || word == "bin/lockbreaker" || word == "./lockbreaker"
}

func TestDocsCommandsParse(t *testing.T) {
	root := repoRoot(t)
	t.Chdir(root) // the commands are shown run from the root: their paths are from there
	var lockbreakers, makes int
	for _, page := range docPages(t, root) {
		code, _ := markdown(t, root, page)
		for _, line := range code {
			cmds, err := commandLines(line.text)
			if err != nil {
				if strings.Contains(line.text, "lockbreaker") || strings.HasPrefix(strings.TrimSpace(line.text), "make") {
					t.Errorf("%s: %v", line, err)
				}
				continue
			}
			for _, cmd := range cmds {
				switch {
				case isLockbreaker(cmd[0]):
					lockbreakers++
					if err := checkCommand(root, cmd[1:]); err != nil {
						t.Errorf("%s\n\t%v", line, err)
					}
				case cmd[0] == "make":
					makes++
					if err := checkMake(root, cmd[1:]); err != nil {
						t.Errorf("%s\n\t%v", line, err)
					}
				}
			}
		}
	}
	t.Logf("checked %d lockbreaker and %d make commands", lockbreakers, makes)
	// A parser that found nothing would pass everything.
	if lockbreakers < 40 || makes < 5 {
		t.Errorf("found %d lockbreaker and %d make commands in the docs' code blocks; expected many more", lockbreakers, makes)
	}
}

// checkCommand checks a lockbreaker command line (without the binary's name) as far as it
// can without running it.
func checkCommand(root string, args []string) error {
	if len(args) == 0 {
		return errors.New("no command given")
	}
	if err := checkPaths(root, args); err != nil {
		return err
	}
	if name := args[0]; name == "help" || name == "-h" || name == "--help" {
		return cmdHelp(args[1:], io.Discard)
	}
	cmd, ok := lookup(args[0])
	if !ok {
		return fmt.Errorf("unknown command %s", args[0])
	}
	if err := cmd.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch {
	case cmd.Name == "run":
		spec, _, err := parseRun(args[1:])
		if err != nil {
			return err
		}
		_, err = harness.CheckSpec(spec)
		return hostPermitting(err, spec.ClientCmd)
	case cmd.Name == "suite" && len(args) > 1 && args[1] != "merge" && args[1] != "compare":
		name, _, _, err := parseSuite(args[1:])
		if err != nil {
			return err
		}
		if _, builtin, _ := suite.Builtin(name, harness.CheckedSpec); !builtin {
			if _, err := os.Stat(name); err != nil {
				return nil // a file of the reader's (mine.yaml), not one of ours
			}
		}
		_, err = loadSuite(name)
		return hostPermitting(err, nil)
	}
	return nil
}

// hostPermitting is err unless it is about this host rather than the command: lock
// clients on addresses of their own need root and ip, nsenter and iptables; a program of
// the reader's (python3 mylock.py) need not be installed here; and a binary a system file
// copies in is built by make (examples/own-service's lease/bin/leased), maybe not yet; nor
// is the machines file machines up writes into the store.
func hostPermitting(err error, clientCmd []string) error {
	if err == nil {
		return nil
	}
	if strings.Contains(err.Error(), "--nodes-file: open store/") {
		return nil
	}
	if unbuilt.MatchString(err.Error()) {
		return nil
	}
	if host := clientnet.Supported(); host != nil && strings.Contains(err.Error(), host.Error()) {
		return nil
	}
	if len(clientCmd) > 0 && !strings.Contains(clientCmd[0], "/") && strings.Contains(err.Error(), "--client-cmd: ") {
		return nil
	}
	return err
}

// unbuilt is a system file's refusal of a file to copy that is not there.
var unbuilt = regexp.MustCompile(`: copy: "[^"]+": no such file or directory`)

// repoPath matches a word that names a path in the repository: a top-level directory of
// it, then more. Words with placeholders (<test>, {{id}}, *) are not paths.
var repoPath = regexp.MustCompile(`^\.?[A-Za-z0-9_-]+/[^ <>{}*]*$`)

// checkPaths checks that every word of args (and of a flag's value, and of a quoted
// program) that names a repository path exists.
func checkPaths(root string, args []string) error {
	for _, arg := range args {
		if _, value, ok := strings.Cut(arg, "="); ok && strings.HasPrefix(arg, "-") {
			arg = value
		}
		for _, word := range strings.Fields(arg) {
			if !namesRepoPath(root, word) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, word)); err != nil {
				return fmt.Errorf("%s is not in the repository", word)
			}
		}
	}
	return nil
}

// namesRepoPath says whether word is a path under one of the repository's top-level
// directories (not the run store, nor the binaries and release archives make builds).
func namesRepoPath(root, word string) bool {
	if !repoPath.MatchString(word) {
		return false
	}
	top, _, _ := strings.Cut(word, "/")
	if top == "store" || top == "bin" || top == "dist" || top == ".git" {
		return false
	}
	info, err := os.Stat(filepath.Join(root, top))
	return err == nil && info.IsDir()
}

// checkMake checks that a make command's targets are the Makefile's (with -C, that
// directory's).
func checkMake(root string, args []string) error {
	dir := root
	var targets []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-C" && i+1 < len(args):
			dir = filepath.Join(root, args[i+1])
			i++
		case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
		default:
			targets = append(targets, a)
		}
	}
	have, err := makeTargets(filepath.Join(dir, "Makefile"))
	if err != nil {
		return err
	}
	for _, target := range targets {
		if !slices.Contains(have, target) {
			return fmt.Errorf("make: %s has no target %s (it has %s)", filepath.Join(dir, "Makefile"), target, strings.Join(have, ", "))
		}
	}
	return nil
}

var makeRule = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?: +[A-Za-z0-9_.-]+)*) *:([^=]|$)`)

// makeTargets are the targets a Makefile's rules name.
func makeTargets(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, line := range strings.Split(string(data), "\n") {
		if m := makeRule.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], ".") {
			targets = append(targets, strings.Fields(m[1])...)
		}
	}
	return targets, nil
}

func TestDocsParseOnlyCommands(t *testing.T) {
	for _, c := range commands {
		if c.Parse == nil {
			t.Errorf("command %s has no Parse: its command lines in the docs cannot be checked", c.Name)
		}
	}
	root := repoRoot(t)
	t.Chdir(root)
	// The checks find what they are for.
	for _, bad := range [][]string{
		{"run", "--sytem", "redis"},
		{"run", "--nemesis", "pause-holdr"},
		{"run", "--fencing", "maybe"},
		{"run", "--system", "redlock", "--fencing", "on"},
		{"run", "--system-file", "examples/own-service/no-such.yaml"},
		{"suite", "suites/no-such.yaml"},
		{"suite", "smoke", "--seeds", "0"},
		{"suite", "compare", "one"},
		{"check"},
		{"check", "--whole", "--max-ops", "5", "store/latest"},
		{"shrink", "--confirm", "0", "store/latest"},
		{"clean", "--all", "--run", "x"},
		{"images", "--system", "mysql"},
		{"help", "nosuch"},
		{"nosuch"},
	} {
		if err := checkCommand(root, bad); err == nil {
			t.Errorf("lockbreaker %s passed the docs' check", strings.Join(bad, " "))
		}
	}
	if err := checkMake(root, []string{"nosuch"}); err == nil {
		t.Error("make nosuch passed the docs' check")
	}
	for _, good := range [][]string{{"run", "-h"}, {"help", "run"}, {"suite", "--list", "kleppmann"}} {
		if err := checkCommand(root, good); err != nil {
			t.Errorf("lockbreaker %s: %v", strings.Join(good, " "), err)
		}
	}
}

func TestDocsCommandLinesSplit(t *testing.T) {
	for _, c := range []struct {
		line string
		want [][]string
	}{
		{"bin/lockbreaker run --nemesis none   # a comment", [][]string{{"bin/lockbreaker", "run", "--nemesis", "none"}}},
		{"$ lockbreaker run --client-cmd 'python3 my#lock.py'", [][]string{{"lockbreaker", "run", "--client-cmd", "python3 my#lock.py"}}},
		{"make build && make -C examples/own-service images", [][]string{{"make", "build"}, {"make", "-C", "examples/own-service", "images"}}},
		{"LOCKBREAKER_APT_MIRROR=http://m/debian lockbreaker images", [][]string{{"lockbreaker", "images"}}},
		{`sudo env "PATH=$PATH" lockbreaker images --system redis | tee out`, [][]string{{"lockbreaker", "images", "--system", "redis"}, {"tee", "out"}}},
		{"sudo -E make deps-run", [][]string{{"make", "deps-run"}}},
		{"# only a comment", nil},
	} {
		got, err := commandLines(c.line)
		if err != nil || !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("commandLines(%q) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
}

// link is a Markdown link's target in prose: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineCode is a code span of prose.
var inlineCode = regexp.MustCompile("`[^`]*`")

func TestDocsLinksLead(t *testing.T) {
	root := repoRoot(t)
	anchors := map[string][]string{}
	anchorsOf := func(page string) []string {
		if a, ok := anchors[page]; ok {
			return a
		}
		_, prose := markdown(t, root, page)
		for _, l := range prose {
			if strings.HasPrefix(l.text, "#") {
				anchors[page] = append(anchors[page], slug(strings.TrimLeft(l.text, "# ")))
			}
		}
		return anchors[page]
	}
	links := 0
	for _, page := range docPages(t, root) {
		_, prose := markdown(t, root, page)
		for _, line := range prose {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				to := page
				if file != "" {
					to = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(filepath.Join(root, to)); err != nil {
						t.Errorf("%s\n\tlinks to %s, which does not exist", line, to)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(to, ".md") && !slices.Contains(anchorsOf(to), anchor) {
					t.Errorf("%s\n\tlinks to #%s, which is no heading of %s (%s)", line, anchor, to, strings.Join(anchorsOf(to), ", "))
				}
			}
		}
	}
	if links < 30 {
		t.Errorf("found %d links in the docs; expected many more", links)
	}
}

// slug is a heading's anchor as GitHub makes it: lower case, spaces as hyphens, and
// nothing else but letters, digits, hyphens and underscores. (Two headings alike would
// take -1, -2...; the pages have none.)
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocsNameFilesThatExist(t *testing.T) {
	root := repoRoot(t)
	for _, page := range docPages(t, root) {
		_, prose := markdown(t, root, page)
		for _, line := range prose {
			for _, span := range inlineCode.FindAllString(line.text, -1) {
				word := strings.Trim(span, "`")
				if namesRepoPath(root, word) {
					if _, err := os.Stat(filepath.Join(root, word)); err != nil {
						t.Errorf("%s\n\tnames %s, which is not in the repository", line, word)
					}
				}
			}
		}
	}
}

// longSentence is the length, in words, from which a sentence of the docs' prose fails.
// Issue 59 asks for sentences under 30 words where they can be; 40 leaves room for the
// few that cannot be.
const longSentence = 40

// The docs read in short sentences: none of their prose runs to longSentence words or
// more.
func TestDocsSentencesAreShort(t *testing.T) {
	root := repoRoot(t)
	counted := 0
	for _, page := range docPages(t, root) {
		_, prose := markdown(t, root, page)
		for _, unit := range proseUnits(prose) {
			for _, s := range sentencesOf(unit) {
				counted++
				if s.words >= longSentence {
					first := strings.Fields(s.text)
					t.Errorf("%s:%d: a sentence of %d words (split it at a joint): %s ...",
						page, s.line, s.words, strings.Join(first[:min(8, len(first))], " "))
				}
			}
		}
	}
	// A splitter that found no sentence would pass everything.
	if counted < 1000 {
		t.Errorf("found %d sentences in the docs' prose; expected many more", counted)
	}
}

// listItem is the marker that starts an item of a list: -, * or +, or a number and a dot.
var listItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+\.)\s+`)

// quoteMarker is the marker of a block quote's line.
var quoteMarker = regexp.MustCompile(`^\s*(?:>\s?)+`)

// heading is a Markdown heading's line.
var heading = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s|$)`)

// proseUnits cuts a page's prose into the units whose sentences are counted: its
// paragraphs, each list item its own, without headings and tables. A unit ends at a blank
// line, at a code block, at a heading or table, and where a list item or a block quote
// starts or a block quote ends. List and quote markers are no words: they are cut off the
// lines.
func proseUnits(prose []docLine) [][]docLine {
	var units [][]docLine
	var unit []docLine
	wasQuoted := false
	for i, line := range prose {
		quoted := quoteMarker.MatchString(line.text)
		text := quoteMarker.ReplaceAllString(line.text, "")
		trimmed := strings.TrimSpace(text)
		item := listItem.FindString(text)
		skip := trimmed == "" || heading.MatchString(line.text) || strings.HasPrefix(trimmed, "|")
		if skip || item != "" || quoted != wasQuoted || i > 0 && prose[i-1].n != line.n-1 {
			if len(unit) > 0 {
				units = append(units, unit)
			}
			unit = nil
		}
		wasQuoted = quoted
		if !skip {
			line.text = strings.TrimPrefix(text, item)
			unit = append(unit, line)
		}
	}
	if len(unit) > 0 {
		units = append(units, unit)
	}
	return units
}

// sentence is one sentence of a unit of prose: where it starts, its text and its words.
type sentence struct {
	line  int
	text  string
	words int
}

// quotation is a passage in double quotes: the program's words (a story, a message) or a
// reader's, quoted whole, not the page's to split.
var quotation = regexp.MustCompile(`"[^"]*"`)

// abbreviations end in a dot that ends no sentence.
var abbreviations = []string{"e.g.", "i.e.", "etc.", "vs.", "cf."}

// sentencesOf splits a unit of prose into its sentences. A sentence ends at . ! or ?
// followed by a space and a word (a letter, a digit, a code span, a link, emphasis, a
// parenthesis or a quotation), unless the dot is an abbreviation's. A code span and a
// quotation are one word each; a link's target is none.
func sentencesOf(unit []docLine) []sentence {
	var joined strings.Builder
	starts := make([]int, len(unit)) // where each line starts in joined
	for i, line := range unit {
		if i > 0 {
			joined.WriteByte('\n')
		}
		starts[i] = joined.Len()
		joined.WriteString(line.text)
	}
	text := joined.String()
	// masked is text with every link's target glued to its text, and the inside of every
	// code span and quotation made one word that ends no sentence: its offsets are text's.
	masked := []byte(link.ReplaceAllStringFunc(text, func(l string) string {
		return "]" + strings.Repeat("_", len(l)-1) // the target, glued to the link's text
	}))
	for _, re := range []*regexp.Regexp{inlineCode, quotation} {
		for _, span := range re.FindAllIndex(masked, -1) {
			for i := span[0] + 1; i < span[1]-1; i++ {
				masked[i] = '_'
			}
		}
	}
	var sentences []sentence
	cut := func(from, to int) {
		if words := len(strings.Fields(string(masked[from:to]))); words > 0 {
			n, _ := slices.BinarySearch(starts, from+1)
			sentences = append(sentences, sentence{unit[n-1].n, strings.TrimSpace(text[from:to]), words})
		}
	}
	from := 0
	for i := 0; i+1 < len(masked); i++ {
		if !strings.ContainsRune(".!?", rune(masked[i])) || !unicode.IsSpace(rune(masked[i+1])) {
			continue
		}
		next := i + 1
		for next < len(masked) && unicode.IsSpace(rune(masked[next])) {
			next++
		}
		if next == len(masked) || !startsSentence(string(masked[next:])) {
			continue
		}
		words := strings.Fields(string(masked[from : i+1]))
		if slices.Contains(abbreviations, strings.ToLower(strings.TrimLeft(words[len(words)-1], `(["*_`))) {
			continue
		}
		cut(from, i+1)
		from = next
	}
	cut(from, len(masked))
	return sentences
}

// startsSentence says whether text starts with what may start a sentence.
func startsSentence(text string) bool {
	r, _ := utf8.DecodeRuneInString(text)
	return unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("*_([`\"", r)
}

func TestDocsSentencesSplit(t *testing.T) {
	lines := func(texts ...string) []docLine {
		var l []docLine
		for i, text := range texts {
			l = append(l, docLine{"page.md", i + 1, text})
		}
		return l
	}
	for _, c := range []struct {
		lines []string
		want  []sentence // without their text
	}{
		{[]string{"One word. Then three more."}, []sentence{{line: 1, words: 2}, {line: 1, words: 3}}},
		{[]string{"Kept whole, e.g. this, i.e. that, etc. and", "(vs. more) cf. there!"}, []sentence{{line: 1, words: 12}}},
		{[]string{"Curator 5.4.0 is affected.", "5.7.0 is not? Nor 5.8."}, []sentence{{line: 1, words: 4}, {line: 2, words: 3}, {line: 2, words: 2}}},
		{[]string{"Run `a b. C d", "e f` now. `x` too."}, []sentence{{line: 1, words: 3}, {line: 2, words: 2}}},
		{[]string{`Read [the page](x.md#"y) now. Then "go".`}, []sentence{{line: 1, words: 4}, {line: 1, words: 2}}},
		{[]string{`It says: "a long. Quoted thing". Next one.`}, []sentence{{line: 1, words: 3}, {line: 1, words: 2}}},
		{[]string{"a lower case start. and no end"}, []sentence{{line: 1, words: 4}, {line: 1, words: 3}}},
		{[]string{"Ends at 2 s.Not here, nor at 1.5 s", "or ellipsis... But here."}, []sentence{{line: 1, words: 11}, {line: 2, words: 2}}},
	} {
		got := sentencesOf(lines(c.lines...))
		for i := range got {
			got[i].text = ""
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("sentencesOf(%q) = %+v; want %+v", c.lines, got, c.want)
		}
	}
	prose := lines(
		"# A heading. Not prose.",
		"A paragraph",
		"over two lines.",
		"",
		"- an item,",
		"  wrapped;",
		"  - a nested item;",
		"1. a numbered item.",
		"> a quote",
		"| a | table |",
		"after the table.",
	)
	prose = append(prose, docLine{"page.md", 13, "after a code block."})
	var got strings.Builder // each unit in brackets, each line with its number
	for _, unit := range proseUnits(prose) {
		got.WriteString("[")
		for i, l := range unit {
			if i > 0 {
				got.WriteString(" ")
			}
			fmt.Fprintf(&got, "%d:%s", l.n, l.text)
		}
		got.WriteString("]")
	}
	want := "[2:A paragraph 3:over two lines.][5:an item, 6:  wrapped;][7:a nested item;]" +
		"[8:a numbered item.][9:a quote][11:after the table.][13:after a code block.]"
	if got.String() != want {
		t.Errorf("proseUnits cut\n\t%s\nwant\n\t%s", got.String(), want)
	}
}

// The reference pages list what the code declares, each where a reader looks for it: every
// fault kind a user can choose has its entry in docs/faults.md, every hazard its row in
// faults.md's table and its name in docs/suites.md's list of what a cell may require, every
// checker its row in docs/runs.md, every built-in system its row in docs/systems.md, every
// fault its name in docs/machines.md, where each is said to run on machines. A name added in the code
// without its line in the docs fails here.
func TestDocsListEveryName(t *testing.T) {
	root := repoRoot(t)
	read := func(page string) string {
		b, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	faults, suites, runs, systems := read("docs/faults.md"), read("docs/suites.md"), read("docs/runs.md"), read("docs/systems.md")
	onMachines := read("docs/machines.md")
	for _, name := range nemesis.Names() {
		if !strings.Contains(onMachines, "`"+name+"`") {
			t.Errorf("docs/machines.md does not name %s among the faults that run on machines", name)
		}
	}
	for _, k := range history.FaultKinds() {
		if !k.Part && !strings.Contains(faults, "**`"+k.Name+"`**") {
			t.Errorf("docs/faults.md has no entry **`%s`** for fault kind %s", k.Name, k.Name)
		}
	}
	for _, h := range history.KnownHazards() {
		if !strings.Contains(faults, "`"+string(h)+"`") {
			t.Errorf("docs/faults.md does not name hazard %s", h)
		}
		if !strings.Contains(suites, "`"+string(h)+"`") {
			t.Errorf("docs/suites.md does not list hazard %s among those a cell may require", h)
		}
	}
	for _, c := range checkers.All() {
		if !strings.Contains(runs, "\n| "+string(c.Name())+" |") {
			t.Errorf("docs/runs.md's checkers table has no row for %s", c.Name())
		}
	}
	for _, name := range system.Names() {
		if !system.BuiltIn(name) {
			continue
		}
		_, row, ok := strings.Cut(systems, "\n| `"+name+"` ")
		row, _, _ = strings.Cut(row, "\n")
		sys, _ := system.Lookup(name)
		size := strconv.Itoa(sys.Sizes.Default)
		if sys.Sizes.Default == 1 {
			size = "one"
		}
		switch {
		case !ok:
			t.Errorf("docs/systems.md's table has no row for system %s", name)
		case !regexp.MustCompile(`\b` + size + `\b`).MatchString(row):
			t.Errorf("docs/systems.md's row for system %s does not give its usual size, %s", name, size)
		}
	}
}

// ARCHITECTURE.md names every package of the module (the root as `lockbreaker`), each in
// code quotes, so that a package added without its line fails here.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	arch, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "examples" || name == "third_party" ||
			name == "testdata" || name == "store" || name == "bin") {
			return filepath.SkipDir
		}
		sources, _ := filepath.Glob(filepath.Join(path, "*.go"))
		if !slices.ContainsFunc(sources, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }) {
			return nil
		}
		if rel == "." {
			rel = "lockbreaker"
		}
		if !strings.Contains(string(arch), "`"+filepath.ToSlash(rel)+"`") {
			t.Errorf("ARCHITECTURE.md does not name package %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The tutorial shows the whole Go interface a lock implements and is given: every field of
// Grant and Config, and every method of Lock and Extender, so none added goes unshown.
func TestTutorialShowsTheWholeGoInterface(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "```go\n")
	block, _, _ = strings.Cut(block, "```")
	var names []string
	for _, typ := range []reflect.Type{reflect.TypeFor[workloads.Grant](), reflect.TypeFor[workloads.Config]()} {
		for f := range typ.Fields() {
			names = append(names, "\t"+f.Name+" ")
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[workloads.Lock](), reflect.TypeFor[workloads.Extender]()} {
		for m := range typ.Methods() {
			names = append(names, "\t"+m.Name+"(")
		}
	}
	for _, name := range names {
		if !strings.Contains(block, name) {
			t.Errorf("docs/tutorial.md's Go block does not show %q", strings.TrimSpace(name))
		}
	}
}

// contentsAfter is how long a page may run before it needs a table of contents, in lines.
const contentsAfter = 200

// A long page opens with its contents: a **Contents** list that links each of its `## `
// sections, in order (the README, the front page, is exempt: its first screen says how to
// get lockbreaker).
func TestLongDocsHaveContents(t *testing.T) {
	root := repoRoot(t)
	for _, page := range docPages(t, root) {
		code, prose := markdown(t, root, page)
		if page == "README.md" || len(code)+len(prose) <= contentsAfter {
			continue
		}
		var sections, listed []string
		inContents := false
		for _, l := range prose {
			switch {
			case strings.HasPrefix(l.text, "## "):
				sections = append(sections, slug(strings.TrimPrefix(l.text, "## ")))
				inContents = false
			case strings.TrimSpace(l.text) == "**Contents**":
				inContents = true
			case inContents:
				for _, m := range link.FindAllStringSubmatch(l.text, -1) {
					if anchor, ok := strings.CutPrefix(m[1], "#"); ok {
						listed = append(listed, anchor)
					}
				}
			}
		}
		if !slices.Equal(listed, sections) {
			t.Errorf("%s runs to %d lines: its **Contents** list links %q, want its sections %q", page, len(code)+len(prose), listed, sections)
		}
	}
}
