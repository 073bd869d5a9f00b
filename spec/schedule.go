package spec

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/history"
	"github.com/lockbreaker/lockbreaker/internal/quote"
)

// Step is one fault of a written schedule (Spec.Schedule): the fault a nemesis of the run
// makes at a moment it is given instead of one its seed draws, on a target and for a
// length it is given too. A hunt writes schedules (package hunt); `lockbreaker run
// --schedule` runs one again.
type Step struct {
	// Fault is the nemesis that makes it, one of the spec's.
	Fault string `json:"fault"`
	// At is when it begins, from the moment the nemesis began; a step due while the fault
	// before it still lasts begins once that one ended.
	At Duration `json:"at"`
	// Target picks the victim among those the fault chooses from (the clients running, the
	// nodes), as an index taken modulo their number, so that it names one in any run.
	Target int `json:"target"`
	// For is how long it lasts, where the fault has a length (--pause's meaning).
	For Duration `json:"for"`
	// When, if set, holds the step back from its moment until a client is in that state,
	// and Target then picks among the clients in it: a fault steered by what the lock's
	// clients do, as a hunt learns to (faults that strike a client only).
	When history.ClientState `json:"when,omitempty"`
	// Until, if set, keeps the fault on past its length until that event (faults that can
	// hold on only).
	Until Until `json:"until,omitempty"`
}

// Until is an event a step's fault lasts until, once its length is over.
type Until string

// Takeover: another client was granted the lock and used the storage, as a pause of a
// client that waited or held the lock lasts until the danger is there.
const Takeover Until = "takeover"

// untilWord is how a step's text writes Until.
const untilWord = "until-"

// maxSteps bounds a schedule: a hunt's trial has a few faults, a run at most one a millisecond.
const maxSteps = 10_000

// String is the step as --schedule writes it: FAULT@AT/TARGET/FOR, e.g. pause-client@1.2s/3/2.5s,
// then /STATE when it has one and /until-EVENT when it has one, e.g.
// pause-client@1.2s/3/2.5s/waiting/until-takeover.
func (st Step) String() string {
	s := fmt.Sprintf("%s@%s/%d/%s", st.Fault, st.At.Std(), st.Target, st.For.Std())
	if st.When != "" {
		s += "/" + string(st.When)
	}
	if st.Until != "" {
		s += "/" + untilWord + string(st.Until)
	}
	return s
}

// ScheduleText is the schedule as --schedule takes it: its steps, comma-separated.
func ScheduleText(steps []Step) string {
	words := make([]string, len(steps))
	for i, st := range steps {
		words[i] = st.String()
	}
	return strings.Join(words, ",")
}

// ParseSchedule reads --schedule: steps FAULT@AT/TARGET/FOR, comma-separated.
func ParseSchedule(text string) ([]Step, error) {
	var steps []Step
	for _, word := range strings.Split(text, ",") {
		st, err := parseStep(word)
		if err != nil {
			return nil, errorf("--schedule: %s: want FAULT@AT/TARGET/FOR[/STATE][/until-takeover], e.g. pause-client@1.2s/3/2.5s", err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

func parseStep(word string) (Step, error) {
	fault, rest, ok := strings.Cut(strings.TrimSpace(word), "@")
	parts := strings.Split(rest, "/")
	if !ok || fault == "" || len(parts) < 3 || len(parts) > 5 {
		return Step{}, fmt.Errorf("step %s", quote.Short(word))
	}
	at, err := time.ParseDuration(parts[0])
	if err != nil {
		return Step{}, fmt.Errorf("step %s: its moment %s", quote.Short(word), quote.Short(parts[0]))
	}
	target, err := strconv.Atoi(parts[1])
	if err != nil {
		return Step{}, fmt.Errorf("step %s: its target %s is no number", quote.Short(word), quote.Short(parts[1]))
	}
	length, err := time.ParseDuration(parts[2])
	if err != nil {
		return Step{}, fmt.Errorf("step %s: its length %s", quote.Short(word), quote.Short(parts[2]))
	}
	st := Step{Fault: fault, At: Duration(at), Target: target, For: Duration(length)}
	for _, part := range parts[3:] {
		if event, ok := strings.CutPrefix(part, untilWord); ok && st.Until == "" {
			if Until(event) != Takeover {
				return Step{}, fmt.Errorf("step %s: it lasts until %s; the event it can last until is %s", quote.Short(word), quote.Short(event), Takeover)
			}
			st.Until = Takeover
			continue
		}
		state, err := history.ParseClientState(part)
		if err != nil || st.When != "" || st.Until != "" {
			return Step{}, fmt.Errorf("step %s: %s is neither a client's state (%v) nor until-%s, in that order", quote.Short(word), quote.Short(part), history.ClientStates, Takeover)
		}
		st.When = state
	}
	return st, nil
}

// checkSchedule refuses a schedule whose steps are out of order or out of the run, or made
// by a nemesis the spec does not run. Whether that nemesis can follow one is the harness's
// question.
func (s Spec) checkSchedule() error {
	if len(s.Schedule) > maxSteps {
		return errorf("--schedule has %d steps, at most %d", len(s.Schedule), maxSteps)
	}
	for i, st := range s.Schedule {
		switch {
		case !slices.Contains(s.Nemesis, st.Fault):
			return errorf("--schedule: step %d is a fault of %s, which --nemesis does not name", i+1, quote.Short(st.Fault))
		case st.At < 0 || st.At > s.TimeLimit:
			return errorf("--schedule: step %d begins at %s, outside the run (0 to --time-limit, %s)", i+1, st.At.Std(), s.TimeLimit.Std())
		case i > 0 && st.At < s.Schedule[i-1].At:
			return errorf("--schedule: step %d begins before the step before it (%s < %s)", i+1, st.At.Std(), s.Schedule[i-1].At.Std())
		case st.Target < 0:
			return errorf("--schedule: step %d has target %d; targets are 0 or more", i+1, st.Target)
		case st.For <= 0 || st.For > s.TimeLimit:
			return errorf("--schedule: step %d lasts %s; a step lasts more than 0 and at most --time-limit (%s)", i+1, st.For.Std(), s.TimeLimit.Std())
		}
	}
	return nil
}
