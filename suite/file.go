package suite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/lockbreaker/lockbreaker/spec"
)

// A suite file, in YAML or JSON (JSON is YAML too). Specs take the keys of spec.json,
// which are run's flags with _ for - (ttl, time_limit, clock_offset...); a cell's spec is
// laid over the file's defaults, which are laid over run's defaults with no nemesis and a
// 10 s time limit. Unknown keys are refused: a typo must not silently test something else.
// client may be a list of lock clients that share the slots on one lock ([kazoo, exec]).
// An exec client's program is client_cmd, a list of words; a word starting with ./ or ../
// is a path from the suite file's directory, as system_file (a system file, package
// sysfile) always is.
//
//	name: mine
//	defaults: {system: redis, ttl: 2s, time_limit: 8s}
//	threshold: 0.9            # optional, for every cell that sets none
//	cells:
//	  - name: redis-paused
//	    spec: {nemesis: [pause-holder]}
//	    expect: {mutual-exclusion: invalid, data-safety: invalid}
//	    hazards: {granted-in-pause: 1}   # optional: the least per run (history.Hazard)
//	    alone: true               # optional: no other run beside this cell's (--parallel)
//	    why: Kleppmann's GC pause
type fileFormat struct {
	Name      string          `json:"name"`
	About     string          `json:"about"`
	Defaults  json.RawMessage `json:"defaults"`
	Threshold float64         `json:"threshold"`
	Cells     []fileCell      `json:"cells"`
}

// fileCell is a Cell whose spec is read over the defaults.
type fileCell struct {
	Cell
	Spec json.RawMessage `json:"spec"`
}

// maxFileSize bounds a suite file: a matrix of thousands of cells is still far smaller.
const maxFileSize = 4 << 20

// Load reads a suite file and checks it (Check) with check.
func Load(path string, check SpecCheck) (Suite, error) {
	info, err := os.Stat(path)
	if err != nil {
		return Suite{}, &Error{Reason: fmt.Sprintf("suite file: %v", err)}
	}
	if info.Size() > maxFileSize {
		return Suite{}, errorf("suite file %s: %d bytes, more than %d", path, info.Size(), maxFileSize)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Suite{}, &Error{Reason: fmt.Sprintf("suite file: %v", err)}
	}
	s, err := parse(data, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	if err != nil {
		return Suite{}, errorf("suite file %s: %v", path, err)
	}
	besideFile(s.Cells, filepath.Dir(path))
	return s, s.Check(check)
}

// besideFile makes each word of an exec client's program that starts with ./ or ../ a path
// from the suite file's directory (dir) rather than from where lockbreaker runs, as
// docker-compose reads ./ in a compose file: a suite kept beside its programs runs from
// anywhere. The path stays relative when dir is, so the runs' specs and commands name the
// program as one would from where the suite was run.
func besideFile(cells []Cell, dir string) {
	for i := range cells {
		cmd := slices.Clone(cells[i].Spec.ClientCmd)
		for j, w := range cmd {
			if strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") {
				cmd[j] = filepath.Join(dir, w)
				if !strings.ContainsRune(cmd[j], filepath.Separator) { // still a path, not a name to look up
					cmd[j] = "./" + cmd[j]
				}
			}
		}
		cells[i].Spec.ClientCmd = cmd
		if f := cells[i].Spec.SystemFile; f != "" && !filepath.IsAbs(f) {
			cells[i].Spec.SystemFile = filepath.Join(dir, f)
		}
	}
}

// parse turns a suite file's text into a suite; name is used when the file gives none.
func parse(data []byte, name string) (Suite, error) {
	// YAML is read into plain values and handed to the JSON decoder, so both syntaxes
	// share one schema, spec.json's.
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Suite{}, fmt.Errorf("not YAML or JSON: %w", err)
	}
	asJSON, err := json.Marshal(doc)
	if err != nil {
		return Suite{}, fmt.Errorf("keys must be words: %w", err)
	}
	var f fileFormat
	if err := strictJSON(asJSON, &f); err != nil {
		return Suite{}, err
	}
	if f.Name == "" {
		f.Name = name
	}
	if len(f.Cells) == 0 {
		return Suite{}, errors.New("no cells")
	}
	defaults := spec.Default()
	defaults.Nemesis, defaults.TimeLimit = nil, spec.Duration(10*time.Second)
	if err := strictJSON(clientList(f.Defaults), &defaults); err != nil {
		return Suite{}, fmt.Errorf("defaults: %w", err)
	}
	s := Suite{Name: f.Name, About: f.About}
	for i, fc := range f.Cells {
		cellSpec := defaults
		// Decoding into a slice appends to its array: each cell gets its own.
		cellSpec.Nemesis, cellSpec.ClientCmd = slices.Clone(defaults.Nemesis), slices.Clone(defaults.ClientCmd)
		if err := strictJSON(clientList(fc.Spec), &cellSpec); err != nil {
			return Suite{}, fmt.Errorf("cell %d (%s): spec: %w", i+1, fc.Name, err)
		}
		c := fc.Cell
		c.Spec = cellSpec
		if c.Threshold == 0 {
			c.Threshold = f.Threshold
		}
		s.Cells = append(s.Cells, c)
	}
	return s, nil
}

// strictJSON decodes data into v, refusing unknown keys; empty data leaves v as it is.
// clientList lets a spec in a suite file name several lock clients as a list
// (client: [kazoo, curator]), which a spec holds as one comma-separated string
// (spec.Spec.ClientNames). Anything else is left for strictJSON to judge.
func clientList(raw json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	var names []string
	if json.Unmarshal(raw, &fields) != nil || json.Unmarshal(fields["client"], &names) != nil {
		return raw
	}
	fields["client"], _ = json.Marshal(strings.Join(names, ","))
	joined, _ := json.Marshal(fields)
	return joined
}

func strictJSON(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 || string(data) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
