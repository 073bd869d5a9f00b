package results

import (
	"encoding/json"
	"strconv"

	"github.com/lockbreaker/lockbreaker/history"
)

// Setup is what the report's header and the index show of a run's spec. The spec is the
// harness's; these are spec.json's own field names, which saved runs keep (the harness's
// tests pin them).
type Setup struct {
	System    string   `json:"system"`
	Client    string   `json:"client"`
	Nemesis   []string `json:"nemesis"`
	Fencing   bool     `json:"fencing"`
	Clients   int      `json:"clients"`
	Seed      int64    `json:"seed"`
	TTL       string   `json:"ttl"`
	TimeLimit string   `json:"time_limit"`
	// SystemFile and SystemFileSHA256 name the file that described the system, when one did.
	SystemFile       string `json:"system_file"`
	SystemFileSHA256 string `json:"system_file_sha256"`
}

// ReadSetup reads a summary's spec; a spec it cannot read gives the zero Setup.
func ReadSetup(spec json.RawMessage) Setup {
	var s Setup
	if json.Unmarshal(spec, &s) != nil {
		return Setup{}
	}
	return s
}

// facts are the setup as the report's header lists it; none for the zero Setup.
func (s Setup) facts() []fact {
	if s.System == "" {
		return nil
	}
	fencing := "off"
	if s.Fencing {
		fencing = "on"
	}
	nemesis := history.NemesisText(s.Nemesis, ", ")
	facts := []fact{{"system", s.System}}
	if s.SystemFile != "" {
		facts = append(facts, fact{"system file", s.SystemFile + " (sha256 " + s.SystemFileSHA256 + ")"})
	}
	return append(facts, []fact{{"client", s.Client}, {"nemesis", nemesis}, {"fencing", fencing},
		{"clients", strconv.Itoa(s.Clients)}, {"seed", strconv.FormatInt(s.Seed, 10)}, {"ttl", s.TTL}, {"time limit", s.TimeLimit}}...)
}
