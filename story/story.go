// Package story tells a run's first violation in a few plain sentences, built from the
// history alone: who was granted the lock and with which token, which faults struck whom
// and when, when the holder's lease ran out, who was granted the lock next, and what the
// storage did with the old holder's write. A person reading a red nightly job reads this
// first; the evidence and the timeline are there for the rest.
//
// Every sentence names the event it tells of, so a report can link it to its place on
// the timeline.
package story

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbreaker/lockbreaker/checkers"
	"github.com/lockbreaker/lockbreaker/history"
)

// maxFaults is how many faults a story names: the ones that struck first.
const maxFaults = 5

// Window is the span of event indexes the story of overlap o reads: from the first of the
// two grants in the file, or the later holder's request when it came first (a fault may
// have struck it while it waited), to the later of the two holds' ends, and a few events
// past it for the outcome of a last write.
//
// The first grant in the file is not always the earlier one: mutual exclusion orders holds
// by their times, the recorder numbers events as they reach it, and two clients' replies
// a fraction of a millisecond apart reach it in either order (issue 35: through PgBouncer,
// two grants in one server session came back that close, and a window opening at the
// earlier one's index lacked the other grant and told nothing).
func Window(o checkers.Overlap) (from, to int) {
	return min(o.Earlier.Granted, o.Later.Granted, o.Later.Asked), max(o.Earlier.Until, o.Later.Until) + windowSlack
}

// windowSlack is how many events past the holds' ends a story reads: a write's completion
// may follow its holder's last event by a few events of other clients.
const windowSlack = 64

// Tell tells overlap o, two clients holding the lock at once, in a history whose first
// event was at start: events must hold those Reads(o) says it reads (the window and the
// hazards about either holder), in the order of their indexes; ttl is the lease the clients
// asked for (0: not known). It returns nil when the events do not hold the overlap's grants.
func Tell(o checkers.Overlap, events []history.Event, ttl time.Duration, start int64) []checkers.Sentence {
	t := teller{events: events, start: start}
	earlier, ok1 := t.event(o.Earlier.Granted)
	later, ok2 := t.event(o.Later.Granted)
	if !ok1 || !ok2 {
		return nil
	}
	pe := proc(o.Earlier.Process)

	// What a fault did to either holder before the first grant, told as its kind tells it
	// (the later holder frozen since before it, the service just back from an outage).
	wrong := t.scenes(earlier, later)

	// The first holder, and what it read.
	text := fmt.Sprintf("%s was granted the lock%s at %s", pe, grantWords(earlier), t.at(earlier))
	if read, ok := t.op(earlier.Index, later.Index, o.Earlier.Process, history.Read); ok && read.Type() == history.OK && read.Value() != nil {
		text += fmt.Sprintf(" and read %d", *read.Value())
	}
	t.say(earlier, text)

	// The faults that struck while it held, before the second grant.
	t.faults(earlier.Index, later.Index, o.Earlier.Process)

	// Its lease.
	if ttl > 0 {
		leaseEnd := earlier.Time + ttl.Nanoseconds()
		if leaseEnd <= later.Time {
			t.say(earlier, fmt.Sprintf("%s's TTL of %s ran out at %s", pe, ttl, t.seconds(leaseEnd)))
		}
	}

	// The second holder, stalled while it waited unless a scene told it, and the hazards
	// that made the overlap possible.
	if wrong == "" {
		t.waited(o.Later)
	}
	wrote := t.granted(o, earlier, later, ttl, wrong)
	t.hazards(earlier, later)

	// The first holder carries on: resumed, healed, and its write.
	t.resumed(later.Index, o.Earlier.Process)
	t.extended(earlier.Index, later.Index, o.Earlier.Until, o.Earlier.Process, proc(o.Later.Process))
	t.lastWrite(o, later, wrote)
	return t.story
}

// granted tells the later holder's grant while the earlier still held the lock, and what
// it wrote, which it returns (nil when it wrote nothing the storage accepted); wrong is
// why the grant was wrong when a fault's scene was about the later holder
// (history.Telling.Granted), told in place of how much of the earlier's lease was left.
func (t *teller) granted(o checkers.Overlap, earlier, later history.Event, ttl time.Duration, wrong string) (wrote *int64) {
	pe, pl := proc(o.Earlier.Process), proc(o.Later.Process)
	text := fmt.Sprintf("%s was granted the lock%s at %s", pl, grantWords(later), t.at(later))
	if wrong != "" {
		text = fmt.Sprintf("%s%s was granted the lock%s at %s while %s still held it, %s",
			pl, t.wentOn(earlier.Index, later), grantWords(later), t.at(later), pe, wrong)
	}
	if t.at(later) == t.at(earlier) { // the same to the hundredth of a second: say which came first
		text += fmt.Sprintf(" (%s after %s)", time.Duration(later.Time-earlier.Time).Round(time.Microsecond), pe)
	}
	if w, ok := t.op(later.Index, o.Later.Until, o.Later.Process, history.Write); ok && w.Type() == history.OK {
		wrote = w.Value()
	}
	switch {
	case wrote != nil && wrong != "":
		text += fmt.Sprintf("; it wrote %d", *wrote)
	case wrote != nil:
		text += fmt.Sprintf(" and wrote %d", *wrote)
	}
	switch left := earlier.Time + ttl.Nanoseconds() - later.Time; {
	case wrong != "": // its sentence says it was granted while the first still held it
	case ttl > 0 && left > 0:
		text += fmt.Sprintf(", %.2f s before %s's TTL ran out", time.Duration(left).Seconds(), pe)
	case ttl == 0:
		text += fmt.Sprintf(", while %s still held it", pe)
	}
	t.say(later, text)
	return wrote
}

// lastWrite tells the earlier holder's write, which it may have sent before the later
// holder's grant and the storage received after it (held in the network, or sent as it
// was paused), and the update lost when the storage accepted the value the later holder
// wrote too (wrote, granted's); or, when it wrote nothing, how long the two held the lock
// at once.
func (t *teller) lastWrite(o checkers.Overlap, later history.Event, wrote *int64) {
	pe, pl := proc(o.Earlier.Process), proc(o.Later.Process)
	w, ok := t.op(o.Earlier.Granted, o.Earlier.Until, o.Earlier.Process, history.Write)
	if ok && w.Complete != nil && w.Complete.Index < later.Index {
		w, ok = t.op(later.Index, o.Earlier.Until, o.Earlier.Process, history.Write)
	}
	if !ok {
		t.say(later, fmt.Sprintf("%s and %s both held the lock for %s", pe, pl, round(o.Length)))
		return
	}
	at := t.at(w.Invoke)
	if w.Invoke.Index < later.Index && w.Complete != nil {
		received := w.Complete.Time
		if w.Complete.EffectFrom != 0 {
			received = w.Complete.EffectFrom
		}
		at += fmt.Sprintf(", sent before %s's grant and received by the storage at %s", pl, t.seconds(received))
	}
	t.say(w.Invoke, writeText(pe, w, at))
	if v := w.Value(); w.Type() == history.OK && v != nil && wrote != nil && *v == *wrote {
		t.say(w.Invoke, fmt.Sprintf("%s and %s both wrote %d: 1 update lost", pe, pl, *v))
	}
}

// teller builds one story over its window of events.
type teller struct {
	events []history.Event
	start  int64
	story  []checkers.Sentence
	// told are the hazard events already told in a sentence of their own.
	told map[int]bool
}

// scenes tells, each in a sentence of its own, the hazards about the two grants whose
// fault's kind sets a scene with them (history.Telling.Scene): of each hazard the first
// whose first target is the holder its kind's scene is about. It returns why the later
// holder's grant was wrong when a scene is about the later holder (Telling.Granted), or "".
func (t *teller) scenes(earlier, later history.Event) (wrong string) {
	set := map[history.Hazard]bool{}
	for _, e := range t.events {
		if !isHazard(e) {
			continue
		}
		k, _ := history.KindOf(e.Fault)
		telling := k.Telling
		if telling == nil || telling.Scene == nil || e.Hazard != k.Hazard || set[e.Hazard] || !about(e, earlier, later) {
			continue
		}
		holder := earlier.Process
		if telling.Later {
			holder = later.Process
		}
		if len(e.Targets) == 0 || e.Targets[0] != history.TargetOfClient(holder) {
			continue
		}
		set[e.Hazard] = true
		if text, ok := telling.Scene(e, proc(holder), t.seconds); ok {
			t.say(e, text)
			t.markTold(e)
		}
		if telling.Later {
			wrong = telling.Granted
		}
	}
	return wrong
}

// wentOn is " went on at 7.10 s and" when a fault that struck the later holder (a freeze
// while it waited) ended after event index from and before its grant, or "".
func (t *teller) wentOn(from int, later history.Event) string {
	for _, e := range t.events {
		if e.Index > from && e.Index < later.Index && e.Process == history.NemesisProcess && e.Func == history.Stop &&
			strikes(e, later.Process) && back(e.Fault) != "" {
			return fmt.Sprintf(" %s at %s and", back(e.Fault), t.at(e))
		}
	}
	return ""
}

// markTold notes that hazard e was told in a sentence of its own.
func (t *teller) markTold(e history.Event) {
	if t.told == nil {
		t.told = map[int]bool{}
	}
	t.told[e.Index] = true
}

// say adds a sentence about event e.
func (t *teller) say(e history.Event, text string) {
	t.story = append(t.story, checkers.Sentence{Text: text + ".", Event: e.Index})
}

// event is the event of index i in the window.
func (t *teller) event(i int) (history.Event, bool) {
	j, ok := slices.BinarySearchFunc(t.events, i, func(e history.Event, i int) int { return e.Index - i })
	if !ok {
		return history.Event{}, false
	}
	return t.events[j], true
}

// op is process p's first operation f invoked after event index from and at or before
// index to, within the hold the story is about; its Complete is nil when it never
// completed.
func (t *teller) op(from, to, p int, f history.Func) (history.Op, bool) {
	for i, e := range t.events {
		if e.Index > to {
			break
		}
		if e.Index <= from || e.Process != p || e.Func != f || e.Type != history.Invoke {
			continue
		}
		o := history.Op{Invoke: e}
		for _, c := range t.events[i+1:] {
			if c.Process == p && c.Type != history.Invoke {
				o.Complete = &c
				break
			}
		}
		return o, true
	}
	return history.Op{}, false
}

// faults tells the first faults that started between event indexes from and to and
// struck process p or any node, and those of them that came back meanwhile (a killed node
// serving again), each in its kind's words (history.FaultKind).
func (t *teller) faults(from, to, p int) {
	told := 0
	for _, e := range t.events {
		if e.Index <= from || e.Index >= to || e.Process != history.NemesisProcess {
			continue
		}
		targets := targetsOf(e, p)
		switch {
		case targets == "":
		case e.Func == history.Start && told < maxFaults:
			t.say(e, fmt.Sprintf("%s %s (%s) at %s%s", targets, struck(e.Fault), e.Fault, t.at(e), startTold(e)))
			told++
		case e.Func == history.Stop && back(e.Fault) != "":
			t.say(e, fmt.Sprintf("%s %s at %s", targets, back(e.Fault), t.at(e)))
		}
	}
}

// Reads says whether the story of overlap o reads event e: every event in Window(o), and
// the hazards recorded about either holder wherever they are in the history (a watcher may
// record one long after the grant it is about).
func Reads(o checkers.Overlap, e history.Event) bool {
	if from, to := Window(o); e.Index >= from && e.Index <= to {
		return true
	}
	return isHazard(e) && (strikes(e, o.Earlier.Process) || strikes(e, o.Later.Process))
}

// hazards tells the hazards the run recorded about the two grants, each kind once, in the
// hazard's own terms: what made the overlap possible, as the nemesis (or the pooler's
// watcher) saw it happen; a fault's condition (crash-under-grant) is left out when its
// danger (restart-served) is told. A hazard is about them when every grant its detail names
// ("worker-2 #41 token 7", "#41") is one of the two, or, naming none, when it names both
// holders and came between the grants. When the two grants name one server session and no
// pooled-session hazard was recorded about them, the session is told all the same, naming
// the pooler another such hazard named.
func (t *teller) hazards(earlier, later history.Event) {
	var found []history.Event
	recorded := map[history.Hazard]bool{} // each kind once, and none told in a sentence of its own
	for _, e := range t.events {
		if t.told[e.Index] {
			recorded[e.Hazard] = true
		}
	}
	for _, e := range t.events {
		if isHazard(e) && !recorded[e.Hazard] && about(e, earlier, later) {
			found = append(found, e)
			recorded[e.Hazard] = true
		}
	}
	// In the order they happened: a hazard may be recorded after one that came later (a
	// lease that ran out in a pause is seen once the next grant shows it).
	slices.SortStableFunc(found, func(a, b history.Event) int { return cmp.Compare(a.Time, b.Time) })
	told := map[history.Hazard]bool{}
	for _, e := range found {
		if slices.ContainsFunc(found, func(d history.Event) bool { return d.Hazard.Condition() == e.Hazard }) {
			continue // its danger, told below or above, says more
		}
		told[e.Hazard] = true
		if e.Hazard == history.PooledSession {
			t.pooled(e, earlier, later)
			continue
		}
		by := "the run"
		if e.Fault != "" {
			by = e.Fault
		}
		text := fmt.Sprintf("%s recorded its hazard at %s: %s (%s)", by, t.at(e), article(e.Hazard.One()), e.Hazard)
		if names := targetNames(e.Targets); names != "" {
			text += ", involving " + names
		}
		t.say(e, text)
	}
	if backend := earlier.Detail[history.BackendDetail]; !told[history.PooledSession] && backend != "" &&
		later.Detail[history.BackendDetail] == backend {
		t.pooled(history.Event{Index: later.Index, Fault: t.poolerName(), Detail: map[string]string{history.BackendDetail: backend}},
			earlier, later)
	}
}

// poolerName is the pooler named by a pooled-session hazard the run recorded about other
// grants (its watcher sees them as they come, not every pair), or "".
func (t *teller) poolerName() string {
	for _, e := range t.events {
		if isHazard(e) && e.Hazard == history.PooledSession && e.Fault != "" {
			return e.Fault
		}
	}
	return ""
}

// about says whether hazard event e is about the grants earlier and later.
func about(e, earlier, later history.Event) bool {
	grants := grantsNamed(e.Detail)
	for _, g := range grants {
		if g != earlier.Index && g != later.Index {
			return false
		}
	}
	if len(grants) > 0 {
		return true
	}
	return strikes(e, earlier.Process) && strikes(e, later.Process) && e.Time >= earlier.Time && e.Time <= later.Time
}

// grantsNamed are the event indexes of the grants a hazard's detail names: "#41" in a
// value ("worker-2 #41 token 7").
func grantsNamed(detail map[string]string) []int {
	var grants []int
	for _, key := range slices.Sorted(maps.Keys(detail)) {
		for _, word := range strings.Fields(detail[key]) {
			if i, err := strconv.Atoi(strings.TrimPrefix(word, "#")); err == nil && strings.HasPrefix(word, "#") {
				grants = append(grants, i)
			}
		}
	}
	return grants
}

// pooled tells pooled-session hazard e (history.PooledSession): a pooler ran one client's
// lock statement in the server session (the backend, PostgreSQL's pg_backend_pid) that
// held the other's lock, and the server granted it again. Who held the session and who
// was handed it are the hazard's (detail holder and granted, in the order the pooler's
// watcher saw the grants), else the earlier and the later holder; the pooler is the
// hazard's fault, else "the pooler".
func (t *teller) pooled(e, earlier, later history.Event) {
	holder, granted := proc(earlier.Process), proc(later.Process)
	if h, g := processNamed(e.Detail["holder"]), processNamed(e.Detail["granted"]); h != "" && g != "" && h != g {
		holder, granted = h, g
	}
	pooler := "the pooler"
	if e.Fault != "" {
		pooler = e.Fault
	}
	backend := e.Detail[history.BackendDetail]
	if backend == "" {
		backend = later.Detail[history.BackendDetail]
	}
	t.say(e, fmt.Sprintf("%s's lock was taken on server backend %s, which %s then handed to %s: %s's lock statement ran "+
		"in the session that already held the lock, and the server granted it again", holder, backend, pooler, granted, granted))
}

// processNamed is the client a hazard's detail names ("worker-2 #41") as p2, or "".
func processNamed(grant string) string {
	name, _, _ := strings.Cut(grant, " ")
	if p, ok := history.ClientTarget(name); ok {
		return proc(p)
	}
	return ""
}

func isHazard(e history.Event) bool {
	return e.Process == history.NemesisProcess && e.Func == history.HazardFunc
}

// targetNames names an event's targets in a sentence: workers as pN, nodes by name.
func targetNames(targets []string) string {
	var names []string
	for _, target := range targets {
		if name := processNamed(target); name != "" {
			target = name
		}
		names = append(names, target)
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// article puts "a" or "an" before a phrase.
func article(phrase string) string {
	if phrase != "" && strings.ContainsRune("aeiou", rune(phrase[0])) {
		return "an " + phrase
	}
	return "a " + phrase
}

// extended tells the first extend process p asked for between event indexes from and
// to whose answer came after other's grant at index granted: the lock's answer decides
// whether p writes.
func (t *teller) extended(from, granted, to, p int, other string) {
	x, ok := t.op(from, to, p, history.Extend)
	for ok && x.Complete != nil && x.Complete.Index < granted {
		x, ok = t.op(x.Complete.Index, to, p, history.Extend)
	}
	if !ok || x.Complete == nil {
		return
	}
	asked := fmt.Sprintf("%s asked to extend its lease at %s and ", proc(p), t.at(x.Invoke))
	if heard := t.at(*x.Complete); heard != t.at(x.Invoke) {
		asked = fmt.Sprintf("%s asked to extend its lease at %s, heard back at %s and ", proc(p), t.at(x.Invoke), heard)
	}
	switch x.Type() {
	case history.OK:
		t.say(x.Invoke, asked+"was told it still held the lock, though "+other+" had been granted it")
	case history.Fail:
		t.say(x.Invoke, asked+"was told the lock was no longer its own, so it did not write")
	default:
		t.say(x.Invoke, fmt.Sprintf("%sgot no answer it could trust (%s), so it did not write", asked, x.Complete.Message))
	}
}

// waited tells the first fault that stalled a holder while it waited for its grant (a
// client paused then may be told it holds the lock when it runs again): when it asked,
// when the fault struck, and when it ended, if before the grant.
func (t *teller) waited(h checkers.Holding) {
	asked, ok := t.event(h.Asked)
	if !ok || asked.Process != h.Process || asked.Func != history.Acquire || asked.Type != history.Invoke {
		return // an overlap saved before requests were named has none
	}
	for i, e := range t.events {
		if e.Index <= h.Asked || e.Index >= h.Granted {
			continue
		}
		if k, _ := history.KindOf(e.Fault); e.Process != history.NemesisProcess || e.Func != history.Start || k.Stalls == history.StallsNone || !strikes(e, h.Process) {
			continue
		}
		text := fmt.Sprintf("%s had asked for the lock at %s and %s (%s) at %s", proc(h.Process), t.at(asked), struck(e.Fault), e.Fault, t.at(e))
		for _, stop := range t.events[i+1:] {
			if stop.Index >= h.Granted {
				break
			}
			if stop.Process == history.NemesisProcess && stop.Func == history.Stop && stop.Fault == e.Fault && strikes(stop, h.Process) {
				text += fmt.Sprintf(", until %s", t.at(stop))
				break
			}
		}
		t.say(e, text)
		return
	}
}

// resumed tells when the first fault that struck process p, of a kind whose end is worth
// telling, ended after event index from: a pause's stop is the holder running again.
func (t *teller) resumed(from, p int) {
	for _, e := range t.events {
		if e.Index > from && e.Process == history.NemesisProcess && e.Func == history.Stop && strikes(e, p) &&
			back(e.Fault) != "" {
			t.say(e, fmt.Sprintf("%s %s at %s", proc(p), back(e.Fault), t.at(e)))
			return
		}
	}
}

// targetsOf names the targets of fault e in a sentence, process p's as pN; "" when e
// struck neither p nor a node.
func targetsOf(e history.Event, p int) string {
	var names []string
	for _, target := range e.Targets {
		switch {
		case target == history.TargetOfClient(p):
			names = append(names, proc(p))
		case strings.HasPrefix(target, "worker-"):
			// another client's fault is not this story's
		default:
			names = append(names, target)
		}
	}
	return strings.Join(names, ", ")
}

func strikes(e history.Event, p int) bool {
	return slices.Contains(e.Targets, history.TargetOfClient(p))
}

// struck is what a fault, as an event records it, did to what it struck, in its kind's
// words ("was paused"); a fault of no declared kind "was struck".
func struck(fault string) string {
	if k, ok := history.KindOf(fault); ok {
		return k.Struck
	}
	return "was struck"
}

// startTold is what fault e's kind tells of its start beyond its words; "" for nothing.
func startTold(e history.Event) string {
	if k, ok := history.KindOf(e.Fault); ok && k.Telling != nil && k.Telling.Start != nil {
		return k.Telling.Start(e)
	}
	return ""
}

// back is how what a fault struck came back when the fault stopped, in its kind's words
// ("resumed"); "" when that is not worth telling, or the kind is not declared.
func back(fault string) string {
	k, _ := history.KindOf(fault)
	return k.Back
}

// writeText tells write w by process name p and what the storage made of it.
func writeText(p string, w history.Op, at string) string {
	what := "wrote"
	if v := w.Value(); v != nil {
		what = fmt.Sprintf("wrote %d", *v)
	}
	if token := w.Token(); token != nil {
		what += fmt.Sprintf(" with token %d", *token)
	}
	switch {
	case w.Type() == history.OK:
		return fmt.Sprintf("%s %s at %s, and the storage accepted it", p, what, at)
	case w.Type() == history.Fail && w.Complete.Error == history.ErrStaleToken:
		return fmt.Sprintf("%s %s at %s, and the storage refused it as stale", p, what, at)
	case w.Type() == history.Fail:
		return fmt.Sprintf("%s %s at %s, and the storage refused it (%s)", p, what, at, w.Complete.Error)
	}
	return fmt.Sprintf("%s %s at %s, and never heard whether the storage took it", p, what, at)
}

// grantWords says what a grant was granted with: its token, and the lock client it came
// through in a run whose slots several clients share (history.ClientDetail).
func grantWords(grant history.Event) string {
	words := tokenText(grant.Token)
	if client := grant.Detail[history.ClientDetail]; client != "" {
		words += " through " + client
	}
	return words
}

func tokenText(token *int64) string {
	if token == nil {
		return ""
	}
	return fmt.Sprintf(" (token %d)", *token)
}

func (t *teller) at(e history.Event) string { return t.seconds(e.Time) }

// seconds is time ts since the history's first event, as "2.43 s".
func (t *teller) seconds(ts int64) string {
	return fmt.Sprintf("%.2f s", time.Duration(ts-t.start).Seconds())
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func proc(p int) string { return fmt.Sprintf("p%d", p) }
